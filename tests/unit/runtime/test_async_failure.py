"""A background interval save that fails is reported at the next step boundary (not at the
next save, an interval later) and the step is saved again in line; a second failure stops the
run. One process (world of 1); the writer thread fails at a real phase of the save."""

from __future__ import annotations

import json
import threading
import time

import pytest
import torch

from hpcflow.errors import CheckpointError
from hpcflow.runtime import Run

pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled:UserWarning")


class FailWrites:
    """on_event hook: the writer thread fails when it starts writing this rank's files."""

    def __init__(self, times: int) -> None:
        self.left = times

    def __call__(self, event: str, step: int) -> None:
        if event == "write_data" and self.left > 0:
            self.left -= 1
            raise OSError(28, "No space left on device")


def start(tmp_path, fails: int) -> tuple[Run, dict]:
    env = {"HPCFLOW_RUN_DIR": str(tmp_path / "run"),
           "HPCFLOW_CHECKPOINT_DIR": str(tmp_path / "ckpt"),
           "HPCFLOW_CHECKPOINT_INTERVAL": "2"}
    run = Run.from_env(env, async_save=True)
    run.ckpt.on_event = FailWrites(fails)
    state = {"model": torch.nn.Linear(4, 2)}
    run.restore(state)
    return run, state


def wait_written(run: Run) -> None:
    deadline = time.monotonic() + 60
    while run.ckpt.writing:
        assert time.monotonic() < deadline, "the background save never ended"
        time.sleep(0.01)


def tagged(out: str, tag: str) -> list[dict]:
    return [json.loads(line.split(" ", 1)[1]) for line in out.splitlines()
            if line.startswith(tag + " ")]


def test_a_failed_background_save_is_reported_at_once_and_saved_again(tmp_path, capsys):
    run, state = start(tmp_path, fails=1)
    try:
        run.step_done(1, state)
        run.step_done(2, state)  # the interval save of step 2 starts in the background
        wait_written(run)  # ... and fails there
        run.step_done(3, state)  # the very next boundary knows
        out = capsys.readouterr().out
    finally:
        run.close()
    lines = tagged(out, "hpcflow-checkpoint")
    failed = [c for c in lines if c.get("failed")]
    assert [c["step"] for c in failed] == [2] and "No space left" in failed[0]["error"]
    assert [c["step"] for c in lines if c.get("reason") == "retry"] == [3]
    # step_3 is committed; the failed step_2.tmp is never loaded (removed at the next start).
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir() if "." not in p.name) == [
        "step_3"]


def test_a_second_failure_stops_the_run(tmp_path, capsys):
    run, state = start(tmp_path, fails=2)
    try:
        run.step_done(1, state)
        run.step_done(2, state)
        wait_written(run)
        with pytest.raises(CheckpointError, match="No space left"):
            run.step_done(3, state)
    finally:
        run.close(together=False)
    assert [c["step"] for c in tagged(capsys.readouterr().out, "hpcflow-checkpoint")
            if c.get("failed")] == [2]
    assert [p.name for p in (tmp_path / "ckpt").iterdir() if "." not in p.name] == []


def test_a_background_save_that_commits_is_watched_no_longer(tmp_path):
    run, state = start(tmp_path, fails=0)
    try:
        run.step_done(1, state)
        run.step_done(2, state)
        wait_written(run)
        run.step_done(3, state)
        assert run._async_pending is None  # no more agreement rounds until the next save
    finally:
        run.close()
    assert (tmp_path / "ckpt" / "step_2").is_dir()


def test_a_state_changed_outside_the_optimizer_during_an_overlapped_copy_is_saved_again(
        tmp_path, monkeypatch, capsys):
    # The late staging copy is held until the loop has changed the weight by hand.
    from hpcflow.runtime import staging

    gate = threading.Event()
    own = staging.ParallelStager._copy

    def held(stager, pairs):  # noqa: ANN001, ANN202
        if pairs:
            assert gate.wait(60), "the gate was never opened"
        own(stager, pairs)

    monkeypatch.setattr(staging.ParallelStager, "_copy", held)
    env = {"HPCFLOW_RUN_DIR": str(tmp_path / "run"),
           "HPCFLOW_CHECKPOINT_DIR": str(tmp_path / "ckpt"),
           "HPCFLOW_CHECKPOINT_INTERVAL": "2"}
    run = Run.from_env(env, async_save=True, overlap=True)
    model = torch.nn.Linear(512, 512, bias=False)  # 1 MiB: copied late once the buffers exist
    state = {"model": model}
    run.restore(state)
    try:
        for step in (1, 2, 3, 4):  # step 2's save allocates the buffers; step 4's copies late
            if step == 3:
                wait_written(run)
            run.step_done(step, state)
        with torch.no_grad():
            model.weight.mul_(2.0)  # by hand, not in an optimizer's step
        gate.set()
        wait_written(run)
        run.step_done(5, state)
        out = capsys.readouterr().out
    finally:
        run.close()
    lines = tagged(out, "hpcflow-checkpoint")
    failed = [c for c in lines if c.get("failed")]
    assert [c["step"] for c in failed] == [4] and "changed in place" in failed[0]["error"]
    assert [c["step"] for c in lines if c.get("reason") == "retry"] == [5]
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir() if "." not in p.name) == [
        "step_2", "step_5"]
