"""A background (interval) save that failed is known at once, and saved again or the run stops.

Without this, a failed asynchronous save surfaced only when the next save waited for it, an
interval later, and every step since the previous checkpoint was lost with it. Ranks learn the
outcome of the writer thread at different moments, so the decision is agreed: at each step
boundary while a save is being written, one all-reduce (MAX) of two bits, "failed here" and
"still writing here". Torch is imported only when that runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from hpcflow.errors import CheckpointError
from hpcflow.protocol import TAG_CHECKPOINT
from hpcflow.runtime.env import DistEnv
from hpcflow.runtime.lines import emit, log


class BackgroundSave(Protocol):
    """What the guard reads of the checkpoint manager
    (:class:`~hpcflow.runtime.checkpoint.CheckpointManager`): all local to this rank."""

    @property
    def failure(self) -> str | None:
        """The error of the save in flight once it failed here, else None."""

    @property
    def writing(self) -> bool:
        """The save in flight is still being written here."""

    def wait(self) -> Any:
        """Block until the save in flight is committed here; raise its CheckpointError."""


def check_async(saves: BackgroundSave, env: DistEnv, *, pending: int, step: int,
                save_again: Callable[[], None]) -> int | None:
    """At the boundary after ``step`` (collective): if the background save of step ``pending``
    failed on any rank, report it now (rank 0 prints ``hpcflow-checkpoint`` with ``"failed":
    true`` and the error) and save ``step`` again, in line, on every rank (``save_again``).

    Args:
        saves: the run's checkpoint manager.
        env: this rank's place in the job (rank 0 prints).
        pending: the step of the background save not yet known committed everywhere.
        step: the step just completed.
        save_again: saves ``step`` in line (the run's :meth:`~hpcflow.runtime.run.Run.save`).

    Returns:
        The step still to watch: ``pending`` while some rank is still writing it, None once it
        has committed everywhere or was saved again.

    Raises:
        CheckpointError: the save in line failed too (on every rank): the run stops, with the
            runtime's status 5.
    """
    failed, writing = _agree(saves.failure is not None, saves.writing)
    if not failed:
        return pending if writing else None  # committed on every rank: nothing more to watch
    try:
        saves.wait()
        error = "it failed on another rank"
    except CheckpointError as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()] or ["?"]
        # The first line says which save; the last one, under a traceback, what failed.
        error = lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"
    emit(env, TAG_CHECKPOINT, {"step": pending, "reason": "interval", "async": True,
                               "failed": True, "error": error[:500]})
    log(env, f"the background save of step {pending} failed ({error}); saving step {step} "
             "now, in line")
    save_again()
    return None


def _agree(failed: bool, writing: bool) -> tuple[bool, bool]:
    """(any rank failed, any rank still writing); local values without a process group."""
    from hpcflow.runtime import dist as hdist

    if not hdist.is_distributed():
        return failed, writing
    import torch
    import torch.distributed as dist

    bits = torch.tensor([int(failed), int(writing)], dtype=torch.int32,
                        device=hdist.collective_device())
    dist.all_reduce(bits, op=dist.ReduceOp.MAX)
    return bool(bits[0].item()), bool(bits[1].item())
