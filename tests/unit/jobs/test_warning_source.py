"""A warned preemption says where its warning came from, by the ledger alone: a spot notice
(``hpcflow spot-watch`` records one right after it signals the job) or the time-limit warning (the
signal without a spot notice), in ``status`` and in ``report``."""

from __future__ import annotations

from typing import Any

import pytest

from hpcflow import ending_kinds as K
from hpcflow import protocol as P
from hpcflow.jobs import endings
from hpcflow.jobs.report import build_report
from hpcflow.jobs.status import compose_status

T0 = 1_700_000_000.0
SPOT = {"action": "terminate", "node": "n1", "notice_time": int(T0) + 150}


def ev(event: str, t: float, restart: int = 0, **extra: Any) -> dict[str, Any]:
    return {"event": event, "time": T0 + t, "job_id": "7", "restart": restart, **extra}


def warned(restart: int, t: float, *, spot: bool, end: dict[str, Any]) -> list[dict[str, Any]]:
    """One attempt that got the warning signal (after a spot notice, or not)."""
    out = [ev("attempt_start", t, restart)]
    if spot:
        out.append(ev(P.EVENT_SPOT_NOTICE, t + 29, restart, **SPOT))
    out += [ev("signal", t + 30, restart, signal="USR1", joined=2, forwarded=True),
            ev("step_end", t + 35, restart, rc=75), {**end, "time": T0 + t + 36,
                                                     "restart": restart}]
    return out


REQUEUE = ev("requeue", 0, step=12)
DONE = [ev("attempt_start", 100, 1), ev("step_end", 140, 1, rc=0),
        ev("job_end", 140, 1, rc=0, reason="completed")]


@pytest.mark.parametrize(("spot", "kind", "words"), [
    pytest.param(True, K.ENDING_PREEMPTED_SPOT, "spot notice (terminate on n1)", id="spot"),
    pytest.param(False, K.ENDING_PREEMPTED, "USR1 without a spot notice: Slurm's time-limit",
                 id="time-limit"),
])
def test_a_requeue_names_its_warning(spot, kind, words):
    events = warned(0, 0, spot=spot, end=REQUEUE)
    assert endings.ledger_ending(events) == (kind, endings.warning_source(
        events[1] if spot else None, events[-3]))
    st = compose_status("7", queue={"state": "PENDING", "reason": "BeginTime",
                                    "restart_count": 1}, events=events, now_s=T0 + 60)
    assert st.ending == kind and words in st.reason and not st.finished
    assert "spot" in endings.describe(K.ENDING_PREEMPTED_SPOT)
    assert "time-limit" in endings.describe(K.ENDING_PREEMPTED)


def test_each_attempt_is_told_by_its_own_ledger_events():
    # A spot notice ended attempt 1; attempt 2 was warned by the time limit.
    events = (warned(0, 0, spot=True, end=REQUEUE)
              + warned(1, 100, spot=False, end=ev("requeue", 0, 1, step=30))
              + [ev("attempt_start", 200, 2), ev("step_end", 240, 2, rc=0),
                 ev("job_end", 240, 2, rc=0, reason="completed")])
    assert endings.ledger_ending(events[:5])[0] == K.ENDING_PREEMPTED_SPOT
    assert endings.ledger_ending(events[:9])[0] == K.ENDING_PREEMPTED
    rep = build_report("7", submitted_at=T0, events=events, log_text="", now_s=T0 + 300)
    assert [a.ending for a in rep.attempts] == [K.ENDING_PREEMPTED_SPOT, K.ENDING_PREEMPTED,
                                                K.ENDING_COMPLETED]
    assert "spot notice" in rep.attempts[0].detail
    assert "without a spot notice" in rep.attempts[1].detail
    assert rep.failures == []  # warned, nothing lost: not a failure


def test_other_warned_endings_keep_their_kind_and_name_the_source():
    events = warned(0, 0, spot=True, end=ev("job_end", 0, rc=75, reason="requeue_limit"))
    kind, detail = endings.ledger_ending(events)
    assert kind == K.ENDING_REQUEUE_LIMIT and "spot notice (terminate on n1)" in detail
    events = warned(0, 0, spot=False, end=ev("job_end", 0, rc=1,
                                            reason="preempted_no_checkpoint"))
    kind, detail = endings.ledger_ending(events)
    assert kind == K.ENDING_NOT_REQUEUED and "without a spot notice" in detail


def test_a_failure_is_not_dressed_as_a_warning():
    # A spot notice that came while the program was already failing: the ending stays an error.
    events = warned(0, 0, spot=True, end=ev("job_end", 0, rc=1, reason="program_error"))
    kind, detail = endings.ledger_ending(events)
    assert kind == K.ENDING_PROGRAM_ERROR and "spot" not in detail
