"""Any program on the real local Slurm cluster: a researcher's own loop on the public API, a
plain script that never heard of hpcflow, and a warning that arrives before any rank is up."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from slurm_helpers import wait_for

from hpcflow.runtime.env import free_port

pytestmark = [pytest.mark.slurm]

PY = sys.executable
PROGRAMS = Path(__file__).resolve().parents[2] / "programs"


def user_loop_spec(steps: int, **extra) -> dict:
    spec = {
        "name": "user-loop",
        "nodes": 2,
        "tasks_per_node": 2,
        "time_limit": "00:20:00",
        "program": {"argv": [PY, str(PROGRAMS / "fsdp_loop.py"), "--steps", str(steps),
                             "--step-time-s", "0.3"]},
        "env": {"OMP_NUM_THREADS": "1"},
        "preemption": {"signal_lead_s": 120, "max_requeues": 3},
        "checkpoint": {"keep": 2, "interval_steps": 0},
    }
    spec.update(extra)
    return spec


def tagged(log: str, tag: str) -> list[dict]:
    return [json.loads(m) for m in re.findall(rf"^{tag} (\{{.*\}})$", log, re.M)]


def steps_logged(log: str) -> list[int]:
    return [p["step"] for p in tagged(log, "hpcflow-step")]


def report(job_id: str) -> dict:
    proc = subprocess.run([PY, "-m", "hpcflow", "report", job_id, "--json"],
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)["data"]


def test_own_fsdp_loop_preempted_ends_like_an_uninterrupted_run(submit_job):
    steps = 24
    reference = submit_job(user_loop_spec(steps))
    job = submit_job(user_loop_spec(steps))
    wait_for(lambda: len(steps_logged(job.log())) >= 4 and job.event("attempt_start", restart=0),
             400, "steps of the first attempt")
    job.signal_batch("USR1")
    wait_for(lambda: job.event("requeue", restart=0), 180, "the requeue")
    final = job.wait_finished(600)
    assert final.state == "COMPLETED" and final.restarts == 1, job.dump()
    ref = reference.wait_finished(600)
    assert ref.state == "COMPLETED" and ref.restarts == 0
    signals = [e for e in job.events() if e["event"] == "signal"]
    assert [e["forwarded"] for e in signals] == [True]  # every rank had joined
    resumes = [r["step"] for r in tagged(job.log(), "hpcflow-resume")]
    assert len(resumes) == 1 and resumes[0] >= 4
    done, ref_done = tagged(job.log(), "user-done"), tagged(reference.log(), "user-done")
    assert len(done) == 1 and done == ref_done
    assert done[0]["step"] == steps


def test_plain_ddp_script_is_not_killed_but_requeued_and_resumes_its_own_checkpoint(
        submit_job, tmp_path):
    ckpt = tmp_path / "plain.pt"
    spec = {
        "name": "plain-ddp",
        "nodes": 2,
        "tasks_per_node": 2,
        "time_limit": "00:20:00",
        "program": {"argv": [PY, str(PROGRAMS / "plain_ddp.py"), "--steps", "30",
                             "--ckpt", str(ckpt)]},
        "env": {"OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(free_port())},
        "preemption": {"signal_lead_s": 120, "max_requeues": 2, "requeue_margin_s": 30},
    }
    job = submit_job(spec)
    plain_steps = lambda: [int(n) for n in re.findall(r"^plain-step (\d+)$", job.log(), re.M)]  # noqa: E731
    wait_for(lambda: len(plain_steps()) >= 6, 400, "the plain script's steps")
    # A notice that the nodes go away in 40 s: with a 30 s margin the program has 10 s more.
    job.notice(40)
    signalled_at = time.time()
    job.signal_batch("USR1")
    at_signal = len(plain_steps())
    requeue = wait_for(lambda: job.event("requeue", restart=0), 120, "the requeue")
    at_requeue = len(plain_steps())
    assert requeue["checkpoint"] is False and requeue["step"] is None
    stop = job.event("stop", restart=0)
    assert stop is not None and stop["time"] >= signalled_at + 5  # ran on after the warning
    signal = job.event("signal", restart=0)
    assert signal["forwarded"] is False and signal["joined"] == 0
    final = job.wait_finished(600)
    log = job.log()
    assert final.state == "COMPLETED" and final.exit_code == 0 and final.restarts == 1, job.dump()
    # Not killed by the warning: it trained on (0.5 s a step) until it was stopped.
    assert at_requeue >= at_signal + 3
    resumed = [int(n) for n in re.findall(r"^plain-resume (\d+)$", log, re.M)]
    assert len(resumed) == 1 and resumed[0] % 5 == 0 and resumed[0] >= 5
    assert "plain-done 30" in log
    rep = report(job.job_id)
    assert [a["outcome"] for a in rep["attempts"]] == ["requeued_no_checkpoint", "completed"]


def test_warning_before_any_rank_is_up_ends_in_a_requeue_and_the_job_completes(submit_job):
    job = submit_job(user_loop_spec(8))
    wait_for(lambda: job.event("attempt_start", restart=0), 300, "the first attempt to start")
    job.signal_batch("USR1")  # the ranks are still importing torch, if they started at all
    requeue = wait_for(lambda: job.event("requeue", restart=0), 300, "the requeue")
    assert requeue.get("checkpoint") is not False
    signal = job.event("signal", restart=0)
    assert signal["forwarded"] is False  # no rank had its handler yet
    final = job.wait_finished(600)
    assert final.state == "COMPLETED" and final.restarts == 1, job.dump()
    assert tagged(job.log(), "user-done")[0]["step"] == 8
