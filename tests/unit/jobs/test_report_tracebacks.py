"""A rank that raised shows its traceback in ``hpcflow report`` (text and --json): the first
failing rank's, read from the errors folder the runtime wrote, bounded in length."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hpcflow import ending_kinds as K
from hpcflow import protocol as P
from hpcflow.jobs import records
from hpcflow.jobs.report_load import load_report
from hpcflow.jobs.tracebacks import TRACEBACK_LINES, bounded, step_errors
from hpcflow.runtime.heartbeat import record_error

T0 = 1_800_000_000.0


def ev(event: str, t: float, restart: int = 0, **extra: Any) -> dict[str, Any]:
    return {"event": event, "time": T0 + t, "job_id": "9", "restart": restart, **extra}


def load_batch(step: int) -> None:
    raise ValueError(f"bad batch at step {step}")


def raise_deep(depth: int) -> None:
    if depth == 0:
        load_batch(7)
    go_deeper(depth - 1)  # two functions in turn: Python does not fold the frames


def go_deeper(depth: int) -> None:
    raise_deep(depth)


def record(run: Path, folder: str, rank: int, exc_factory, step: int = 6) -> None:
    """What a rank's Run does when it leaves with an exception: a real traceback."""
    try:
        exc_factory()
    except Exception as exc:  # noqa: BLE001 - the exception is the test's data
        record_error({P.ENV_ERROR_DIR: str(run / folder)}, rank, step, exc)


def failing_job(tmp_path: Path, *, resilience: bool) -> Path:
    """Job 9 in <tmp>/run: rank 1 raised ValueError at step 7 (rank 0 only saw its peer go)."""
    run = tmp_path / "run"
    records.record_submission(records.JobRecord("9", "j", str(run), T0), "", "")
    (run / "j-9.out").write_text("")
    folder = f"{P.STATE_DIR}/{P.errors_name('9', 0, 0)}"
    record(run, folder, 1, lambda: raise_deep(3))
    record(run, folder, 0, lambda: (_ for _ in ()).throw(
        RuntimeError("[gloo/transport/tcp] Connection closed by peer")))
    first = {"rank": 1, "rc": 1, "reason": "ValueError: bad batch at step 7"}
    events = [ev("attempt_start", 5),
              ev("step_end", 30, rc=1, ranks_exited=2, ranks_missing=0, missing=[],
                 first_failure=first)]
    if resilience:
        events.append(ev(P.EVENT_PROGRAM_ERROR, 30, exception="ValueError@6", errors=folder,
                         repeated=False, **{"try": 0}))
    events.append(ev("job_end", 31, rc=1, reason="program_error"))
    for e in events:
        records.append_jsonl(P.ledger_path(run), e)
    return run


def test_the_report_shows_the_first_failing_ranks_traceback(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCFLOW_HOME", str(tmp_path / "home"))
    failing_job(tmp_path, resilience=True)
    rep, _ = load_report("9", now_s=T0 + 100)
    (failure,) = rep.failures
    assert failure.kind == K.ENDING_PROGRAM_ERROR
    error = failure.error
    assert error is not None and error["rank"] == 1 and error["try"] == 0  # not the peer, rank 0
    assert error["type"] == "ValueError" and error["step"] == 6
    assert error["traceback"].splitlines()[-1] == "ValueError: bad batch at step 7"
    assert 'raise ValueError(f"bad batch at step {step}")' in error["traceback"]
    assert "in go_deeper" in error["traceback"] and "in load_batch" in error["traceback"]
    assert error["file"] == f".hpcflow/{P.errors_name('9', 0, 0)}/1.json"


def test_without_a_program_error_event_the_folder_is_found_by_its_name(tmp_path, monkeypatch):
    # A job without a resilience block has no program_error event; the folder has its name.
    monkeypatch.setenv("HPCFLOW_HOME", str(tmp_path / "home"))
    failing_job(tmp_path, resilience=False)
    rep, _ = load_report("9", now_s=T0 + 100)
    assert rep.failures[0].error["type"] == "ValueError"


def test_only_peer_failures_show_the_lowest_rank(tmp_path):
    run = tmp_path / "run"
    folder = f"{P.STATE_DIR}/{P.errors_name('9', 0, 1)}"
    for rank in (3, 2):
        record(run, folder, rank, lambda: (_ for _ in ()).throw(
            RuntimeError("Connection reset by peer")))
    events = [ev("attempt_start", 0), ev("step_end", 1, rc=1), ev("step_end", 2, rc=1)]
    errors = step_errors(run, "9", events)
    assert list(errors) == [(0, 1)] and errors[(0, 1)].rank == 2


def test_a_long_traceback_keeps_its_last_lines_and_says_how_many_were_cut(tmp_path, hpcflow,
                                                                         slurm):
    run = failing_job(tmp_path, resilience=True)
    folder = run / P.STATE_DIR / P.errors_name("9", 0, 0)
    record(run, str(folder.relative_to(run)), 1, lambda: raise_deep(200))
    rep, _ = load_report("9", now_s=T0 + 100)
    text = rep.failures[0].error["traceback"]
    lines = text.splitlines()
    assert len(lines) == TRACEBACK_LINES + 1
    assert lines[0].startswith("... (") and "left out" in lines[0]
    assert lines[-1] == "ValueError: bad batch at step 7"
    # The text report prints it under the failures, the JSON one carries it.
    out = hpcflow("report", "9")
    assert out.exit_code == 0, out.output
    assert "traceback of rank 1 (try 0, after step 6;" in out.output
    assert "ValueError: bad batch at step 7" in out.output
    data = json.loads(hpcflow("report", "9", "--json").output)["data"]
    assert data["failures"][0]["error"]["traceback"] == text


def test_bounded_cuts_by_characters_too():
    text = "\n".join(f"line {i} " + "x" * 500 for i in range(20))
    out = bounded(text, max_lines=30, max_chars=2000)
    assert len(out) <= 2000 + 40 and out.endswith("line 19 " + "x" * 500)
    assert out.startswith("... (17 line(s) left out)")
    assert bounded("one\ntwo\n") == "one\ntwo"
    assert bounded("y" * 9000, max_chars=100) == "y" * 100
