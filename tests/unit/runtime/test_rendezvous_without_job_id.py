"""The rendezvous port without SLURM_JOB_ID (container set-ups that drop it): derived from what
the step has, the same on every rank; or an error that names what is missing and why."""

from __future__ import annotations

import pytest

from hpcflow.protocol import PORT_BASE, PORT_SPAN, port_for_job_number
from hpcflow.runtime.env import dist_env_from

STEP = {
    "SLURM_JOB_NODELIST": "queue-dy-p548xlarge-[1-2]", "SLURM_NTASKS": "16",
    "SLURM_TASKS_PER_NODE": "8(x2)", "SLURM_STEP_ID": "0", "SLURM_STEP_LAUNCHER_PORT": "41234",
}


def rank(procid: int, **changes: str | None) -> dict[str, str]:
    env = {**STEP, "SLURM_PROCID": str(procid), "SLURM_LOCALID": str(procid % 8),
           "SLURM_NODEID": str(procid // 8)}
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def test_every_rank_of_the_step_derives_the_same_port():
    ports = {dist_env_from(rank(r)).master_port for r in range(16)}
    assert len(ports) == 1
    [port] = ports
    assert PORT_BASE <= port < PORT_BASE + PORT_SPAN


@pytest.mark.parametrize("change", [
    pytest.param({"SLURM_STEP_ID": "1"}, id="another-step"),
    pytest.param({"SLURM_STEP_LAUNCHER_PORT": "41235"}, id="another-srun"),
    pytest.param({"SLURM_JOB_NODELIST": "queue-dy-p548xlarge-[3-4]"}, id="other-nodes"),
])
def test_another_step_gets_another_port(change):
    assert dist_env_from(rank(0, **change)).master_port != dist_env_from(rank(0)).master_port


def test_the_older_job_id_name_is_used_when_the_new_one_is_gone():
    env = dist_env_from(rank(3, SLURM_JOBID="4242"))
    assert (env.job_id, env.master_port) == ("4242", port_for_job_number(4242))


def test_without_job_or_step_id_the_error_says_what_is_missing_and_why():
    with pytest.raises(ValueError) as info:
        dist_env_from(rank(0, SLURM_STEP_ID=None))
    text = str(info.value)
    assert "SLURM_JOB_ID is not set (nor SLURM_JOBID), and neither is SLURM_STEP_ID" in text
    assert "every rank must derive the same MASTER_PORT" in text and "set MASTER_PORT" in text


def test_a_garbled_step_id_names_the_variable():
    with pytest.raises(ValueError, match="SLURM_STEP_ID='x'"):
        dist_env_from(rank(0, SLURM_STEP_ID="x"))


def test_master_port_set_by_hand_still_wins():
    assert dist_env_from(rank(0, MASTER_PORT="29500")).master_port == 29500
