"""``report --json`` carries the measured costs ``hpcflow plan goodput --from-job`` reads."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hpcflow import protocol as P
from hpcflow.jobs import records
from hpcflow.jobs.measured import measured_costs
from hpcflow.jobs.report import build_report

T0 = 1_800_000_000.0


def ev(event: str, t: float, restart: int = 0, **extra: Any) -> dict[str, Any]:
    return {"event": event, "time": T0 + t, "job_id": "9", "restart": restart, **extra}


def steps(first: int, last: int) -> list[str]:
    return [f'hpcflow-step {json.dumps({"step": s, "step_time_s": 1.0})}'
            for s in range(first, last + 1)]


START = 'hpcflow-start {"world_size": 4}'
# Attempt 0 (start 5) trains 1-10, saves 2.0 s, trains 11-15, is last seen at 30, and its node
# dies. Attempt 1 (start 100) resumes at 10, trains 11-20 with an async save that blocked 0.5 s
# and one that failed (no blocking time), and completes at 130.
LOG = "\n".join([
    "hpcflow: 2027-01-15T08:00:05+0000 job 9 attempt 0 on n[1-2]: starting 4 rank(s)", START,
    *steps(1, 10), 'hpcflow-checkpoint {"reason": "interval", "save_s": 2.0, "step": 10}',
    *steps(11, 15), "hpcflow: 2027-01-15T08:00:30+0000 still here",
    "hpcflow: 2027-01-15T08:01:40+0000 job 9 attempt 1 on n[1-2]: starting 4 rank(s)", START,
    'hpcflow-resume {"step": 10}', *steps(11, 20),
    'hpcflow-checkpoint {"reason": "interval", "save_s": 0.5, "total_s": 3.0, "async": true, '
    '"step": 20}',
    'hpcflow-checkpoint {"reason": "interval", "async": true, "failed": true, "step": 18}',
])
EVENTS = [ev("attempt_start", 5, nodelist="n[1-2]"), ev("attempt_start", 100, 1, nodelist="n[1-2]"),
          ev("step_end", 130, 1, rc=0), ev("job_end", 130, 1, rc=0, reason="completed")]


def test_the_measured_costs_match_the_ledger_worked_by_hand():
    rep = build_report("9", submitted_at=T0, events=EVENTS, log_text=LOG, now_s=T0 + 999,
                       alive=False)
    assert [a.startup_s for a in rep.attempts] == pytest.approx([8.0, 19.5])
    m = measured_costs(rep)
    assert m["save_s"] == pytest.approx(1.25) and m["saves"] == 2  # (2.0 + 0.5) / 2
    assert m["startup_s"] == pytest.approx(8.0)
    # one restart: the requeue's queue time (100 - 30 = 70) and attempt 1's start-up (19.5)
    assert (m["restarts"], m["restart_s"]) == (1, pytest.approx(89.5))
    assert (m["nodes"], m["failures"]) == (2, 1)
    # held 130 - 75 pending = 55 s on 2 nodes: one failure in 110/3600 node-hours
    assert m["failures_per_node_hour"] == pytest.approx(3600 / 110)


def test_a_job_that_measured_nothing_says_none():
    m = measured_costs(build_report("9", submitted_at=T0, events=[], log_text="", now_s=T0))
    assert (m["save_s"], m["restart_s"], m["startup_s"], m["nodes"]) == (None, None, None, None)


def test_report_json_carries_the_measured_costs(slurm, hpcflow, tmp_path):
    run = tmp_path / "run"
    records.record_submission(records.JobRecord("9", "j", str(run), T0), "", "")
    (run / "j-9.out").write_text(LOG)
    for e in EVENTS:
        records.append_jsonl(P.ledger_path(run), e)
    result = hpcflow("report", "9", "--json")
    assert result.exit_code == 0, result.output
    measured = json.loads(result.output)["data"]["measured"]
    assert measured["save_s"] == pytest.approx(1.25) and measured["nodes"] == 2
