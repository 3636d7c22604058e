"""Hangs and failed ranks on the real local Slurm cluster: the watchdog ends a hung step, the
batch script starts a new step in the same allocation from the latest committed checkpoint, and
a deterministic program error is retried once, not forever (docs/protocol.md, "Hangs and in-job
restarts")."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from slurm_helpers import wait_for

from hpcflow import ending_kinds, protocol
from hpcflow.cli.main import cli
from hpcflow.jobs.report_load import load_report

pytestmark = [pytest.mark.slurm]

PROGRAMS = Path(__file__).resolve().parents[2] / "programs"
STEPS = 40
INTERVAL = 5
RESILIENCE = {
    "heartbeat_interval_s": 1, "max_in_job_restarts": 2, "max_failures": 3,
    "timeouts": {"startup_s": 120, "step_floor_s": 8, "warmup_steps": 5, "checkpoint_s": 60,
                 "kill_after_s": 0},
}


def spec(name: str, program: dict, resilience: bool | None = True) -> dict:
    """True: the short timeouts above; False: resilience off; None: no block (the defaults)."""
    out = {
        "name": name, "nodes": 2, "tasks_per_node": 1, "time_limit": "00:10:00",
        "program": program, "env": {"OMP_NUM_THREADS": "1"},
        "checkpoint": {"keep": 2, "interval_steps": INTERVAL},
    }
    if resilience is not None:
        out["resilience"] = RESILIENCE if resilience else False
    return out


def train(name: str, resilience: bool | None = True, steps: int = STEPS) -> dict:
    return spec(name, {"module": "hpcflow.examples.train",
                       "args": ["--steps", str(steps), "--step-time-s", "0.2"]}, resilience)


def tagged(log: str, tag: str) -> list[dict]:
    return [json.loads(m) for m in re.findall(rf"^{tag} (\{{.*\}})$", log, re.M)]


def heartbeats(job, try_: int) -> dict[int, dict]:
    folder = protocol.state_dir(job.run_dir) / protocol.heartbeat_name(job.job_id, 0, try_)
    out = {}
    for path in folder.glob("*.json"):
        if path.stem.isdigit():
            try:
                out[int(path.stem)] = json.loads(path.read_text())
            except ValueError:
                continue
    return out


def rank_pid_after(job, rank: int, step: int) -> int:
    """The pid of ``rank`` once its heartbeat says it is training past ``step``."""
    def ready():
        beat = heartbeats(job, 0).get(rank)
        return beat and beat["section"] == "step" and beat["step"] >= step and beat["pid"]
    return int(wait_for(ready, 240, f"rank {rank} past step {step}"))


def resume(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGCONT)  # gone after the step's end; harmless if not
    except ProcessLookupError:
        pass


def check_stacks(job, event: dict) -> None:
    """The stacks file of a hang event of ``job``: both ranks, rank 1 stopped, both in train.py."""
    stacks = (Path(job.run_dir) / event["stacks"]).read_text()
    assert stacks.count("==== rank ") == 2
    for rank in (0, 1):
        assert f"==== rank {rank} " in stacks
    sections = stacks.split("==== rank ")[1:]
    assert "process state T" in sections[1]  # rank 1, the stopped one
    for section in sections:  # py-spy's (or faulthandler's) stack of each rank's main thread
        assert "hpcflow/examples/train.py" in section


def test_stopped_rank_is_detected_stacks_dumped_and_the_step_restarted(submit_job):
    """Three jobs side by side: an uninterrupted reference (resilience off); one with short
    timeouts and ``kill_after_s: 0``, whose stopped rank ends the step and is restarted; and one
    with no resilience block at all (the defaults), whose stopped rank gets its stacks written
    after the 60 s step floor, is not killed, and trains on once it is resumed."""
    reference = submit_job(train("ref", resilience=False))
    job = submit_job(train("hang"))
    # longer, so that it is still training when its rank is stopped after the other job's
    default = submit_job(train("defaults", resilience=None, steps=3 * STEPS))
    # Each rank is stopped as soon as it is past step 12: waiting for both first let the short
    # job finish before the later one got there.
    pid = rank_pid_after(job, 1, 12)
    os.kill(pid, signal.SIGSTOP)
    stopped_at = time.time()
    default_pid = rank_pid_after(default, 1, 12)
    os.kill(default_pid, signal.SIGSTOP)
    default_stopped_at = time.time()
    try:
        hang = wait_for(lambda: job.event(protocol.EVENT_HANG), 90, "the hang event")
    finally:
        resume(pid)
    assert hang["time"] - stopped_at <= 60
    assert hang["section"] == "step" and 1 in hang["ranks"]
    assert hang["stopped"] == [1] and hang["first"] == 1  # the ranks share this host
    check_stacks(job, hang)
    final = job.wait_finished(240)
    assert final.state == "COMPLETED" and final.restarts == 0  # same allocation, no requeue
    restart = job.event(protocol.EVENT_STEP_RESTART)
    assert restart is not None and restart["cause"] == "hang" and restart["try"] == 1
    log = job.log()
    assert [r["step"] for r in tagged(log, "hpcflow-resume")] == [restart["step"]]
    ref_final = reference.wait_finished(240)
    assert ref_final.state == "COMPLETED"
    done, ref_done = tagged(log, "hpcflow-done"), tagged(reference.log(), "hpcflow-done")
    assert done[0]["step"] == STEPS
    assert done[0]["params_sha256"] == ref_done[0]["params_sha256"]

    # The defaults: suspected (stacks written) after the step floor, never killed.
    try:
        suspected = wait_for(lambda: default.event(protocol.EVENT_HANG_SUSPECTED), 150,
                             "the suspected hang with the defaults")
    finally:
        resume(default_pid)
    silent_s = suspected["time"] - default_stopped_at
    assert 55 <= silent_s <= 75, silent_s  # the 60 s floor (+ one 2 s heartbeat interval)
    assert suspected["timeout_s"] == 60 and suspected["kill_after_s"] == 540
    assert suspected["stopped"] == [1] and suspected["section"] == "step"
    check_stacks(default, suspected)
    cleared = wait_for(lambda: default.event(protocol.EVENT_HANG_CLEARED), 60, "hang_cleared")
    assert cleared["stacks"] == suspected["stacks"]
    default_final = default.wait_finished(240)
    assert default_final.state == "COMPLETED" and default_final.restarts == 0
    assert default.event(protocol.EVENT_HANG) is None
    assert default.event(protocol.EVENT_STEP_RESTART) is None
    assert [d["step"] for d in tagged(default.log(), "hpcflow-done")] == [3 * STEPS]
    default_rep, _ = load_report(default.job_id)
    (attempt,) = default_rep.attempts
    assert [(h["outcome"], h["stacks"]) for h in attempt.suspected_hangs] == [
        ("cleared", suspected["stacks"])]
    shown = CliRunner().invoke(cli, ["report", default.job_id]).output
    assert f"attempt 1 hang suspected at step {suspected['step']} (step;" in shown, shown
    assert "the ranks reported again" in shown


def test_killed_rank_is_restarted_in_the_allocation_from_the_last_checkpoint(submit_job):
    job = submit_job(train("kill"))
    pid = rank_pid_after(job, 1, 13)
    os.kill(pid, signal.SIGKILL)
    final = job.wait_finished(240)
    assert final.state == "COMPLETED" and final.restarts == 0
    restart = job.event(protocol.EVENT_STEP_RESTART)
    assert restart is not None and restart["cause"] == "rank_failure"
    committed = restart["step"]
    assert committed % INTERVAL == 0 and committed >= 10
    log = job.log()
    assert [r["step"] for r in tagged(log, "hpcflow-resume")] == [committed]
    # The new step starts over at committed + 1: the steps trained since the checkpoint are
    # lost (none when the kill landed just after a commit).
    first_try, second_try = log.split("hpcflow-resume", 1)
    before = [s["step"] for s in tagged(first_try, "hpcflow-step")]
    after = [s["step"] for s in tagged(second_try, "hpcflow-step")]
    lost = before[-1] - committed
    assert 0 <= lost <= INTERVAL
    assert after == list(range(committed + 1, STEPS + 1))
    # The report lists the failure with exactly those steps.
    rep, _ = load_report(job.job_id)
    failures = [f for f in rep.failures if f.kind == ending_kinds.ENDING_RANK_RESTARTED]
    assert len(failures) == 1 and failures[0].lost_steps == lost
    assert failures[0].steps == ("" if lost == 0 else f"{committed + 1}-{before[-1]}")


def test_the_same_error_twice_ends_the_job_failed_with_the_traceback(submit_job):
    job = submit_job(spec("raise", {"argv": [
        sys.executable,
        str(PROGRAMS / "raise_at_step.py"), "--fail-at", "7"]}))
    final = job.wait_finished(240)
    assert final.state == "FAILED"
    events = job.events()
    restarts = [e for e in events if e["event"] == protocol.EVENT_STEP_RESTART]
    errors = [e for e in events if e["event"] == protocol.EVENT_PROGRAM_ERROR]
    assert len(restarts) == 1 and restarts[0]["cause"] == "program_error"
    assert [e["repeated"] for e in errors] == [False, True]
    assert {e["exception"] for e in errors} == {"ValueError@6"}
    end = job.event("job_end")
    assert end is not None and end["reason"] == protocol.REASON_PROGRAM_ERROR
    record = json.loads((Path(job.run_dir) / errors[-1]["errors"] / "0.json").read_text())
    assert record["type"] == "ValueError" and "bad batch at step 7" in record["traceback"]
    assert "raise ValueError" in record["traceback"]
    # `hpcflow report` shows it too, for the in-job failure and for the job's ending.
    rep, _ = load_report(job.job_id)
    shown = [f for f in rep.failures if f.error]
    assert [f.kind for f in shown] == [ending_kinds.ENDING_RANK_RESTARTED,
                                       ending_kinds.ENDING_PROGRAM_ERROR]
    for failure, try_ in zip(shown, (0, 1), strict=True):
        assert failure.error["try"] == try_ and failure.error["type"] == "ValueError"
        assert failure.error["traceback"].splitlines()[-1] == "ValueError: bad batch at step 7"
        assert "raise_at_step.py" in failure.error["traceback"]
    result = CliRunner().invoke(cli, ["report", job.job_id])
    assert result.exit_code == 0, result.output
    assert "traceback of rank " in result.output
    assert "ValueError: bad batch at step 7" in result.output


def test_a_warned_preemption_keeps_its_path_with_a_resilience_block(submit_job):
    job = submit_job({**train("preempt"), "preemption": {"signal_lead_s": 120, "max_requeues": 1}})
    rank_pid_after(job, 0, 6)
    job.signal_batch("USR1")
    requeue = wait_for(lambda: job.event("requeue", restart=0), 120, "the requeue event")
    final = job.wait_finished(300)
    assert final.state == "COMPLETED" and final.restarts == 1
    events = job.events()
    assert not [e for e in events if e["event"] in (protocol.EVENT_STEP_RESTART,
                                                     protocol.EVENT_HANG)]
    log = job.log()
    assert [r["step"] for r in tagged(log, "hpcflow-resume")] == [requeue["step"]]
    assert tagged(log, "hpcflow-done")[0]["step"] == STEPS
