"""``hpcflow report`` shows each hang the watchdog suspected (its stacks written, the step going
on) and what became of it: cleared when the ranks reported again, or the step ended."""

from __future__ import annotations

from typing import Any

from hpcflow import protocol as P
from hpcflow.jobs.hangs import CLEARED, ENDED, OPEN, suspected_hangs, suspicion_line
from hpcflow.jobs.report import build_report

T0 = 1_800_000_000.0


def ev(event: str, t: float, restart: int = 0, **extra: Any) -> dict[str, Any]:
    return {"event": event, "time": T0 + t, "job_id": "9", "restart": restart, **extra}


def suspected(t: float, try_: int, step: int, n: int, restart: int = 0) -> dict[str, Any]:
    return ev(P.EVENT_HANG_SUSPECTED, t, restart, **{
        "try": try_, "section": "step", "ranks": [0, 1], "first": 1, "stopped": [1],
        "step": step, "timeout_s": 60.0, "kill_after_s": 540,
        "stacks": f"hang-9-{restart}-{try_}-suspected-{n}.txt"})


EVENTS = [
    ev("attempt_start", 5, nodelist="n[1-2]"),
    suspected(80, 0, 14, 1),
    ev(P.EVENT_HANG_CLEARED, 92, **{"try": 0, "after_s": 12.4,
                                    "stacks": "hang-9-0-0-suspected-1.txt"}),
    suspected(200, 0, 30, 2),
    ev(P.EVENT_HANG, 740, **{"try": 0, "section": "step", "ranks": [0, 1], "step": 30,
                             "stacks": "hang-9-0-0.txt"}),
    ev("step_end", 741, rc=137),
    ev(P.EVENT_STEP_RESTART, 741, **{"try": 1, "rc": 137, "cause": "hang", "step": 30}),
    # A hand-edited line: the wrong types read as None, no crash; never resolved.
    ev(P.EVENT_HANG_SUSPECTED, 800, **{"try": 1, "step": "late", "timeout_s": "long"}),
    ev("step_end", 900, rc=0),
    ev("job_end", 900, rc=0, reason="completed"),
]


def test_each_suspicion_is_paired_with_what_followed_it_in_its_try() -> None:
    got = suspected_hangs(EVENTS)
    assert [(h["step"], h["outcome"], h["after_s"]) for h in got] == [
        (14, CLEARED, 12.4), (30, ENDED, None), (None, OPEN, None)]
    assert got[0]["stacks"] == "hang-9-0-0-suspected-1.txt" and got[0]["stopped"] == [1]
    assert got[2]["timeout_s"] is None


def test_a_clearing_of_another_try_is_not_this_suspicions() -> None:
    got = suspected_hangs([suspected(1, 0, 5, 1),
                           ev(P.EVENT_HANG_CLEARED, 2, **{"try": 1, "after_s": 1.0})])
    assert got[0]["outcome"] == OPEN


def test_the_report_carries_them_per_attempt_and_says_them_in_a_line() -> None:
    rep = build_report("9", submitted_at=T0, events=EVENTS, log_text="", now_s=T0 + 1000,
                       alive=False)
    (att,) = rep.attempts
    assert [h["outcome"] for h in att.suspected_hangs] == [CLEARED, ENDED, OPEN]
    assert rep.to_dict()["attempts"][0]["suspected_hangs"][0]["after_s"] == 12.4
    line = suspicion_line(1, att.suspected_hangs[0])
    assert line == ("attempt 1 hang suspected at step 14 (step; ranks [0, 1] silent more than "
                    "60 s; stopped: [1]): the ranks reported again 12 s later; stacks in "
                    "hang-9-0-0-suspected-1.txt")
    assert "the step was ended" in suspicion_line(1, att.suspected_hangs[1])
    assert "unknown" in suspicion_line(1, att.suspected_hangs[2])
