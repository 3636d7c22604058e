"""Programs that catch the warning themselves, with no hpcflow code (docs/your-training-loop.md,
"Programs that catch the warning themselves"), on the real local cluster: a Lightning script on
its defaults and a plain script with its own USR1 handler are given the warning, keep their
work, come back once and finish; Slurm's state tells the truth."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from slurm_helpers import wait_for

pytestmark = [pytest.mark.slurm]

PY = sys.executable
PROGRAMS = Path(__file__).resolve().parents[2] / "programs"


def numbers(log: str, tag: str) -> list[int]:
    return [int(n) for n in re.findall(rf"^{tag} (\d+)$", log, re.M)]


def lightning(name: str, steps: int, **preemption) -> dict:  # noqa: ANN003
    return {"name": name, "nodes": 1, "tasks_per_node": 2, "time_limit": "00:20:00",
            "program": {"argv": [PY, str(PROGRAMS / "lightning_defaults.py"), "--steps",
                                 str(steps), "--devices", "2"]},
            "env": {"OMP_NUM_THREADS": "1"},
            "preemption": {"signal_lead_s": 120, "requeue_margin_s": 15, **preemption}}


def test_a_lightning_script_on_its_defaults_is_given_a_spot_warning_and_finishes(submit_job):
    """A spot notice (deadline in 50 s) and its USR1: every process of the step catches USR1
    (Lightning's handler), so it is forwarded; Lightning saves hpc_ckpt_1.ckpt; the job comes
    back once (by Lightning's own requeue or by hpcflow's at the margin, never both), though
    max_requeues is 0: a preemption counts against max_preemptions."""
    steps = 120
    job = submit_job(lightning("pl-defaults", steps, max_requeues=0))
    wait_for(lambda: len(numbers(job.log(), "pl-step")) >= 10, 400, "Lightning steps")
    job.notice(deadline_in_s=50)
    job.signal_batch("USR1")
    final = job.wait_finished(900)
    log = job.log()
    assert final.state == "COMPLETED" and final.exit_code == 0 and final.restarts == 1, job.dump()
    check = job.event("signal", restart=0)["catch"]
    assert check["forwarded"] is True and "catches USR1 itself" in check["why"], check
    requeues = [e for e in job.events() if e["event"] == "requeue"]
    assert len(requeues) == 1 and requeues[0]["cause"] == "preemption", requeues
    resumed = numbers(log, "pl-resumed")
    assert len(resumed) == 1 and resumed[0] > 0, log  # from Lightning's own hpc checkpoint
    assert numbers(log, "pl-done") == [steps]
    assert final.budgets["preemptions"] == [1, 20] and final.budgets["time_limit_requeues"][0] == 0


def test_a_script_that_saves_on_its_own_handler_and_exits_0_is_requeued_and_finishes(submit_job):
    steps = 150
    job = submit_job({"name": "own-handler", "nodes": 1, "tasks_per_node": 1,
                      "time_limit": "00:20:00",
                      "program": {"argv": [PY, str(PROGRAMS / "own_usr1_handler.py"), str(steps)]},
                      "preemption": {"signal_lead_s": 120, "max_requeues": 1}})
    wait_for(lambda: len(numbers(job.log(), "own-step")) >= 5, 300, "steps")
    job.signal_batch("USR1")
    final = job.wait_finished(600)
    log = job.log()
    assert final.state == "COMPLETED" and final.restarts == 1, job.dump()
    saved = numbers(log, "own-saved")
    assert len(saved) == 1 and numbers(log, "own-step")[len(numbers(log, "own-step")) - 1] == steps
    second = numbers(log.split(f"own-saved {saved[0]}")[1], "own-step")
    assert second[0] == saved[0] + 1  # it resumed from its own save: no step lost
    assert job.event("requeue", restart=0)["checkpoint"] is False
    assert numbers(log, "own-done") == [steps]


def test_a_lightning_script_with_no_requeue_left_ends_failed_not_completed(submit_job):
    job = submit_job(lightning("pl-no-requeue", 400, max_requeues=0))
    wait_for(lambda: len(numbers(job.log(), "pl-step")) >= 10, 400, "Lightning steps")
    job.signal_batch("USR1")  # a time-limit warning (no notice): max_requeues 0 is used up
    final = job.wait_finished(600)
    assert final.state == "FAILED" and final.exit_code != 0, job.dump()
    assert final.ending in ("requeue_limit", "program_requeued"), final
