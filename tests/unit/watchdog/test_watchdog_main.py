"""The watchdog end to end on this machine, without Slurm: a real rank process that sends
heartbeats and then blocks is found, its stacks written, the hang recorded."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpcflow import protocol
from hpcflow.contract import SupervisorSettings, WatchdogSettings
from hpcflow.watchdog.__main__ import _args, main
from hpcflow.watchdog.stacks import stopped_ranks

RANK = """\
import sys, time
from pathlib import Path
from hpcflow.runtime.heartbeat import Heartbeat

def stuck_in_a_collective():
    time.sleep(120)

hb = Heartbeat(Path(sys.argv[1]), 0, interval_s=0.2)
hb.beat("startup", 0)
for step in range(1, 8):
    time.sleep(0.05)
    hb.step_time(0.05)
    hb.beat("step", step)
Path(sys.argv[1], "ready").touch()
stuck_in_a_collective()
"""


def start_rank(tmp_path: Path, job: str, program: str) -> tuple[Path, Path, subprocess.Popen]:
    """The run directory, the heartbeat folder and a rank process running ``program``."""
    run_dir = tmp_path / "run"
    beats = protocol.state_dir(run_dir) / protocol.heartbeat_name(job, 0, 0)
    beats.mkdir(parents=True)
    return run_dir, beats, subprocess.Popen([sys.executable, "-c", program, str(beats)])


def watch(beats: Path, run_dir: Path, job: str, kill_after_s: str) -> int:
    """The watchdog on one rank: a 1 s step floor after 3 steps, 0.2 s heartbeats and polls."""
    settings = WatchdogSettings(heartbeat_interval_s=0.2, startup_s=20, checkpoint_s=20,
                                step_floor_s=1, step_factor=3, warmup_steps=3,
                                kill_after_s=float(kill_after_s))
    return main(["--heartbeat-dir", str(beats), "--ntasks", "1", "--run-dir", str(run_dir),
                 "--job-id", job, "--settings", json.dumps(settings.encode()),
                 "--poll-s", "0.2"])


def test_a_blocked_rank_is_reported_with_its_stacks(tmp_path: Path) -> None:
    run_dir, beats, rank = start_rank(tmp_path, "7", RANK)
    try:
        deadline = time.monotonic() + 30
        while not (beats / "ready").exists():
            assert rank.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        started = time.monotonic()
        assert watch(beats, run_dir, "7", "0") == 0
        waited = time.monotonic() - started
    finally:
        rank.kill()
        rank.wait()
    assert waited < 15  # the derived step timeout (1 s floor), not the 20 s start-up one
    (event,) = [json.loads(line) for line in
                protocol.ledger_path(run_dir).read_text().splitlines()]
    assert event["event"] == "hang" and event["section"] == "step" and event["ranks"] == [0]
    # the last heartbeat written: steps inside one interval are not all written
    assert event["timeout_s"] == 1.0 and 3 <= event["step"] <= 7
    stacks = (run_dir / event["stacks"]).read_text()
    assert stacks.startswith("==== rank 0 ")
    assert "stuck_in_a_collective" in stacks
    assert json.loads((beats / "hang.json").read_text())["ranks"] == [0]


PAUSING_RANK = """\
import sys, time
from pathlib import Path
from hpcflow.runtime.heartbeat import Heartbeat

def steps(hb, first):
    for step in range(first, first + 6):
        time.sleep(0.05)
        hb.step_time(0.05)
        hb.beat("step", step)

def a_long_evaluation():
    time.sleep(3.0)

def stuck_for_good():
    time.sleep(120)

hb = Heartbeat(Path(sys.argv[1]), 0, interval_s=0.2)
hb.beat("startup", 0)
steps(hb, 1)
a_long_evaluation()
steps(hb, 7)
stuck_for_good()
"""


def test_a_pause_is_only_suspected_and_a_hang_that_lasts_ends_the_step(tmp_path: Path) -> None:
    run_dir, beats, rank = start_rank(tmp_path, "8", PAUSING_RANK)
    try:
        assert watch(beats, run_dir, "8", "2.5") == 0
    finally:
        rank.kill()
        rank.wait()
    events = [json.loads(line) for line in protocol.ledger_path(run_dir).read_text().splitlines()]
    assert [e["event"] for e in events] == ["hang_suspected", "hang_cleared", "hang_suspected",
                                            "hang"]
    first, cleared, second, hang = events
    # the pause (3 s) outlived the 1 s step timeout, not the 2.5 s more that ends a step
    assert first["stacks"] == "hang-8-0-0-suspected-1.txt" and first["kill_after_s"] == 2.5
    assert cleared["stacks"] == first["stacks"] and 0 < cleared["after_s"] < 2.5
    assert "a_long_evaluation" in (run_dir / first["stacks"]).read_text()
    assert second["stacks"] == "hang-8-0-0-suspected-2.txt" and second["step"] > first["step"]
    assert hang["stacks"] == "hang-8-0-0.txt"
    assert "stuck_for_good" in (run_dir / hang["stacks"]).read_text()
    assert json.loads((beats / "hang.json").read_text())["event"] == "hang"


def test_a_stopped_rank_on_this_host_is_named() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        beats = {0: {"pid": os.getpid(), "host": socket.gethostname()},
                 1: {"pid": child.pid, "host": socket.gethostname()}}
        os.kill(child.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 10
        while stopped_ranks(beats, "7") != [1]:
            assert time.monotonic() < deadline, "the stopped child was never seen stopped"
            time.sleep(0.05)
        # a rank on another node is not looked at from here
        assert stopped_ranks({1: {"pid": child.pid, "host": "elsewhere-n9"}}, "7") == []
    finally:
        child.kill()
        child.wait()


def test_a_script_rendered_before_kill_after_s_keeps_ending_a_hang_at_once() -> None:
    """Version skew: a batch script rendered by a previous release (same protocol version) is
    requeued after an upgrade; its settings carry the watchdog's old command-line words, some
    without ``--kill-after-s``, and the new supervisor hands them to the new watchdog."""
    old = ["--startup-s=600", "--checkpoint-s=600", "--step-floor-s=60", "--step-factor=3.0",
           "--warmup-steps=10", "--interval-s=2"]

    def settings(options: list[str]) -> WatchdogSettings:
        cfg = SupervisorSettings.decode({"watchdog": {"options": options,
                                                      "heartbeat_interval_s": 2}})
        assert cfg.watchdog is not None
        return _args(["--heartbeat-dir", "/x", "--ntasks", "2", "--run-dir", "/r", "--job-id",
                      "7", "--settings", json.dumps(cfg.watchdog.encode())]).settings

    assert settings(old).kill_after_s == 0.0
    assert settings([*old, "--kill-after-s=540"]).kill_after_s == 540.0
    assert settings(old) == WatchdogSettings(heartbeat_interval_s=2, startup_s=600,
                                             checkpoint_s=600, step_floor_s=60, step_factor=3.0,
                                             warmup_steps=10)


@pytest.mark.parametrize("text, says", [
    pytest.param("{", "Expecting property name", id="not-json"),
    pytest.param('{"heartbeat_interval_s": 2}', "lack startup_s", id="missing"),
    pytest.param(json.dumps({**WatchdogSettings(2, 600, 600, 60, 3.0, 10).encode(),
                             "heartbeat_interval_s": 0}), "'heartbeat_interval_s'",
                 id="interval-zero"),
    pytest.param(json.dumps({**WatchdogSettings(2, 600, 600, 60, 3.0, 10).encode(),
                             "warmup_steps": 2.5}), "'warmup_steps'", id="warmup-a-fraction"),
    pytest.param(json.dumps({**WatchdogSettings(2, 600, 600, 60, 3.0, 10).encode(),
                             "kill_after_s": -1}), "'kill_after_s'", id="kill-after-negative"),
])
def test_bad_settings_are_a_usage_error_naming_the_member(text: str, says: str,
                                                          capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as info:
        _args(["--heartbeat-dir", "/x", "--ntasks", "2", "--run-dir", "/r", "--job-id", "7",
               "--settings", text])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--settings" in err and says in err
