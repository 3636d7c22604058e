"""``hpcflow report`` shows where each attempt's start-up went: rank 0's first
``hpcflow-startup`` line of the attempt (a later program start, after an in-job restart, does not
replace it), read defensively."""

from __future__ import annotations

import json

from hpcflow import protocol as P
from hpcflow.jobs.report import build_report
from hpcflow.jobs.startup import startup_line, startup_phases

T0 = 1_800_000_000.0
PHASES = {"launch_s": 0.31, "imports_s": 2.04, "join_s": 0.98, "build_s": 13.2,
          "restore_s": 0.0, "first_step_s": 0.55}


def ev(event: str, t: float, restart: int, **extra):  # noqa: ANN003, ANN201
    return {"event": event, "time": T0 + t, "job_id": "9", "restart": restart, **extra}


def banner(attempt: int) -> str:
    return f"hpcflow: 2026-12-03T00:00:00+0000 job 9 attempt {attempt} on n1: starting 2 rank(s)"


def startup(**phases) -> str:  # noqa: ANN003
    return f"{P.TAG_STARTUP} {json.dumps(phases, sort_keys=True)}"


def step(n: int) -> str:
    return f'{P.TAG_STEP} {json.dumps({"step": n, "step_time_s": 1.0})}'


LOG = "\n".join([
    banner(0), step(1), startup(**PHASES, total_s=17.08), step(2),
    'hpcflow-start {"world_size": 2}', step(3), startup(**{**PHASES, "build_s": 99.0}),
    banner(1), step(3), startup(launch_s=0.2, imports_s="fast", join_s=None, build_s=-1,
                                total_s=True),
])
EVENTS = [ev("attempt_start", 5, 0), ev("requeue", 40, 0, step=2), ev("attempt_start", 60, 1),
          ev("step_end", 90, 1, rc=0), ev("job_end", 90, 1, rc=0, reason="completed")]


def test_each_attempt_keeps_its_first_start_up_record():
    rep = build_report("9", submitted_at=T0, events=EVENTS, log_text=LOG, now_s=T0 + 100,
                       alive=False)
    first, second = rep.attempts
    assert first.startup_phases == {**PHASES, "total_s": 17.08}  # not the restart's 99 s build
    assert second.startup_phases == {"launch_s": 0.2}  # strings, nulls, negatives, bools: out
    assert rep.to_dict()["attempts"][0]["startup_phases"]["build_s"] == 13.2


def test_the_line_names_each_phase_in_order_and_the_total():
    line = startup_line(1, startup_phases({**PHASES, "total_s": 17.08}))
    assert line == ("attempt 1 start-up (rank 0): launch 0.3 s, imports 2.0 s, join 1.0 s, "
                    "build 13.2 s, restore 0.0 s, first step 0.6 s; total 17.1 s")
    assert startup_line(2, {}) == "attempt 2 start-up (rank 0): not measured"
