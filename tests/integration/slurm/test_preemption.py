"""The main job end to end on the real local Slurm cluster: USR1 -> every rank checkpoints ->
requeue -> resume; and the cases where hpcflow must NOT requeue."""

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


def train_spec(steps: int, **extra) -> dict:
    spec = {
        "name": "tiny-dp",
        "nodes": 2,
        "tasks_per_node": 2,
        "time_limit": "00:20:00",
        "program": {"module": "hpcflow.examples.train",
                    "args": ["--steps", str(steps), "--step-time-s", "0.3"]},
        "env": {"OMP_NUM_THREADS": "1"},
        "preemption": {"signal_lead_s": 120, "max_requeues": 3},
        "checkpoint": {"keep": 2, "interval_steps": 0},
    }
    spec.update(extra)
    return spec


def steps_logged(log: str) -> list[int]:
    return [json.loads(m)["step"] for m in re.findall(r"^hpcflow-step (\{.*\})$", log, re.M)]


def test_preempted_job_checkpoints_requeues_resumes_and_completes(submit_job):
    job = submit_job(train_spec(steps=30))
    wait_for(lambda: len(steps_logged(job.log())) >= 4, 300, "training steps in the log")
    job.signal_batch("USR1")
    requeue = wait_for(lambda: job.event("requeue", restart=0), 120, "the requeue event")
    committed = int(requeue["step"])
    assert committed >= 4
    # No `scontrol update StartTime=now` here: Slurm revokes the old attempt's credential for
    # cred_expire seconds and kills a requeued batch job that starts before that ("Job credential
    # revoked"). The local cluster keeps that delay short instead.
    final = job.wait_finished(300)
    log = job.log()
    assert final.state == "COMPLETED" and final.exit_code == 0
    assert final.restarts == 1 and final.attempts == 2
    # Both attempts are in the one log file (--open-mode=append): two attempt starts.
    assert len([e for e in job.events() if e["event"] == "attempt_start"]) == 2
    resumes = [json.loads(m) for m in re.findall(r"^hpcflow-resume (\{.*\})$", log, re.M)]
    assert [r["step"] for r in resumes] == [committed]
    steps = steps_logged(log)
    # The second attempt starts at the step after the committed one and reaches the end.
    second = steps[steps.index(committed + 1, steps.index(committed)):]
    assert second[0] == committed + 1 and second[-1] == 30
    assert "hpcflow-done" in log
    # The goodput report: a warned preemption loses no step.
    proc = subprocess.run([PY, "-m", "hpcflow", "report", job.job_id, "--json"],
                          capture_output=True, text=True, check=True)
    rep = json.loads(proc.stdout)["data"]
    assert [a["outcome"] for a in rep["attempts"]] == ["requeue", "completed"]
    # No spot notice in the ledger: the warning reads as the time-limit one (a USR1 sent by
    # hand arrives as Slurm's does; docs/protocol.md, "Where a warning came from").
    assert [a["ending"] for a in rep["attempts"]] == ["preempted", "completed"]
    assert "USR1 without a spot notice" in rep["attempts"][0]["detail"]
    assert rep["totals"]["lost"] == 0.0 and 0 < rep["goodput"] < 1
    assert rep["attempts"][1]["resumed_from"] == committed
    assert Path(rep["svg"]).read_text().startswith("<svg")


def test_requeue_bound_is_honoured(submit_job):
    job = submit_job(train_spec(steps=200, nodes=1, tasks_per_node=2,
                                preemption={"signal_lead_s": 120, "max_requeues": 0}))
    wait_for(lambda: len(steps_logged(job.log())) >= 2, 300, "training steps in the log")
    job.signal_batch("USR1")
    final = job.wait_finished(300)
    assert final.state == "FAILED" and final.exit_code == 75
    assert final.restarts == 0
    assert job.event("requeue") is None
    assert job.event("job_end")["reason"] == "requeue_limit"


def test_failing_program_is_not_requeued(submit_job):
    job = submit_job({"name": "fails", "nodes": 1, "tasks_per_node": 1, "time_limit": "5",
                      "program": {"argv": [PY, "-c", "import sys; sys.exit(3)"]}})
    final = job.wait_finished(300)
    assert (final.state, final.exit_code, final.restarts) == ("FAILED", 3, 0)
    assert job.event("requeue") is None
    assert job.event("job_end")["reason"] == "failed"


def test_signal_without_a_committed_checkpoint_does_not_requeue(submit_job):
    # A program that joined the protocol (its handler is installed and announced) but fails
    # after the warning without committing a checkpoint: the job ends rather than requeue into
    # a loop.
    code = ("import os, sys, time\n"
            "from hpcflow.runtime.preemption import PreemptionMonitor\n"
            "m = PreemptionMonitor(os.environ['HPCFLOW_PREEMPT_FLAG'])\n"
            "m.announce(os.environ['HPCFLOW_JOINED_DIR'], 0)\n"
            "print('ready', flush=True)\n"
            "while not m.local_requested():\n"
            "    time.sleep(0.1)\n"
            "sys.exit(3)\n")
    job = submit_job({"name": "nockpt", "nodes": 1, "tasks_per_node": 1, "time_limit": "5",
                      "program": {"argv": [PY, "-c", code]}})
    wait_for(lambda: "ready" in job.log(), 300, "the program to start")
    job.signal_batch("USR1")
    final = job.wait_finished(300)
    assert final.restarts == 0 and final.state == "FAILED"
    assert job.event("requeue") is None
    assert job.event("signal")["forwarded"] is True
    assert job.event("job_end")["reason"] == "preempted_no_checkpoint"


def test_a_program_that_never_joins_is_not_killed_by_the_warning(submit_job):
    # USR1's default action would kill it; hpcflow never forwards the signal to it, so it runs
    # on and completes (its deadline, 30 s before the 5 min limit, is not reached).
    code = "import time\nprint('ready', flush=True)\ntime.sleep(20)\nprint('finished')\n"
    job = submit_job({"name": "unaware", "nodes": 1, "tasks_per_node": 1, "time_limit": "5",
                      "program": {"argv": [PY, "-c", code]}})
    wait_for(lambda: "ready" in job.log(), 300, "the program to start")
    job.signal_batch("USR1")
    final = job.wait_finished(300)
    assert final.state == "COMPLETED" and final.restarts == 0
    assert "finished" in job.log()
    assert job.event("signal")["forwarded"] is False and job.event("requeue") is None


def test_hostile_arguments_and_env_reach_the_program_literally(submit_job, tmp_path):
    pwned = tmp_path / "pwned"
    hostile = ["it's", 'say "hi"', f"$(touch {pwned})", f"`touch {pwned}`", "two\nlines",
               "a b  c", "back\\slash", "*", "$HOME", "--", ""]
    code = ("import json, os, sys\n"
            "print('RESULT ' + json.dumps({'argv': sys.argv[1:], 'env': os.environ['HOSTILE'],"
            " 'cwd_ok': os.path.isdir(os.environ['HPCFLOW_RUN_DIR'])}), flush=True)\n")
    run_dir = tmp_path / "it's a $(dir) `x`"
    job = submit_job({"name": "hostile", "nodes": 1, "tasks_per_node": 1, "time_limit": "5",
                      "run_dir": str(run_dir),
                      "program": {"argv": [PY, "-c", code, *hostile]},
                      "env": {"HOSTILE": "v'a\"l $(x) `y`\nz"}})
    final = job.wait_finished(300)
    assert final.state == "COMPLETED", job.log()
    line = next(ln for ln in job.log().splitlines() if ln.startswith("RESULT "))
    got = json.loads(line[len("RESULT "):])
    assert got == {"argv": hostile, "env": "v'a\"l $(x) `y`\nz", "cwd_ok": True}
    assert job.log_path.parent == run_dir
    assert not pwned.exists()


def test_slurms_own_time_limit_warning_reaches_the_trap(submit_job):
    # No scancel here: Slurm itself sends USR1 signal_lead_s before the job's limit, the ranks
    # commit a checkpoint, and with max_requeues 0 the job ends. The spec's shortest limit for a
    # 90 s lead is 210 s (time_limit - lead >= 120 s); once the ranks train, the limit is cut to
    # 2 minutes as a user or an admin may (scontrol update), so the warning is due 30 s into the
    # job and Slurm sends it at its next time-limit pass instead of 2 minutes in.
    job = submit_job(train_spec(steps=100_000, time_limit="00:03:30", nodes=1, tasks_per_node=2,
                                preemption={"signal_lead_s": 90, "max_requeues": 0}))
    wait_for(lambda: len(steps_logged(job.log())) >= 1, 300, "a training step in the log")
    subprocess.run(["scontrol", "update", f"JobId={job.job_id}", "TimeLimit=2"], check=True,
                   capture_output=True, text=True, timeout=60)
    final = job.wait_finished(150)
    assert job.event("signal") is not None
    assert final.exit_code == 75 and job.event("job_end")["reason"] == "requeue_limit"
    assert final.ending == "requeue_limit" and "USR1 without a spot notice" in final.reason
    assert "hpcflow-preempted" in job.log()
