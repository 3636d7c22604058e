"""A rank's heartbeat file, its stacks on the stacks signal, and its exception record."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from hpcflow import protocol
from hpcflow.runtime.heartbeat import Heartbeat, error_signature, record_error


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def read(path: Path) -> dict:
    return json.loads(path.read_text())


def test_no_directory_means_no_heartbeat() -> None:
    assert Heartbeat.from_environ({}, 0) is None


def test_bad_interval_is_refused_with_the_variable_name(tmp_path: Path) -> None:
    env = {protocol.ENV_HEARTBEAT_DIR: str(tmp_path), protocol.ENV_HEARTBEAT_INTERVAL_S: "0"}
    with pytest.raises(ValueError, match="HPCFLOW_HEARTBEAT_INTERVAL_S='0'"):
        Heartbeat.from_environ(env, 0)


def test_the_interval_has_no_default_of_its_own(tmp_path: Path) -> None:
    # The spec is the one place it lives: a folder without the interval is a broken batch script.
    with pytest.raises(ValueError, match="HPCFLOW_HEARTBEAT_INTERVAL_S is not"):
        Heartbeat.from_environ({protocol.ENV_HEARTBEAT_DIR: str(tmp_path)}, 0)
    beat = Heartbeat.from_environ({protocol.ENV_HEARTBEAT_DIR: str(tmp_path),
                                   protocol.ENV_HEARTBEAT_INTERVAL_S: "2"}, 0)
    assert beat is not None and beat.interval_s == 2.0


def test_section_change_writes_at_once_and_steps_are_throttled(tmp_path: Path) -> None:
    clock = Clock()
    hb = Heartbeat(tmp_path, 3, interval_s=2.0, clock=clock)
    try:
        hb.beat("startup", 0)
        first = read(tmp_path / "3.json")
        assert (first["section"], first["step"], first["rank"], first["pid"]) == (
            "startup", 0, 3, os.getpid())
        clock.now += 0.1
        hb.beat("step", 1)
        assert read(tmp_path / "3.json")["section"] == "step"
        for step in range(2, 6):
            clock.now += 0.5
            hb.step_time(0.5 if step < 5 else 4.0)
            hb.beat("step", step)
        # 2.0 s after the last write: steps 2-4 were skipped, step 5 is written
        last = read(tmp_path / "3.json")
        assert last["step"] == 5 and last["steps_timed"] == 4 and last["step_p99_s"] == 4.0
        clock.now += 0.1
        hb.beat("checkpoint", 5)
        assert read(tmp_path / "3.json")["section"] == "checkpoint"
    finally:
        hb.close()


def test_stacks_signal_writes_this_process_stacks(tmp_path: Path) -> None:
    hb = Heartbeat(tmp_path, 0, interval_s=2.0)
    try:
        os.kill(os.getpid(), getattr(signal, "SIG" + protocol.STACKS_SIGNAL))
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not (tmp_path / "0.stacks").read_text():
            time.sleep(0.05)
        text = (tmp_path / "0.stacks").read_text()
        assert "test_stacks_signal_writes_this_process_stacks" in text
    finally:
        hb.close()


def test_exception_record_holds_type_step_and_traceback(tmp_path: Path) -> None:
    def fail() -> None:
        raise ValueError("bad batch")

    try:
        fail()
    except ValueError as exc:
        record_error({protocol.ENV_ERROR_DIR: str(tmp_path / "errors")}, 2, 6, exc)
        assert error_signature(exc, 6) == "ValueError@6"
    rec = read(tmp_path / "errors" / "2.json")
    assert (rec["type"], rec["step"], rec["message"]) == ("ValueError", 6, "bad batch")
    assert "in fail" in rec["traceback"]
    assert (tmp_path / "errors" / "2.sig").read_text() == "ValueError@6\n"
    record_error({}, 0, 1, RuntimeError("x"))  # no folder asked for: nothing, no error


def test_a_collective_broken_by_a_dead_peer_is_not_a_program_error(tmp_path: Path) -> None:
    # The message gloo raised here (torch 2.13) when the other rank was killed with -9.
    exc = RuntimeError("[../third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error "
                       "[127.0.0.1]:12702: Connection reset by peer. This is typically caused by "
                       "a remote worker hanging")
    folder = tmp_path / "errors"
    record_error({protocol.ENV_ERROR_DIR: str(folder)}, 0, 14, exc)
    assert read(folder / "0.json")["peer_failure"] is True
    assert not (folder / "0.sig").exists()
    record_error({protocol.ENV_ERROR_DIR: str(folder)}, 1, 14, RuntimeError("shape mismatch"))
    assert (folder / "1.sig").read_text() == "RuntimeError@14\n"
