"""Sweeps through hpcflow.launch: ``map_array`` and ``batch()`` become one Slurm job array with a
concurrency limit; each element has its own run directory, checkpoints, log and ledger, and a
preempted element is requeued alone (``<arrayjob>_<task>``)."""

from __future__ import annotations

import re

import pytest
from launch_helpers import ledger, wait_for
from launch_programs import add, linear_train

from hpcflow.jobs import records
from hpcflow.launch import Executor
from hpcflow.slurm.client import SlurmClient

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(900)]



def test_batch_submits_one_array_with_its_concurrency_limit(launch_cluster, launch_env):
    executor = Executor(launch_env, time_limit="00:03:00", slurm_array_parallelism=2)
    jobs = []
    with executor.batch():
        for k in range(3):
            jobs.append(executor.submit(add, k, 10))
    ids = [j.job_id for j in jobs]
    array_id = ids[0].split("_")[0]
    assert ids == [f"{array_id}_{k}" for k in range(3)]
    assert [j.result() for j in jobs] == [10, 11, 12]
    script = (records.find_job(ids[0]).log_path.parent.parent / "job.sbatch").read_text()
    assert "#SBATCH --array=0-2%2" in script
    for k, job in enumerate(jobs):
        rec = records.find_job(job.job_id)
        assert rec.run_dir.endswith(f"/{k}") and rec.log_path.exists()
        wait_for(lambda j=job: [e["event"] for e in ledger(j.job_id)][-1:] == ["job_end"], 60,
                 "job_end last")


def test_array_of_four_with_one_preempted_element(launch_cluster, launch_env, tmp_path):
    cfgs = [{"seed": k, "steps": 12, "step_time_s": 0.4 if k == 1 else 0.0} for k in range(4)]
    # What element 1 returns when nothing interrupts it: the same function on the local
    # executor (no Slurm, no preemption).
    local = Executor(tmp_path / "local", cluster="local", time_limit="00:05:00")
    expected = local.submit(linear_train, cfgs[1]).result()

    executor = Executor(launch_env, time_limit="00:05:00", slurm_array_parallelism=4)
    jobs = executor.map_array(linear_train, cfgs)
    target = jobs[1]

    def element_steps() -> int:
        return len(re.findall(r"^hpcflow-step ", target.stdout() or "", re.M))

    wait_for(lambda: element_steps() >= 3, 300, "three steps of element 1")
    SlurmClient().warn_batch(target.job_id, "USR1")
    wait_for(lambda: any(e["event"] == "requeue" for e in ledger(target.job_id)), 180,
             "the requeue of element 1")
    assert not target.done(force_check=True)
    results = [j.result() for j in jobs]
    assert [r["step"] for r in results] == [12] * 4
    assert [r["restart"] for r in results] == [0, 1, 0, 0]
    assert results[1]["first_step"] > 0
    assert results[1]["params_sha256"] == expected["params_sha256"]
    assert len({r["params_sha256"] for r in results}) == 4
    # Each element trained in its own run directory, with its own checkpoints and ledger.
    assert [r["run_dir"] for r in results] == [records.find_job(j.job_id).run_dir for j in jobs]
    for k, job in enumerate(jobs):
        requeues = [e for e in ledger(job.job_id) if e["event"] == "requeue"]
        assert len(requeues) == (1 if k == 1 else 0), (k, requeues)
    assert (records.find_job(target.job_id).log_path.parent.parent / "checkpoints" / "1").is_dir()
