"""The Hugging Face Trainer and Lightning adapters on the real local Slurm cluster: 2 ranks,
preempted once, resumed at the committed step with no step lost."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from slurm_helpers import wait_for

pytestmark = [pytest.mark.slurm]

PY = sys.executable
PROGRAMS = Path(__file__).resolve().parents[2] / "programs"


def spec(name: str, program: str, steps: int, *extra: str) -> dict:
    return {
        "name": name, "nodes": 1, "tasks_per_node": 2, "time_limit": "00:20:00",
        "program": {"argv": [PY, str(PROGRAMS / program), "--steps", str(steps),
                             "--step-time-s", "0.4", *extra]},
        "env": {"OMP_NUM_THREADS": "1"},
        "preemption": {"signal_lead_s": 120, "max_requeues": 2},
    }


def tagged(log: str, tag: str) -> list[dict]:
    return [json.loads(m) for m in re.findall(rf"^{tag} (\{{.*\}})$", log, re.M)]


def preempt_once(job, min_steps: int = 5) -> int:
    wait_for(lambda: len(tagged(job.log(), "hpcflow-step")) >= min_steps, 400, "training steps")
    job.signal_batch("USR1")
    requeue = wait_for(lambda: job.event("requeue", restart=0), 180, "the requeue")
    return int(requeue["step"])


def check_resumed_without_loss(job, committed: int, steps: int) -> list[dict]:
    final = job.wait_finished(600)
    assert final.state == "COMPLETED" and final.restarts == 1, job.dump()
    log = job.log()
    assert [r["step"] for r in tagged(log, "hpcflow-resume")] == [committed]
    seen = [s["step"] for s in tagged(log, "hpcflow-step")]
    second = seen[seen.index(committed) + 1:]
    assert second == list(range(committed + 1, steps + 1))  # starts right after the commit
    rep = json.loads(subprocess.run([PY, "-m", "hpcflow", "report", job.job_id, "--json"],
                                    capture_output=True, text=True, check=True).stdout)["data"]
    assert rep["totals"]["lost"] == 0.0
    return tagged(log, "hpcflow-step")


def test_hf_trainer_preempted_once_ends_bit_identical_to_an_uninterrupted_run(submit_job):
    steps = 24
    reference = submit_job(spec("hf-ref", "hf_trainer.py", steps))
    job = submit_job(spec("hf", "hf_trainer.py", steps))
    committed = preempt_once(job)
    check_resumed_without_loss(job, committed, steps)
    assert reference.wait_finished(600).state == "COMPLETED"
    done, ref = tagged(job.log(), "hf-done"), tagged(reference.log(), "hf-done")
    assert len(done) == 1 and done == ref and done[0]["step"] == steps


def test_lightning_preempted_once_resumes_at_the_committed_step(submit_job):
    steps = 60
    extra = ("--devices", "2")
    reference = submit_job(spec("pl-ref", "lightning_fit.py", steps, *extra))
    job = submit_job(spec("pl", "lightning_fit.py", steps, *extra))
    committed = preempt_once(job)
    lines = check_resumed_without_loss(job, committed, steps)
    assert reference.wait_finished(600).state == "COMPLETED"
    ref_lines = tagged(reference.log(), "hpcflow-step")
    loss = {s["step"]: s["loss"] for s in lines}
    ref_loss = {s["step"]: s["loss"] for s in ref_lines}
    # Up to the commit both runs saw the same data and weights: the same losses, exactly.
    assert [loss[s] for s in range(1, committed + 1)] == [ref_loss[s] for s in range(1, committed + 1)]
    # After the resume Lightning restarts the epoch's data order and the dropout streams (a
    # plain DataLoader has no state to restore; Lightning saves only rank 0's files), so the
    # curves are compared, not the weights: the mean loss of the last 10 steps within 50%.
    tail = sum(loss[s] for s in range(steps - 9, steps + 1)) / 10
    ref_tail = sum(ref_loss[s] for s in range(steps - 9, steps + 1)) / 10
    assert abs(tail - ref_tail) <= 0.5 * ref_tail
    assert tail < loss[1] / 4  # it trained on after the resume

