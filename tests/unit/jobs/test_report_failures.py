"""The report's endings: an attempt without end record ends at its last known time, lost steps
are counted per failure (in-job restarts, node failures, a later job in the same run
directory), and ``hpcflow report`` prints them."""

from __future__ import annotations

import json
from datetime import UTC
from typing import Any

import pytest

from hpcflow import ending_kinds as K
from hpcflow import protocol as P
from hpcflow.jobs import records
from hpcflow.jobs.report import build_report
from hpcflow.jobs.report_load import load_report

T0 = 1_800_000_000.0


def ev(event: str, t: float, restart: int = 0, job: str = "9", **extra: Any) -> dict[str, Any]:
    return {"event": event, "time": T0 + t, "job_id": job, "restart": restart, **extra}


def stamp(t: float) -> str:
    from datetime import datetime

    return datetime.fromtimestamp(T0 + t, UTC).strftime("%Y-%m-%dT%H:%M:%S+0000")


def banner(attempt: int, t: float, job: str = "9") -> str:
    return f"hpcflow: {stamp(t)} job {job} attempt {attempt} on n[1-2]: starting 2 rank(s)"


def steps(first: int, last: int, dt: float = 1.0) -> list[str]:
    return [f'hpcflow-step {json.dumps({"step": s, "step_time_s": dt})}'
            for s in range(first, last + 1)]


START = 'hpcflow-start {"world_size": 2}'
# Attempt 0 starts at 5, checkpoints step 10, trains to 15 (its last sign of life: 30), then
# its node dies without any record. Slurm starts attempt 1 at 100; it resumes at 10.
LOG = "\n".join([banner(0, 5), START, *steps(1, 10),
                 'hpcflow-checkpoint {"reason": "interval", "save_s": 2.0, "step": 10}',
                 *steps(11, 15), f"hpcflow: {stamp(30)} still here",
                 banner(1, 100), START, 'hpcflow-resume {"step": 10}', *steps(11, 20)])
NODE_FAIL = [ev("attempt_start", 5), ev("attempt_start", 100, 1), ev("step_end", 130, 1, rc=0),
             ev("job_end", 130, 1, rc=0, reason="completed")]


def test_an_attempt_without_end_record_ends_at_its_last_known_time_not_now():
    early = build_report("9", submitted_at=T0, events=NODE_FAIL, log_text=LOG, now_s=T0 + 200)
    late = build_report("9", submitted_at=T0, events=NODE_FAIL, log_text=LOG, now_s=T0 + 9000)
    a0 = early.attempts[0]
    assert a0.end == T0 + 30  # the batch script's last line, later than start + step times
    assert a0.startup_s == late.attempts[0].startup_s == pytest.approx(25 - 15 - 2)
    assert (a0.outcome, a0.ending) == ("interrupted", K.ENDING_NODE_FAILURE)
    for rep in (early, late):
        assert sum(rep.totals.values()) <= rep.wall_s + 1e-6
        assert rep.wall_s == 130.0


def test_a_dead_last_attempt_is_not_counted_up_to_now():
    events = NODE_FAIL[:1]
    alive = build_report("9", submitted_at=T0, events=events, log_text=LOG, now_s=T0 + 9000)
    dead = build_report("9", submitted_at=T0, events=events, log_text=LOG, now_s=T0 + 9000,
                        alive=False)
    assert alive.wall_s == 9000.0 and alive.attempts[0].outcome == "running"
    assert dead.wall_s == 30.0 and dead.attempts[0].end == T0 + 30
    assert sum(dead.totals.values()) <= dead.wall_s


def test_each_failure_lists_the_steps_it_lost():
    rep = build_report("9", submitted_at=T0, events=NODE_FAIL, log_text=LOG, now_s=T0 + 200)
    (failure,) = rep.failures
    assert (failure.attempt, failure.kind, failure.lost_steps, failure.steps) == (
        1, K.ENDING_NODE_FAILURE, 5, "11-15")
    assert failure.lost_s == 5.0 and rep.attempts[0].lost_steps == 5


def test_an_in_job_restart_loses_the_steps_since_the_last_checkpoint():
    # One attempt, two program starts: a hang at step 8 (recorded by the batch script's
    # watchdog), the step restarted in the allocation from the checkpoint of step 5.
    log = "\n".join([banner(0, 5), START, *steps(1, 8), START, 'hpcflow-resume {"step": 5}',
                     *steps(6, 12)])
    events = [ev("attempt_start", 5), ev("hang", 20, section="step", ranks=[1]),
              ev("step_end", 40, rc=0), ev("job_end", 40, rc=0, reason="completed")]
    rep = build_report("9", submitted_at=T0, events=events, log_text=log, now_s=T0 + 50)
    (hang,) = rep.failures
    assert (hang.kind, hang.lost_steps, hang.steps) == (K.ENDING_HANG, 3, "6-8")
    assert 'section="step"' in hang.detail and rep.totals["lost"] == 3.0
    assert rep.totals["training"] == 12.0


def test_a_resubmission_into_the_same_run_directory_counts_the_lost_steps(tmp_path,
                                                                            monkeypatch):
    monkeypatch.setenv("HPCFLOW_HOME", str(tmp_path / "home"))
    run = tmp_path / "run"
    for job, at in (("9", T0), ("12", T0 + 500)):
        records.record_submission(records.JobRecord(job, "j", str(run), at), "", "")
    # Job 9 committed step 10, trained to 15 and failed; job 12 resumed at 10 in the same run
    # directory: steps 11-15 of job 9 were lost, though no attempt of job 9 redid them.
    (run / "j-9.out").write_text("\n".join([banner(0, 5), START, *steps(1, 15)]))
    (run / "j-12.out").write_text("\n".join([banner(0, 510, "12"), START,
                                             'hpcflow-resume {"step": 10}', *steps(11, 20)]))
    for e in (ev("attempt_start", 5), ev("step_end", 30, rc=1),
              ev("job_end", 30, rc=1, reason="program_error"),
              ev("attempt_start", 510, job="12")):
        records.append_jsonl(P.ledger_path(run), e)
    rep, _ = load_report("9", now_s=T0 + 600)
    assert rep.totals["lost"] == 5.0 and rep.attempts[0].lost_steps == 5
    (failure,) = rep.failures
    assert (failure.kind, failure.steps) == (K.ENDING_PROGRAM_ERROR, "11-15")


def test_report_prints_the_ending_and_the_lost_steps_of_each_failure(slurm, hpcflow, tmp_path):
    run = tmp_path / "run"
    records.record_submission(records.JobRecord("9", "j", str(run), T0), "", "")
    (run / "j-9.out").write_text(LOG)
    for e in NODE_FAIL:
        records.append_jsonl(P.ledger_path(run), e)
    result = hpcflow("report", "9")
    assert result.exit_code == 0, result.output
    assert "node_failure" in result.output and "failures" in result.output
    row = next(line for line in result.output.splitlines()
               if "node_failure" in line and "11-15" in line)
    assert " 5 " in row
    data = json.loads(hpcflow("report", "9", "--json").output)["data"]
    assert data["failures"][0]["lost_steps"] == 5
    assert [a["ending"] for a in data["attempts"]] == ["node_failure", "completed"]
    assert not slurm.calls  # the ledger says the job ended: Slurm is not asked


def test_a_cancelled_job_without_end_record_shows_cancelled(slurm, hpcflow, tmp_path):
    run = tmp_path / "run"
    records.record_submission(records.JobRecord("9", "j", str(run), T0), "", "")
    (run / "j-9.out").write_text("\n".join([banner(0, 5), START, *steps(1, 15)]))
    records.append_jsonl(P.ledger_path(run), ev("attempt_start", 5))
    # scancel killed the batch script before it could write anything; Slurm says CANCELLED.
    slurm.answers["scontrol"] = (0, "JobId=9 JobName=j JobState=CANCELLED Reason=None "
                                    "ExitCode=0:15 Restarts=0\n", "")
    data = json.loads(hpcflow("report", "9", "--json").output)["data"]
    (att,) = data["attempts"]
    assert att["ending"] == K.ENDING_CANCELLED and att["outcome"] == "interrupted"
    assert att["end"] == T0 + 20  # start + the 15 steps it trained, not now
    assert data["failures"][0]["kind"] == K.ENDING_CANCELLED
