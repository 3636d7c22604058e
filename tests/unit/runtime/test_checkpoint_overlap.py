"""Async saves whose staging copy overlaps the next step (``overlap=True``), in one process.

The late copy is held at a gate the test opens, so each ordering below is forced, never timed:
a torch optimizer's step waits for the copy, what is committed is the state at the save, and a
tensor changed in place before the copy is made fails the save instead of tearing it.
"""

from __future__ import annotations

import threading

import pytest
import torch
from torch.optim.optimizer import _global_optimizer_pre_hooks

from hpcflow.errors import CheckpointError
from hpcflow.runtime import staging
from hpcflow.runtime.checkpoint import CheckpointManager

pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled:UserWarning")

GATE_TIMEOUT_S = 60.0  # a guard against a hung test, never an expectation
BIG = staging.PARALLEL_MIN_BYTES // 4  # float32 elements: copied late
SMALL = 16  # copied at the save


class HeldCopy:
    """Holds every late staging copy until :attr:`gate` opens; records the order of things."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.gate = threading.Event()
        self.order: list[str] = []
        own = staging.ParallelStager._copy

        def held(stager, pairs):  # noqa: ANN001, ANN202
            if pairs:
                assert self.gate.wait(GATE_TIMEOUT_S), "the gate was never opened"
            own(stager, pairs)
            if pairs:
                self.order.append("copied")

        monkeypatch.setattr(staging.ParallelStager, "_copy", held)


def model_and_optimizer() -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = torch.nn.Linear(BIG // 64, 64, bias=False)  # one weight of BIG elements
    model.register_buffer("seen", torch.zeros(SMALL))
    return model, torch.optim.SGD(model.parameters(), lr=0.5)


def state(model: torch.nn.Module) -> dict:
    return {"model": model.state_dict()}


def warm(manager: CheckpointManager, model: torch.nn.Module, held: HeldCopy) -> None:
    """A first save allocates the staging buffers (copied at once: nothing to overlap); the
    gate is closed after it."""
    held.gate.set()
    manager.save(1, state(model), blocking=False, overlap=True)
    manager.wait()
    assert manager.wait_staged() == 0.0
    held.gate.clear()


def load_weight(manager: CheckpointManager, step: int) -> dict:
    target = {"model": {"weight": torch.zeros(64, BIG // 64), "seen": torch.zeros(SMALL)}}
    manager.load(step, target)
    return target["model"]


def test_an_optimizer_step_waits_for_the_copy_and_the_checkpoint_is_the_state_at_the_save(
        tmp_path, monkeypatch):
    held = HeldCopy(monkeypatch)
    model, optimizer = model_and_optimizer()
    manager = CheckpointManager(tmp_path, keep=3)
    warm(manager, model, held)
    at_save = model.weight.detach().clone()
    model(torch.ones(1, BIG // 64)).sum().backward()  # gradients before the save, as a loop has

    manager.save(2, state(model), blocking=False, overlap=True)
    model.seen.add_(1.0)  # a small buffer (a norm's statistics): copied already, free to change
    stepper = threading.Thread(target=lambda: (optimizer.step(), held.order.append("stepped")))
    stepper.start()
    stepper.join(0.3)
    assert stepper.is_alive() and held.order == [], "the optimizer's step did not wait"
    held.order.append("gate opened")
    held.gate.set()
    stepper.join(GATE_TIMEOUT_S)
    assert held.order == ["gate opened", "copied", "stepped"]

    result = manager.wait()
    assert result is not None and result.step == 2
    assert result.staging_wait_s > 0 and result.blocked_s >= result.staging_wait_s
    saved = load_weight(manager, 2)
    assert torch.equal(saved["weight"], at_save)
    assert not torch.equal(model.weight.detach(), at_save)  # the step did change the weight
    assert torch.equal(saved["seen"], torch.zeros(SMALL))
    manager.close()


def test_a_tensor_changed_in_place_before_its_copy_fails_the_save_and_commits_nothing(
        tmp_path, monkeypatch):
    held = HeldCopy(monkeypatch)
    model, _ = model_and_optimizer()
    manager = CheckpointManager(tmp_path, keep=3)
    warm(manager, model, held)

    manager.save(2, state(model), blocking=False, overlap=True)
    with torch.no_grad():
        model.weight.mul_(2.0)  # a hand-written update, not an optimizer's step
    held.gate.set()
    with pytest.raises(CheckpointError, match=r"1 tensor\(s\) changed in place .*model\.weight"):
        manager.wait()
    assert manager.committed_steps() == [1]
    manager.close()


def test_wait_staged_lets_a_loop_change_the_state_its_own_way(tmp_path, monkeypatch):
    held = HeldCopy(monkeypatch)
    model, _ = model_and_optimizer()
    manager = CheckpointManager(tmp_path, keep=3)
    warm(manager, model, held)
    held.gate.set()
    at_save = model.weight.detach().clone()
    manager.save(2, state(model), blocking=False, overlap=True)
    manager.wait_staged()
    with torch.no_grad():
        model.weight.mul_(2.0)
    assert manager.wait() is not None
    assert torch.equal(load_weight(manager, 2)["weight"], at_save)
    manager.close()


def test_the_optimizer_hook_is_there_only_while_the_manager_is_open(tmp_path):
    before = len(_global_optimizer_pre_hooks)
    model, _ = model_and_optimizer()
    manager = CheckpointManager(tmp_path, keep=3)
    manager.save(1, state(model), blocking=False)  # no overlap: no hook
    manager.wait()
    assert len(_global_optimizer_pre_hooks) == before
    manager.save(2, state(model), blocking=False, overlap=True)
    manager.save(3, state(model), blocking=False, overlap=True)
    assert len(_global_optimizer_pre_hooks) == before + 1
    manager.close()
    assert len(_global_optimizer_pre_hooks) == before
    assert manager.committed_steps() == [1, 2, 3]
