"""The watchdog beside a step under SageMaker HyperPod's ``srun --auto-resume=1``: heartbeats of a
step that no longer runs (HyperPod is replacing a node and running the step again) are not
judged; those of a running step are, as always. Rules as tables; the process with fake squeue and
scancel on PATH (the local Slurm has no HyperPod plugin)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpcflow import protocol
from hpcflow.contract import WatchdogSettings
from hpcflow.watchdog.__main__ import step_ids
from hpcflow.watchdog.hang import first_beat_s, live_beats


def beat(step_id: str | None, t: float) -> dict:
    out = {"section": "step", "time": t, "step": 5}
    if step_id is not None:
        out["slurm_step_id"] = step_id
    return out


@pytest.mark.parametrize(("beats", "live", "kept"), [
    pytest.param({0: beat("0", 1), 1: beat("0", 2)}, {"0"}, [0, 1], id="the-step-runs"),
    pytest.param({0: beat("0", 1), 1: beat("0", 2)}, set(), [], id="the-step-ended"),
    pytest.param({0: beat("0", 1), 1: beat("1", 9)}, {"1", "batch"}, [1],
                 id="a-rank-of-the-rerun-and-one-of-the-ended-run"),
    pytest.param({0: beat(None, 1), 1: beat("", 2)}, set(), [0, 1], id="not-under-srun-is-kept"),
    pytest.param({0: beat("0", 1)}, {"00", "0.0"}, [], id="ids-match-whole"),
])
def test_only_ranks_of_a_running_step_are_judged(beats, live, kept):
    assert sorted(live_beats(beats, live)) == kept


def test_the_rerun_is_armed_at_its_own_first_heartbeat():
    assert first_beat_s({0: beat("1", 9.5), 3: beat("1", 7.25)}) == 7.25


@pytest.mark.parametrize(("text", "ids"), [
    pytest.param("", set(), id="none"),
    pytest.param("42.batch\n42.0\n42.3\n", {"batch", "0", "3"}, id="job"),
    pytest.param("42_7.batch\n42_7.1\n", {"batch", "1"}, id="array-element"),
    pytest.param("  42.0  \nnoise\n", {"0"}, id="spaces-and-a-line-without-a-step"),
])
def test_squeue_steps_are_read(text, ids):
    assert step_ids(text) == ids


def run_watchdog(tmp_path: Path, *, squeue: str | None, auto_resume: bool,
                 wait_s: float) -> tuple[int | None, list[dict], Path]:
    """One watchdog on two ranks whose heartbeats (step 0) went stale 100 s ago, with squeue
    listing ``squeue`` (None: squeue fails); returns its status (None: still running after
    ``wait_s``, then killed), the ledger's events and the fake commands' log."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    for name, body in (("scancel", "exit 0"),
                       ("squeue", "exit 1" if squeue is None else f"printf '{squeue}'")):
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\necho "{name} $*" >> "{calls}"\n{body}\n')
        script.chmod(0o755)
    run_dir = tmp_path / "run"
    beats = protocol.state_dir(run_dir) / protocol.heartbeat_name("42", 0, 0)
    beats.mkdir(parents=True)
    stale = time.time() - 100
    settings = WatchdogSettings(heartbeat_interval_s=0.2, startup_s=20, checkpoint_s=20,
                                step_floor_s=1, step_factor=3, warmup_steps=3, kill_after_s=0)
    for rank in (0, 1):
        (beats / f"{rank}.json").write_text(json.dumps({**beat("0", stale), "pid": 0, "host": ""}))
    argv = [sys.executable, "-m", "hpcflow.watchdog", "--heartbeat-dir", str(beats),
            "--ntasks", "2", "--run-dir", str(run_dir), "--job-id", "42",
            "--settings", json.dumps(settings.encode()), "--poll-s", "0.2", "--parent-pid", str(os.getpid()),
            *(["--auto-resume"] if auto_resume else [])]
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        rc = proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        rc = None
    finally:
        proc.kill()
        proc.wait()
    ledger = protocol.ledger_path(run_dir)
    events = ([json.loads(line) for line in ledger.read_text().splitlines()]
              if ledger.exists() else [])
    return rc, events, calls


def test_ranks_of_an_ended_step_are_left_to_hyperpods_rerun(tmp_path):
    rc, events, calls = run_watchdog(tmp_path, squeue="42.batch\n", auto_resume=True, wait_s=3)
    assert rc is None and events == []  # still watching; no hang, nothing ended
    log = calls.read_text().splitlines()
    assert log and all(line.startswith("squeue --steps --jobs=42") for line in log)
    assert len(log) <= 2  # at most one look every 10 s


@pytest.mark.parametrize(("squeue", "auto_resume"), [
    pytest.param("42.batch\n42.0\n", True, id="auto-resume-step-still-runs"),
    pytest.param(None, True, id="auto-resume-squeue-fails"),
    pytest.param("42.batch\n", False, id="without-auto-resume-squeue-is-not-asked"),
])
def test_ranks_of_a_running_step_are_judged_as_always(tmp_path, squeue, auto_resume):
    rc, events, calls = run_watchdog(tmp_path, squeue=squeue, auto_resume=auto_resume, wait_s=30)
    assert rc == 0 and [e["event"] for e in events] == ["hang"]
    log = calls.read_text().splitlines()
    assert "scancel --signal=KILL 42.0" in log
    assert any(line.startswith("squeue") for line in log) is auto_resume
