"""Property test, the content half of the hostile inputs: any lines in a run directory's files
(the ledger, the job log, ``submissions.jsonl``, a rank's error record) give ``status``,
``report``, ``logs`` and ``plan goodput --from-job`` a typed value or a counted skip, never an
internal error (exit 1) nor a traceback.

The lines are drawn from what breaks a careless reader: random bytes; JSON nested 100,000 levels
deep (``json.loads`` raises ``RecursionError``); ledger events whose fields have the wrong type
(a restart number that is a string, null or ``1e400``; a time that is text or missing; an exit
status that is a list); the tagged lines a *program* prints (``hpcflow-step {"step": "x"}``, a
step of ``1e400``, ``hpcflow-resume {"step": null}``); a submission whose time is not a number.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcflow import protocol as P
from hpcflow.contract import EVENT_FIELDS
from hpcflow.contract import TAG_FIELDS as CONTRACT_TAG_FIELDS
from hpcflow.jobs import records

SETTINGS = settings(max_examples=int(os.environ.get("HPCFLOW_HOSTILE_EXAMPLES", "60")),
                    deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])

DEEP = "[" * 100_000 + "]" * 100_000
DEEP_OBJECT = '{"a":' * 100_000 + "1" + "}" * 100_000
#: Short stand-ins for the deep lines in what hypothesis draws (and prints on a failure).
MARKS = {"<DEEP>": DEEP, "<DEEP_OBJECT>": DEEP_OBJECT}
#: Values of the wrong type (and a few right ones), as JSON text.
VALUES = ['"x"', "null", "1e400", "-1e400", "[1, 2]", '{"a": 1}', "true", "0", "3", "-5",
          "1.5", "99999999999999999999999", '""', "<DEEP>", "1700000000"]
EVENTS = [P.EVENT_ATTEMPT_START, P.EVENT_SIGNAL, P.EVENT_STEP_END, P.EVENT_REQUEUE,
          P.EVENT_JOB_END, P.EVENT_SPOT_NOTICE, P.EVENT_NETWORK, P.EVENT_NODE_EXCLUDED,
          P.EVENT_PROGRAM_ERROR, P.EVENT_STEP_RESTART, P.EVENT_INTERVAL_CHOSEN, P.EVENT_HANG,
          P.EVENT_HANG_SUSPECTED, P.EVENT_HANG_CLEARED, P.EVENT_CATCH_CHECK, "mirror_done",
          "mirror_pull", P.EVENT_MIRROR_ABANDONED, "made_up"]
FIELDS = ["time", "restart", "job_id", "rc", "reason", "ranks_exited", "ranks_missing",
          "missing", "first_failure", "nodelist", "by", "checkpoint", "cause", "excluded",
          "source", "signal", "action", "node", "summary", "problems", "fix", "stopped",
          "failures", "spare", "errors", "try", "step", "notice_time", "bytes", "lag_s",
          "interval_steps", "stacks", "caught", "exit_code", "requeue_count"]
TAGS = [P.TAG_STEP, P.TAG_RESUME, P.TAG_CHECKPOINT, P.TAG_START, P.TAG_STARTUP, P.TAG_DONE]
TAG_FIELDS = ["step", "step_time_s", "save_s", "failed", "phases", "import_s", "total_s"]
BANNER = "hpcflow: 2026-01-01T00:00:00+0000 job 77 attempt {n} on n1: start"


@pytest.fixture(autouse=True)
def _no_hang() -> Iterator[None]:
    def boom(signum, frame):  # noqa: ANN001, ANN202
        raise TimeoutError("blocked: a hostile line hung the command")
    old = signal.signal(signal.SIGALRM, boom)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def _obj(pairs: list[tuple[str, str]]) -> str:
    return "{" + ", ".join(f'"{k}": {v}' for k, v in pairs) + "}"


@st.composite
def ledger_line(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["event", "event", "event", "bytes", "deep", "deep_object"]))
    if kind == "bytes":
        return draw(st.binary(max_size=60)).decode("latin-1")
    if kind == "deep":
        return "<DEEP>"
    if kind == "deep_object":
        return "<DEEP_OBJECT>"
    event = draw(st.sampled_from(EVENTS))
    pairs = [("event", f'"{event}"'), ("job_id", '"77"'), ("restart", draw(st.sampled_from(
        ["0", "1", *VALUES]))), ("time", draw(st.sampled_from(["1700000100", *VALUES])))]
    own = sorted(EVENT_FIELDS.get(event, {})) or FIELDS
    pairs += draw(st.lists(st.tuples(st.sampled_from(own), st.sampled_from(VALUES)),
                           max_size=3))
    pairs += draw(st.lists(st.tuples(st.sampled_from(FIELDS), st.sampled_from(VALUES)),
                           max_size=2))
    if draw(st.booleans()):
        pairs = [p for p in pairs if p[0] != draw(st.sampled_from(["time", "restart", "job_id"]))]
    return _obj(pairs)


@st.composite
def log_line(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["tag", "tag", "banner", "bytes", "deep", "srun", "stamp"]))
    if kind == "banner":
        return BANNER.format(n=draw(st.sampled_from(["0", "1", "99999999999999999999"])))
    if kind == "bytes":
        return draw(st.binary(max_size=60)).decode("latin-1")
    if kind == "deep":
        return f"{draw(st.sampled_from(TAGS))} {{\"step\": <DEEP>}}"
    if kind == "srun":
        return "srun: error: n1: task 0: Exited with exit code 1"
    if kind == "stamp":
        return "hpcflow: 9999-99-99T99:99:99+9999 stamp"
    tag = draw(st.sampled_from(TAGS))
    own = sorted(CONTRACT_TAG_FIELDS.get(tag, {})) or TAG_FIELDS
    pairs = draw(st.lists(st.tuples(st.sampled_from(own), st.sampled_from(VALUES)),
                          min_size=1, max_size=3))
    return f"{tag} {_obj(pairs)}"


@st.composite
def submission_line(draw: st.DrawFn) -> str:
    pairs = [("job_id", draw(st.sampled_from(['"77"', '"78"', *VALUES]))),
             ("name", draw(st.sampled_from(['"j"', *VALUES]))),
             ("submitted_at", draw(st.sampled_from(["1700000000", *VALUES])))]
    return draw(st.sampled_from([_obj(pairs), "<DEEP>", "not json"]))


def _expand(lines: list[str]) -> str:
    text = "\n".join(lines) + "\n"
    for mark, deep in MARKS.items():
        text = text.replace(mark, deep)
    return text


def _files(base: Path) -> dict[str, Path]:
    run_dir = base / "runs" / "r"
    (run_dir / ".hpcflow").mkdir(parents=True, mode=0o700)
    os.chmod(run_dir, 0o700)
    rec = records.JobRecord("77", "j", str(run_dir), 1700000000.0)
    records.record_submission(rec, "", "")
    errors = run_dir / ".hpcflow" / P.errors_name("77", 0, 0)
    errors.mkdir()
    return {"ledger": run_dir / ".hpcflow" / "events.jsonl", "log": rec.log_path,
            "submissions": run_dir / "submissions.jsonl", "error": errors / "0.json"}


@SETTINGS
@given(ledger=st.lists(ledger_line(), max_size=20), log=st.lists(log_line(), max_size=20),
       subs=st.lists(submission_line(), max_size=3),
       error=st.sampled_from(["<DEEP>", '{"traceback": "t", "step": 1e400, "rank": [1]}',
                              '{"traceback": <DEEP>}', "{}"]))
def test_any_lines_give_an_answer_never_an_internal_error(slurm, hpcflow, tmp_path_factory,
                                                          monkeypatch, ledger, log, subs, error):
    base = tmp_path_factory.mktemp("lines")
    monkeypatch.setenv("HPCFLOW_HOME", str(base / "home"))
    files = _files(base)
    start = '{"event": "attempt_start", "job_id": "77", "restart": 0, "time": 1700000050}'
    files["ledger"].write_text(_expand([start, *ledger]), encoding="utf-8",
                               errors="surrogateescape")
    files["log"].write_text(_expand([BANNER.format(n=0), *log]), encoding="utf-8",
                            errors="surrogateescape")
    with files["submissions"].open("a", encoding="utf-8", errors="surrogateescape") as f:
        f.write(_expand(subs))
    files["error"].write_text(_expand([error]))
    commands = (["status", "77", "--json"], ["report", "77", "--json"], ["report", "77"],
                ["logs", "77"],
                ["plan", "goodput", "--from-job", "77", "--nodes", "2", "--instance",
                 "p5.48xlarge", "--hours", "10", "--price-source", "table", "--save-s", "5",
                 "--restart-s", "60", "--startup-s", "60", "--runs", "5", "--json"])
    for args in commands:
        signal.alarm(30)
        result = hpcflow(*args)
        signal.alarm(0)
        assert result.exit_code in (0, 2, 3, 4), (args, result.output[-2000:], result.exception)
        assert "Traceback" not in result.output and "internal error" not in result.output
        if args[-1] == "--json" and result.exit_code == 0:
            json.loads(result.stdout)


def test_a_line_nested_100000_levels_is_a_counted_skip(slurm, hpcflow, tmp_path, monkeypatch):
    files = _files(tmp_path)
    start = '{"event": "attempt_start", "job_id": "77", "restart": 0, "time": 1700000050}'
    files["ledger"].write_text("\n".join([start, DEEP, DEEP_OBJECT]) + "\n")
    result = hpcflow("report", "77", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)["data"]
    assert len(doc["attempts"]) == 1
    assert doc["skipped"]["ledger"] == 2
