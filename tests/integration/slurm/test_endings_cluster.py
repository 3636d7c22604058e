"""Every kind of ending told apart, on the real local Slurm cluster: a rank that aborts after
the job is done, a checkpoint directory that fills up, a killed rank, a held job."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from slurm_helpers import wait_for

from hpcflow import ending_kinds as K
from hpcflow import protocol as P
from hpcflow.local_cluster.processes import rank_pid

pytestmark = [pytest.mark.slurm]

PY = sys.executable
PROGRAMS = Path(__file__).parents[2] / "programs"


def spec(program: dict, **extra) -> dict:
    # resilience off: how a step's failure ends the job, not how it is restarted in the
    # allocation (tests/integration/slurm/test_resilience.py)
    return {"name": "endings", "nodes": 2, "tasks_per_node": 1, "time_limit": "00:10:00",
            "program": program, "env": {"OMP_NUM_THREADS": "1"},
            "checkpoint": {"keep": 2, "interval_steps": 2}, "resilience": False, **extra}


def train(steps: int, step_time_s: float = 0.2) -> dict:
    return {"module": "hpcflow.examples.train",
            "args": ["--steps", str(steps), "--step-time-s", str(step_time_s)]}


def hpcflow(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "hpcflow", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_a_rank_that_aborts_after_done_does_not_fail_a_finished_job(submit_job):
    job = submit_job(spec({"argv": [PY, str(PROGRAMS / "abort_after_done.py"), "--steps", "6"]},
                          env={"OMP_NUM_THREADS": "1", "ABORT_AFTER_DONE_RANK": "1"}))
    final = job.wait_finished(300)
    step_end, job_end = job.event("step_end"), job.event("job_end")
    assert step_end["rc"] != 0, step_end  # srun saw the abort...
    assert job_end["reason"] == "completed_after_done" and job_end["rc"] == 0  # ...the job is done
    assert final.state == "COMPLETED" and final.ending == K.ENDING_COMPLETED
    assert 'user-done {"step": 6}' in job.log()
    done = json.loads((P.state_dir(job.run_dir) / P.done_name(job.job_id, 0)).read_text())
    assert done["step"] == 6
    assert (Path(job.run_dir) / "checkpoints" / "step_6" / "hpcflow-commit.json").exists()


def test_a_full_checkpoint_disk_and_a_killed_rank_are_told_apart(submit_job, full_disk):
    full = submit_job(spec(train(8), checkpoint={"keep": 2, "interval_steps": 2,
                                                 "dir": str(full_disk)}))
    full_status = full.wait_finished(300)
    killed = submit_job(spec(train(400)))
    wait_for(lambda: "hpcflow-step" in killed.log(), 300, "training steps")
    pid = wait_for(lambda: rank_pid(killed.job_id, 1, "hpcflow.examples.train"), 60, "the pid of rank 1")
    os.kill(pid, signal.SIGKILL)
    killed_status = killed.wait_finished(300)

    # The full disk: every rank recorded the runtime's checkpoint status 5.
    end = full.event("step_end")
    assert end["first_failure"]["rc"] == 5 and end["ranks_exited"] == 2, end
    assert "No space left on device" in end["first_failure"]["reason"], end
    assert full.event("job_end")["reason"] == "program_error"
    assert full_status.ending == K.ENDING_PROGRAM_ERROR
    assert "exited with status 5" in full_status.reason
    # The killed rank: it left no record; srun reported a signal.
    end = killed.event("step_end")
    assert 1 in end["missing"] and end["rc"] > 128, end
    assert killed.event("job_end")["reason"] == "rank_killed"
    assert killed_status.ending == K.ENDING_RANK_KILLED
    assert "left no exit record (killed by a signal)" in killed_status.reason
    shown = [json.loads(hpcflow("status", j.job_id, "--json").stdout)["data"]
             for j in (full, killed)]
    assert [s["ending"] for s in shown] == [K.ENDING_PROGRAM_ERROR, K.ENDING_RANK_KILLED]
    assert "exited with status 5" in shown[0]["reason"]
    assert "left no exit record" in shown[1]["reason"]
    # With resilience off too, the report shows the first failing rank's traceback.
    full_rep = json.loads(hpcflow("report", full.job_id, "--json").stdout)["data"]
    error = full_rep["failures"][0]["error"]
    assert error is not None and error["try"] == 0, full_rep["failures"]
    assert error["type"] == "CheckpointError" and "No space left on device" in error["traceback"]
    rep = json.loads(hpcflow("report", killed.job_id, "--json").stdout)["data"]
    assert rep["attempts"][0]["ending"] == K.ENDING_RANK_KILLED
    assert [f["kind"] for f in rep["failures"]] == [K.ENDING_RANK_KILLED]
    # srun names the first task that failed; the report shows it.
    assert "srun: task 1 on n2: Killed" in rep["failures"][0]["detail"], rep["failures"]


def test_a_held_job_says_how_to_release_it_and_logs_f_returns(submit_job):
    job = submit_job(spec(train(400)))
    wait_for(lambda: "hpcflow-step" in job.log(), 300, "training steps")
    subprocess.run(["scontrol", "requeuehold", job.job_id], check=True)
    st = wait_for(lambda: (s := job.status()).ending == K.ENDING_HELD and s, 60, "a held status")
    assert not st.finished and f"needs `scontrol release {job.job_id}`" in st.reason
    started = time.monotonic()
    follow = hpcflow("logs", "-f", job.job_id, timeout=60)
    assert time.monotonic() - started < 30
    assert follow.returncode == 1 and "is held" in follow.stderr
    assert "hpcflow-step" in follow.stdout  # what the log held was shown first
    shown = hpcflow("status", job.job_id)
    assert shown.returncode == 0 and f"scontrol release {job.job_id}" in shown.stdout


def test_hpcflow_cancel_of_a_training_job_ends_it_and_never_requeues(submit_job):
    """The ranks take Slurm's TERM as a stop request and commit a checkpoint; the supervisor got
    TERM too, so it knows Slurm is ending the job: cancelled, never requeued."""
    job = submit_job({**spec(train(400)), "resilience": True})
    wait_for(lambda: '"step": 4' in job.log(), 300, "the first steps")
    proc = hpcflow("cancel", job.job_id)
    assert proc.returncode == 0, proc.stderr
    final = job.wait_finished(240)
    assert (final.state, final.restarts) == ("CANCELLED", 0), job.dump()
    events = [e["event"] for e in job.events()]
    assert "requeue" not in events and events[-1] == "job_end"
    assert job.event("job_end")["reason"] == P.REASON_CANCELLED
    assert final.ending == K.ENDING_CANCELLED
