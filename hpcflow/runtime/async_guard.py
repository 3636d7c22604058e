"""A background (interval) save that failed is known at once, and saved again or the run stops.

Without this, a failed asynchronous save surfaced only when the next save waited for it, an
interval later, and every step since the previous checkpoint was lost with it. Ranks learn the
outcome of the writer thread at different moments, so the decision is agreed: at each step
boundary while a save is being written, one all-reduce (MAX) of two bits, "failed here" and
"still writing here". Torch is imported only when that runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hpcflow.errors import CheckpointError
from hpcflow.protocol import TAG_CHECKPOINT
from hpcflow.runtime.lines import emit, log


def check_async(run: Any, step: int, state: Mapping[str, Any]) -> None:
    """At the boundary after ``step`` (collective): if the background save of
    ``run._async_pending`` failed on any rank, report it now (rank 0 prints ``hpcflow-checkpoint``
    with ``"failed": true`` and the error) and save ``step`` again, in line, on every rank; once
    it has committed everywhere, stop watching.

    Args:
        run: the :class:`~hpcflow.runtime.run.Run` (its ``ckpt`` and ``_async_pending``).
        step: the step just completed.
        state: what :meth:`~hpcflow.runtime.run.Run.step_done` was given.

    Raises:
        CheckpointError: the save in line failed too (on every rank): the run stops, with the
            runtime's status 5.
    """
    failed, writing = _agree(run.ckpt.failure is not None, run.ckpt.writing)
    if not failed:
        if not writing:
            run._async_pending = None  # committed on every rank: nothing more to watch
        return
    pending, run._async_pending = run._async_pending, None
    try:
        run.ckpt.wait()
        error = "it failed on another rank"
    except CheckpointError as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()] or ["?"]
        # The first line says which save; the last one, under a traceback, what failed.
        error = lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"
    emit(run.env, TAG_CHECKPOINT, {"step": pending, "reason": "interval", "async": True,
                                   "failed": True, "error": error[:500]})
    log(run.env, f"the background save of step {pending} failed ({error}); saving step {step} "
                 "now, in line")
    run.save(step, state, reason="retry")


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
