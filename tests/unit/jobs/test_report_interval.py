"""``hpcflow report`` shows the checkpoint interval ``checkpoint.interval: auto`` chose, when,
why and from what (its ``interval_chosen`` ledger events), per attempt."""

from __future__ import annotations

import json
from typing import Any

from hpcflow import protocol as P
from hpcflow.jobs import records
from hpcflow.jobs.intervals import interval_line
from hpcflow.jobs.report import build_report

T0 = 1_800_000_000.0


def ev(event: str, t: float, restart: int = 0, **extra: Any) -> dict[str, Any]:
    return {"event": event, "time": T0 + t, "job_id": "9", "restart": restart, **extra}


def chosen(t: float, restart: int, step: int, steps: int, reason: str, restart_s: float | None,
           **extra: Any) -> dict[str, Any]:
    fields = {"step": step, "interval_steps": steps, "interval_s": steps * 0.3, "save_s": 0.02,
              "step_time_s": 0.3, "restart_s": restart_s, "mtbf_s": 45000.0,
              "failures_per_node_hour": 0.04, "nodes": 2, "expected_goodput": 0.9876,
              "formula": "availability-optimal, exponential failures (arXiv:2410.18124)",
              "reason": reason, **extra}
    return ev(P.EVENT_INTERVAL_CHOSEN, t, restart, **fields)


EVENTS = [
    ev("attempt_start", 5, nodelist="n[1-2]"),
    chosen(20, 0, 10, 140, "warmup", None),
    ev("requeue", 40, step=12),
    ev("attempt_start", 60, 1, nodelist="n[1-2]"),
    chosen(75, 1, 22, 95, "restart", 14.25),
    # A hand-edited or foreign line: the wrong types read as None, no crash.
    chosen(76, 1, 23, 90, "restart", 14.0, save_s="fast", expected_goodput=True),
    ev(P.EVENT_INTERVAL_CHOSEN, 77, 1, interval_steps="many"),  # no whole interval: left out
    ev("step_end", 130, 1, rc=0),
    ev("job_end", 130, 1, rc=0, reason="completed"),
]


def test_each_attempt_carries_its_chosen_intervals() -> None:
    rep = build_report("9", submitted_at=T0, events=EVENTS, log_text="", now_s=T0 + 200,
                       alive=False)
    first, second = rep.attempts
    assert [(c["step"], c["interval_steps"], c["reason"]) for c in first.intervals] == [
        (10, 140, "warmup")]
    assert first.intervals[0]["restart_s"] is None
    assert [(c["step"], c["interval_steps"]) for c in second.intervals] == [(22, 95), (23, 90)]
    assert second.intervals[0]["restart_s"] == 14.25
    assert second.intervals[1]["save_s"] is None and second.intervals[1]["expected_goodput"] is None
    assert "failures_per_node_hour" not in second.intervals[0]  # only the fields it shows
    as_json = rep.to_dict()["attempts"]
    assert as_json[1]["intervals"][0]["mtbf_s"] == 45000.0


def test_the_line_says_what_when_why_and_from_what() -> None:
    rep = build_report("9", submitted_at=T0, events=EVENTS, log_text="", now_s=T0 + 200,
                       alive=False)
    line = interval_line(2, rep.attempts[1].intervals[0])
    assert line == ("attempt 2 checkpoint interval: every 95 steps from step 22 (restart; "
                    "availability-optimal, exponential failures (arXiv:2410.18124); save "
                    "0.020 s, step 0.300 s, restart 14.2 s, MTBF 45000 s; expected goodput "
                    "0.988)")
    odd = interval_line(2, rep.attempts[1].intervals[1])
    assert "save unknown" in odd and "expected goodput unknown" in odd


def test_report_prints_the_chosen_intervals(slurm, hpcflow, tmp_path) -> None:  # noqa: ANN001
    run = tmp_path / "run"
    records.record_submission(records.JobRecord("9", "j", str(run), T0), "", "")
    (run / "j-9.out").write_text("")
    for e in EVENTS:
        records.append_jsonl(P.ledger_path(run), e)
    text = hpcflow("report", "9")
    assert text.exit_code == 0, text.output
    lines = [ln for ln in text.output.splitlines() if "checkpoint interval" in ln]
    assert [ln.split(" checkpoint")[0] for ln in lines] == ["attempt 1", "attempt 2", "attempt 2"]
    assert "every 140 steps from step 10 (warmup" in lines[0]
    data = json.loads(hpcflow("report", "9", "--json").output)["data"]
    assert [len(a["intervals"]) for a in data["attempts"]] == [1, 2]
