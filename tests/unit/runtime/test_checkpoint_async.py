"""Asynchronous saves of the checkpoint manager in one process (world of 1, no process group).

The writer thread is held at a phase with a gate (an event the test opens), so every ordering
below is forced, never timed.
"""

from __future__ import annotations

import threading

import pytest
import torch

from hpcflow.errors import CheckpointError
from hpcflow.runtime import commit as ckpt_dirs
from hpcflow.runtime.checkpoint import CheckpointManager, SaveResult

pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled:UserWarning")

GATE_TIMEOUT_S = 60.0  # a guard against a hung test, never an expectation


class Recorder:
    """Records (event, step) in order; can hold the writer at one phase until opened."""

    def __init__(self, hold_at: str | None = None, fail_at: str | None = None,
                 fail_step: int | None = None) -> None:
        self.events: list[tuple[str, int]] = []
        self.hold_at = hold_at
        self.fail_at = fail_at
        self.fail_step = fail_step
        self.gate = threading.Event()
        self.held = threading.Event()
        self.lock = threading.Lock()

    def __call__(self, event: str, step: int) -> None:
        with self.lock:
            self.events.append((event, step))
        if event == self.fail_at and self.fail_step in (None, step):
            raise RuntimeError(f"injected failure at {event}")
        if event == self.hold_at:
            self.held.set()
            if not self.gate.wait(GATE_TIMEOUT_S):
                raise RuntimeError(f"the gate at {event} was never opened")

    def note(self, what: str, step: int) -> None:
        self(what, step)

    def index(self, event: str, step: int) -> int:
        return self.events.index((event, step))


def state_of(value: float) -> dict:
    return {"w": torch.full((64,), value), "meta": {"step_like": int(value)}}


def read_w(manager: CheckpointManager, step: int) -> torch.Tensor:
    target = {"w": torch.zeros(64), "meta": {"step_like": -1}}
    manager.load(step, target)
    return target["w"]


def test_async_save_returns_before_the_write_and_commits_after_it(tmp_path):
    rec = Recorder(hold_at="write_data")
    manager = CheckpointManager(tmp_path, keep=3, on_event=rec)
    path = manager.save(2, state_of(2.0), blocking=False)
    assert rec.held.wait(GATE_TIMEOUT_S), rec.events
    rec.note("caller_returned", 2)
    assert path == tmp_path / "step_2"
    assert manager.in_flight == 2 and manager.writing
    assert manager.poll() is None
    assert manager.committed_steps() == [] and ckpt_dirs.tmp_dir(tmp_path, 2).is_dir()
    rec.gate.set()
    result = manager.wait()
    assert isinstance(result, SaveResult)
    assert (result.step, result.path) == (2, path)
    assert 0 <= result.blocked_s <= result.total_s
    assert manager.committed_steps() == [2] and manager.in_flight is None
    assert not manager.writing
    names = [event for event, _ in rec.events]
    assert names == ["save_start", "prepared", "staged", "write_start", "write_data",
                     "caller_returned", "finish", "written", "record_written", "renamed",
                     "committed"]


def test_staged_state_is_isolated_from_updates_after_save_returns(tmp_path):
    rec = Recorder(hold_at="write_data")
    async_manager = CheckpointManager(tmp_path / "async", on_event=rec)
    sync_manager = CheckpointManager(tmp_path / "sync")
    live = state_of(1.0)
    sync_manager.save(1, live)
    async_manager.save(1, live, blocking=False)
    assert rec.held.wait(GATE_TIMEOUT_S)
    live["w"].add_(100.0)  # an optimizer step while the write is held
    rec.gate.set()
    async_manager.wait()
    assert torch.equal(read_w(async_manager, 1), torch.full((64,), 1.0))
    assert torch.equal(read_w(async_manager, 1), read_w(sync_manager, 1))


def test_next_save_waits_for_the_one_in_flight(tmp_path):
    rec = Recorder()
    manager = CheckpointManager(tmp_path, keep=5, on_event=rec)
    manager.save(2, state_of(2.0), blocking=False)
    manager.save(4, state_of(4.0), blocking=True)
    assert rec.index("committed", 2) < rec.index("save_start", 4)
    assert manager.committed_steps() == [2, 4]
    assert torch.equal(read_w(manager, 2), torch.full((64,), 2.0))
    reported = manager.poll()  # the async save that save(4) waited for is still reported once
    assert reported is not None and reported.step == 2
    assert manager.poll() is None and manager.wait() is None


def test_wait_reports_a_save_collected_by_load(tmp_path):
    manager = CheckpointManager(tmp_path)
    manager.save(1, state_of(1.0), blocking=False)
    assert torch.equal(read_w(manager, 1), torch.full((64,), 1.0))  # load waits for the save
    result = manager.wait()
    assert result is not None and result.step == 1
    assert manager.wait() is None


def test_saving_the_step_in_flight_again_waits_instead_of_writing_twice(tmp_path):
    rec = Recorder()
    manager = CheckpointManager(tmp_path, on_event=rec)
    manager.save(3, state_of(3.0), blocking=False)
    assert manager.save(3, state_of(3.0), blocking=True) == tmp_path / "step_3"
    assert manager.in_flight is None and manager.committed_steps() == [3]
    assert [e for e in rec.events if e[0] == "save_start"] == [("save_start", 3)]


def test_poll_reports_a_commit_exactly_once(tmp_path):
    rec = Recorder(hold_at="write_start")
    manager = CheckpointManager(tmp_path, on_event=rec)
    assert manager.poll() is None
    manager.save(1, state_of(1.0), blocking=False)
    assert rec.held.wait(GATE_TIMEOUT_S)
    assert manager.poll() is None
    rec.gate.set()
    manager._in_flight.future.result(GATE_TIMEOUT_S)  # done, but not collected yet
    result = manager.poll()
    assert result is not None and result.step == 1
    assert manager.poll() is None and manager.wait() is None


@pytest.mark.parametrize("phase", ["write_data", "finish", "written", "record_written"])
def test_failure_in_the_background_surfaces_on_wait_and_commits_nothing(tmp_path, phase):
    rec = Recorder(fail_at=phase, fail_step=2)
    manager = CheckpointManager(tmp_path, on_event=rec)
    manager.save(1, state_of(1.0), blocking=True)
    manager.save(2, state_of(2.0), blocking=False)
    manager._in_flight.future.exception(GATE_TIMEOUT_S)
    assert manager.poll() is None, "poll must leave a failure for wait to raise"
    assert not manager.writing and manager.in_flight == 2
    with pytest.raises(CheckpointError, match="injected failure"):
        manager.wait()
    assert ("failed", 2) in rec.events and ("renamed", 2) not in rec.events
    assert manager.committed_steps() == [1]
    assert manager.latest_committed() == 1
    removed = manager.clean_partial()
    assert [p.name for p in removed] == ["step_2.tmp"]


def test_failure_in_the_background_surfaces_on_the_next_save(tmp_path):
    manager = CheckpointManager(tmp_path, on_event=Recorder(fail_at="write_data"))
    manager.save(2, state_of(2.0), blocking=False)
    with pytest.raises(CheckpointError, match="step 2"):
        manager.save(4, state_of(4.0), blocking=False)
    assert manager.in_flight is None
    assert manager.committed_steps() == []


def test_state_that_cannot_be_captured_fails_the_save_at_once(tmp_path):
    class Broken:
        def state_dict(self):
            raise RuntimeError("disk on fire")

        def load_state_dict(self, state):
            raise AssertionError("never loaded")

    manager = CheckpointManager(tmp_path)
    with pytest.raises(CheckpointError, match="disk on fire"):
        manager.save(5, {"app": Broken()}, blocking=False)
    assert manager.in_flight is None
    assert [p.name for p in manager.clean_partial()] == ["step_5.tmp"]


def test_async_saves_keep_the_last_k(tmp_path):
    manager = CheckpointManager(tmp_path, keep=2, interval_steps=2)
    for step in range(1, 9):
        if manager.due(step):
            manager.save(step, state_of(float(step)), blocking=False)
    manager.close()
    assert manager.committed_steps() == [6, 8]
    assert torch.equal(read_w(manager, 8), torch.full((64,), 8.0))


def test_close_waits_for_the_save_in_flight(tmp_path):
    rec = Recorder()
    manager = CheckpointManager(tmp_path, on_event=rec)
    manager.save(7, state_of(7.0), blocking=False)
    manager.close()
    assert ("committed", 7) in rec.events and manager.committed_steps() == [7]
    assert manager.in_flight is None


def test_clean_partial_waits_so_it_never_removes_a_save_in_flight(tmp_path):
    manager = CheckpointManager(tmp_path)
    manager.save(3, state_of(3.0), blocking=False)
    assert manager.clean_partial() == []
    assert manager.committed_steps() == [3]


def test_async_save_refuses_a_committed_step(tmp_path):
    manager = CheckpointManager(tmp_path)
    manager.save(1, state_of(1.0))
    with pytest.raises(CheckpointError, match="never overwritten"):
        manager.save(1, state_of(1.0), blocking=False)
    assert manager.in_flight is None


def test_manager_rejects_a_non_positive_coordination_timeout():
    with pytest.raises(ValueError, match="coord_timeout_s=0"):
        CheckpointManager("unused", coord_timeout_s=0)
