"""An async save whose copy into staging buffers overlaps the next training step.

``save(..., blocking=False, overlap=True)`` copies only the small storages (under
:data:`hpcflow.runtime.staging.PARALLEL_MIN_BYTES`: norms' running statistics, counters) and those
not on the CPU before it returns; the large CPU storages (weights, optimizer moments) are copied
by the writer thread while the training thread runs the next forward and backward passes. The
state must not change in place until that copy is made, so:

- every torch optimizer's ``step`` waits for it first (a global optimizer step pre-hook,
  ``torch.optim.optimizer.register_optimizer_step_pre_hook``, torch >= 2.0), as do the next
  save, a load and :meth:`~hpcflow.runtime.checkpoint.CheckpointManager.wait_staged`, which a loop
  that changes the state another way calls first;
- each tensor copied late has its version counter (``Tensor._version``, which every in-place
  operation on it or a view of it increases) read before the copy and after: a tensor that
  changed meanwhile makes the save fail on every rank (nothing is written, nothing committed),
  and the run's next step boundary saves again in line (:mod:`hpcflow.runtime.async_guard`).
  The counter is the state dict's tensor's: ``Module.state_dict()`` and an optimizer's state
  share it with the live tensors, but FSDP2's ``get_state_dict`` gives each parameter a new
  one (measured, torch 2.13), so a parameter changed outside an optimizer's step is caught
  there only by the rule above, not by the counters.

torchtitan waits for its staging the same way, before the optimizer's step
(``maybe_wait_for_staging``, torchtitan/components/checkpoint.py). Torch is imported only when a
save runs.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

#: Tensor names a failure message lists at most.
NAMES_SHOWN = 5


def _local(tensor: Any) -> Any:
    """The tensor that holds the bytes: a DTensor's local shard, else the tensor."""
    return getattr(tensor, "_local_tensor", tensor)


def watch_versions(flat: dict[str, Any], storages: set[int]) -> list[tuple[str, Any, int]]:
    """``(name, tensor, version)`` of each tensor of the flat state dict (nested dicts and lists
    walked, names joined with ``.``) whose storage is among ``storages`` (``data_ptr``)."""
    import torch

    found: list[tuple[str, Any, int]] = []

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, torch.Tensor):
            local = _local(value)
            if local.untyped_storage().data_ptr() in storages:
                found.append((prefix, local, local._version))
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), item)
        elif isinstance(value, (list, tuple)):
            for index, item in enumerate(value):
                walk(f"{prefix}.{index}", item)

    walk("", flat)
    return found


def changed_names(watched: list[tuple[str, Any, int]]) -> list[str]:
    """The names of the watched tensors whose version counter moved."""
    return [name for name, tensor, version in watched if tensor._version != version]


def changed_error(step: int, names: list[str]) -> str:
    """What a save whose state changed during its late copy fails with."""
    shown = ", ".join(names[:NAMES_SHOWN]) + (" ..." if len(names) > NAMES_SHOWN else "")
    return (f"the checkpoint of step {step} was not written: {len(names)} tensor(s) changed in "
            f"place while they were copied for it ({shown}). With overlap=True the state may "
            "change only inside a torch optimizer's step (which waits for the copy) or after "
            "wait_staged(); a save without overlap copies the whole state before it returns")


class OptimizerGate:
    """A global optimizer step pre-hook that calls ``wait`` before every torch optimizer's
    ``step`` in this process, from :meth:`arm` (once) until :meth:`close`.

    Args:
        wait: blocks until the staging copy in flight is made (the manager's ``wait_staged``);
            held weakly through its owner, so the hook keeps nothing alive.
    """

    def __init__(self, owner: Any, wait: Callable[[Any], Any]) -> None:
        self._owner = weakref.ref(owner)
        self._wait = wait
        self._hook: Any = None

    def arm(self) -> None:
        """Register the hook (once)."""
        if self._hook is not None:
            return
        from torch.optim.optimizer import register_optimizer_step_pre_hook

        def before_step(optimizer: Any, args: Any, kwargs: Any) -> None:
            owner = self._owner()
            if owner is not None:
                self._wait(owner)

        self._hook = register_optimizer_step_pre_hook(before_step)

    def close(self) -> None:
        """Remove the hook."""
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
