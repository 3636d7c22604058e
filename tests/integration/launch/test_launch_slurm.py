"""hpcflow.launch.Executor on the real local Slurm cluster: submitit's API, hpcflow's protocol.

A 2-node x 2-task FSDP2 training function submitted from Python and preempted twice (USR1 to
the batch shell, as Slurm sends it before a time limit) is requeued by hpcflow's batch script,
resumes on every rank from the committed sharded checkpoint, and returns through ``job.result()``
exactly what an uninterrupted run returns.
"""

from __future__ import annotations

import json
import re
import subprocess
import time

import pytest
from launch_helpers import ledger, wait_for
from launch_programs import Counter, add, fail, fsdp_train, linear_train, sleep_then

from hpcflow import protocol
from hpcflow.jobs import records
from hpcflow.launch import Executor
from hpcflow.slurm.client import SlurmClient

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(900)]

# The states a requeued job passes through before its next attempt: the old attempt's
# steps are still COMPLETING for a moment after the batch script has requeued it.
WAITING_TO_RESTART = ("PENDING", "REQUEUED", "RUNNING", "COMPLETING")


def events(job) -> list[dict]:  # noqa: ANN001
    return ledger(job.job_id)


def steps_in_attempt(log: str, attempt: int) -> int:
    parts = re.split(r"^hpcflow-start ", log, flags=re.M)
    return 0 if len(parts) < attempt + 2 else len(re.findall(r"^hpcflow-step ", parts[attempt + 1],
                                                             re.M))


def test_simple_function_returns_its_value_and_is_recorded(launch_cluster, launch_env):
    executor = Executor(launch_env, time_limit="00:04:00")  # the least with the default warning
    job = executor.submit(add, 5, 7)
    assert job.result() == 12
    rec = records.find_job(job.job_id)
    assert rec is not None and rec.name == "add"
    script = (rec.log_path.parent / "job.sbatch").read_text()
    assert "#SBATCH --requeue" in script and "#SBATCH --signal=B:USR1@" in script
    assert "submitit.core._submit" in script and "trap 'hpcflow_pass_on USR1' USR1" in script
    # The result file comes first; the batch script's ledger records follow once the step ended.
    wait_for(lambda: [e["event"] for e in events(job)][-1] == "job_end", 30, "job_end last")
    wait_for(lambda: job.state == "COMPLETED", 30, "state COMPLETED")


def test_a_function_that_finishes_with_the_done_record_still_returns_its_value(
        launch_cluster, launch_env):
    executor = Executor(launch_env, time_limit="00:03:00")
    job = executor.submit(linear_train, {"seed": 3, "steps": 4, "finish": True})
    result = job.result()
    assert result["step"] == 4 and result["first_step"] == 0
    rec = records.find_job(job.job_id)
    done = protocol.state_dir(rec.run_dir) / protocol.done_name(job.job_id, 0)
    assert json.loads(done.read_text())["step"] == 4
    # result() is there once rank 0 wrote it; the batch script ends the job just after.
    ends = wait_for(lambda: [e["reason"] for e in events(job) if e["event"] == "job_end"], 60,
                    "job_end in the ledger")
    assert ends == ["completed"]


def test_raising_function_is_not_requeued_and_result_raises_the_remote_traceback(
        launch_cluster, launch_env):
    executor = Executor(launch_env, time_limit="00:03:00")
    job = executor.submit(fail, "boom from the node")
    with pytest.raises(Exception) as info:
        job.result()
    text = str(info.value)
    assert "ValueError: boom from the node" in text and "launch_programs.py" in text, text
    ends = wait_for(lambda: [e for e in events(job) if e["event"] == "job_end"], 60,
                    "job_end in the ledger")
    assert [e["reason"] for e in ends] == ["failed"]
    assert not [e for e in events(job) if e["event"] == "requeue"]
    assert wait_for(lambda: job.state in ("FAILED", "COMPLETED") and job.state, 60, "final state"
                    ) == "FAILED"


def test_fsdp_function_preempted_twice_returns_the_uninterrupted_result(launch_cluster, launch_env):
    cfg = {"steps": 16, "step_time_s": 0.3}
    executor = Executor(launch_env, nodes=2, tasks_per_node=2, time_limit="00:10:00",
                        preemption={"max_requeues": 3})
    straight = executor.submit(fsdp_train, cfg)
    expected = straight.results()
    assert [r["rank"] for r in expected] == [0, 1, 2, 3]
    assert straight.result() == expected[0] and expected[0]["restart"] == 0

    job = executor.submit(fsdp_train, cfg)
    committed = []
    for attempt in range(2):
        wait_for(lambda a=attempt: steps_in_attempt(job.stdout() or "", a) >= 3, 300,
                 f"three steps of attempt {attempt}")
        SlurmClient().warn_batch(job.job_id, "USR1")
        requeue = wait_for(lambda a=attempt: next((e for e in events(job) if e["event"] ==
                                                   "requeue" and e["restart"] == a), None),
                           180, f"the requeue of attempt {attempt}")
        committed.append(int(requeue["step"]))
        # While it waits to restart, the job is neither done nor in a final state.
        assert not job.done(force_check=True)
        assert job.state in WAITING_TO_RESTART
    got = job.result()
    assert got["restart"] == 2 and 0 < committed[0] < committed[1] < cfg["steps"]
    assert got["first_step"] == committed[1]
    same = {k: got[k] for k in ("params_sha256", "optim_sha256", "step")}
    assert same == {k: expected[0][k] for k in same}
    wait_for(lambda: job.state == "COMPLETED", 60, "state COMPLETED")
    ends = [json.dumps(e) for e in events(job) if e["event"] == "job_end"]
    assert len(ends) == 1 and '"completed"' in ends[0]


def joined(job, restart: int) -> bool:  # noqa: ANN001
    rec = records.find_job(job.job_id)
    folder = protocol.state_dir(rec.run_dir) / protocol.joined_name(job.job_id, restart)
    return (folder / "0").exists()


def test_checkpointable_is_checkpointed_by_rank0_and_requeued_by_the_batch_script(
        launch_cluster, launch_env):
    executor = Executor(launch_env, time_limit="00:05:00")
    job = executor.submit(Counter(), 40, 0.25)
    wait_for(lambda: joined(job, 0), 120, "the Checkpointable to join")
    time.sleep(2)
    SlurmClient().warn_batch(job.job_id, "USR1")
    wait_for(lambda: any(e["event"] == "requeue" for e in events(job)), 120, "the requeue")
    assert not job.done(force_check=True)
    assert job.state in WAITING_TO_RESTART
    got = job.result()
    assert got["done"] == 40 and len(got["starts"]) == 2 and 0 < got["starts"][1] < 40, got
    assert "checkpoint() stored" in (job.stdout() or "")


def test_function_without_the_protocol_survives_the_warning_signal(launch_cluster, launch_env):
    executor = Executor(launch_env, time_limit="00:05:00")
    job = executor.submit(sleep_then, 8.0, "still here")
    wait_for(lambda: "Loading pickle" in (job.stdout() or ""), 120, "the task to start")
    # Sent to every process of the step, as a stray signal would be; not to the batch shell.
    subprocess.run(["scancel", "--signal=USR1", job.job_id], check=True)
    assert job.result() == "still here"
    assert "reached a function that has not joined" in (job.stdout() or "")
    assert not [e for e in events(job) if e["event"] == "requeue"]
