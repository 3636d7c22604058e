"""What status says is left of each requeue budget, and of a requeue the program made itself."""

from __future__ import annotations

from click.testing import CliRunner

from hpcflow import protocol as P
from hpcflow.jobs.status import budgets_used, compose_status

BUDGETS = {"max_requeues": 3, "max_preemptions": 20, "max_failures": 3, "resilience": True}


def ev(event: str, t: int, restart: int = 0, **extra) -> dict:  # noqa: ANN003
    return {"event": event, "time": t, "job_id": "7", "restart": restart, **extra}


EVENTS = [
    ev("attempt_start", 0, budgets=BUDGETS),
    ev("requeue", 10, step=None, checkpoint=False, cause=P.CAUSE_PREEMPTION),
    ev("attempt_start", 20, restart=1, budgets=BUDGETS),
    ev("step_restart", 25, restart=1, **{"try": 1}),
    ev("requeue", 30, restart=1, step=4),
    ev("attempt_start", 40, restart=2, budgets=BUDGETS),
    ev("requeue", 50, restart=2, step=None, checkpoint=False, cause=P.CAUSE_PREEMPTION,
       by=P.REQUEUED_BY_PROGRAM, over_budget=False),
]


def test_each_budget_is_counted_apart():
    assert budgets_used(EVENTS) == {"time_limit_requeues": [1, 3], "preemptions": [2, 20],
                                    "failures": [1, 3]}


def test_a_ledger_without_bounds_or_with_hostile_ones_has_no_budgets():
    assert budgets_used([ev("attempt_start", 0)]) == {}
    assert budgets_used([ev("attempt_start", 0, budgets={"max_requeues": "x"})]) == {}
    assert budgets_used([ev("attempt_start", 0, budgets=[1])]) == {}


def test_the_programs_own_requeue_is_said_as_such():
    st = compose_status("7", events=EVENTS, now_s=60)
    assert st.state == "REQUEUED" and "requeued the job itself" in st.reason
    assert st.ending == "program_requeued"


def test_status_prints_what_is_left(monkeypatch):
    from hpcflow.cli.main import cli
    from hpcflow.jobs import service

    st = compose_status("7", events=EVENTS, now_s=60)
    monkeypatch.setattr(service, "job_status", lambda *a, **k: st)
    out = CliRunner().invoke(cli, ["status", "7"])
    assert "left: time-limit requeues 2 of 3, preemptions 18 of 20, failures 2 of 3" in out.output, \
        out.output


def test_the_report_names_the_programs_own_requeue_and_counts_it_no_failure():
    from hpcflow.jobs.report import build_report

    events = [ev("attempt_start", 0, budgets=BUDGETS),
              ev("signal", 5, signal="USR1", joined=0, forwarded=True, source=P.SOURCE_WARNING),
              ev("step_end", 8, rc=0),
              ev("requeue", 9, step=None, checkpoint=False, cause=P.CAUSE_TIME_LIMIT,
                 by=P.REQUEUED_BY_PROGRAM, over_budget=False),
              ev("attempt_start", 20, restart=1, budgets=BUDGETS),
              ev("step_end", 30, restart=1, rc=0),
              ev("job_end", 31, restart=1, rc=0, reason=P.REASON_COMPLETED)]
    rep = build_report("7", submitted_at=0, events=events, log_text="", now_s=40, alive=False)
    first = rep.attempts[0]
    assert (first.outcome, first.ending) == (P.REASON_PROGRAM_REQUEUED, "program_requeued")
    assert rep.failures == []


def test_a_cancel_slurm_has_forgotten_still_reads_cancelled():
    events = [ev("attempt_start", 0, budgets=BUDGETS),
              ev("job_end", 9, rc=143, reason=P.REASON_CANCELLED)]
    st = compose_status("7", events=events, now_s=60)
    assert (st.state, st.source, st.ending) == ("CANCELLED", "ledger", "cancelled")
    timeout = compose_status("7", events=[*events[:1], ev("job_end", 9, rc=0,
                                                           reason=P.REASON_TIME_LIMIT)], now_s=60)
    assert timeout.state == "TIMEOUT"
