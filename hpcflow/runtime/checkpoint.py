"""Sharded checkpoints that are complete or ignored (DESIGN.md §3, docs/protocol.md step 5).

Save: every rank writes its shards into a fresh ``step_<N>.tmp/`` with
``torch.distributed.checkpoint`` (DCP) → barrier → rank 0 writes the commit record, renames the
directory to ``step_<N>/`` and prunes old checkpoints → every rank learns the outcome. A failure
anywhere raises :class:`~hpcflow.errors.CheckpointError` on every rank and leaves no committed
directory behind.

``state`` is a DCP state dict: tensors, DTensors, picklable values, and objects with
``state_dict()`` / ``load_state_dict()`` (DCP's ``Stateful``), e.g.
:class:`hpcflow.runtime.trainstate.TrainState`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hpcflow.errors import CheckpointError
from hpcflow.runtime import commit as layout
from hpcflow.runtime import dist as hdist


class CheckpointManager:
    """Saves, commits, finds and loads the checkpoints under one root directory.

    All methods except :meth:`latest_committed`, :meth:`committed_steps` and :meth:`due` are
    collective when a process group is active: every rank calls them in the same order.
    The root must be on a file system every rank sees (the run directory).

    ``save`` is synchronous today. An asynchronous save (``dcp.async_save``) fits behind the same
    calls: ``save`` would return after staging and :meth:`wait` would finish the write and
    commit, so callers already call :meth:`wait` before relying on a commit. TODO(#async-save).

    Args:
        root: checkpoint directory (``HPCFLOW_CHECKPOINT_DIR``); created on the first save.
        keep: committed checkpoints to keep (at least 1).
        interval_steps: :meth:`due` is true every this many steps; 0 = never (save only when
            preempted).
        extra_record: more facts for each commit record, e.g. the mesh layout.

    Raises:
        ValueError: ``keep`` < 1 or ``interval_steps`` < 0.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        keep: int = 3,
        interval_steps: int = 0,
        *,
        extra_record: dict[str, Any] | None = None,
    ) -> None:
        if keep < 1:
            raise ValueError(f"keep={keep}: at least the newest checkpoint must be kept")
        if interval_steps < 0:
            raise ValueError(f"interval_steps={interval_steps} must be 0 (off) or positive")
        self.root = Path(root)
        self.keep = keep
        self.interval_steps = interval_steps
        self.extra_record = dict(extra_record or {})

    def due(self, step: int) -> bool:
        """True if the periodic interval asks for a checkpoint after ``step``."""
        return self.interval_steps > 0 and step > 0 and step % self.interval_steps == 0

    def committed_steps(self) -> list[int]:
        """Steps with a valid commit record, ascending (local file-system read)."""
        return layout.scan(self.root).committed

    def latest_committed(self) -> int | None:
        """The highest committed step, or ``None`` when there is none.

        ``.tmp`` directories and directories without a valid record never count. Local read:
        call it after :meth:`clean_partial` (which ends with a barrier) and, to be safe against a
        file system with lagging metadata, let rank 0 decide and broadcast the result.
        """
        steps = self.committed_steps()
        return steps[-1] if steps else None

    def clean_partial(self) -> list[Path]:
        """Rank 0 removes partial directories (``step_<N>.tmp/``, ``step_<N>/`` without a
        record); then every rank waits. Call at start, before anything is loaded or saved.

        Leftover partial directories can hang the next save (DESIGN.md §3).

        Returns:
            The directories removed (empty on ranks other than 0).

        Raises:
            CheckpointError: rank 0 could not remove one (raised on every rank).
        """

        def work() -> list[Path]:
            return layout.remove_partial(self.root)

        return self._on_rank0("clean partial checkpoints", work) or []

    def save(self, step: int, state: dict[str, Any]) -> Path:
        """Write and commit the checkpoint of ``step``.

        Cost: one sharded write of the state by every rank (with fsync of each file), DCP's own
        collectives, one barrier, two small broadcasts, and the record write plus one rename on
        rank 0.

        Args:
            step: the number of completed training steps the state holds.
            state: the DCP state dict to write.

        Returns:
            The committed directory ``<root>/step_<step>``.

        Raises:
            CheckpointError: ``step_<step>/`` exists already, or a write, the commit or the
                pruning failed (raised on every rank; no committed directory is left for a
                failed write).
        """
        tmp = layout.tmp_dir(self.root, step)

        def prepare() -> None:
            if layout.step_dir(self.root, step).exists():
                raise FileExistsError(
                    f"{layout.step_dir(self.root, step)} exists already; "
                    "a checkpoint is never overwritten"
                )
            if tmp.exists():  # a save of this step that failed earlier in this process
                layout.remove_partial(self.root)
            tmp.mkdir(parents=True)

        self._on_rank0(f"prepare checkpoint of step {step}", prepare)
        import torch.distributed.checkpoint as dcp

        try:
            dcp.save(
                state,
                storage_writer=dcp.FileSystemWriter(tmp, sync_files=True, overwrite=False),
            )
        except Exception as exc:  # DCP gathers every rank's failure and raises on all ranks
            raise CheckpointError(
                f"writing the checkpoint of step {step} to {tmp} failed: {exc}"
            ) from exc
        hdist.barrier()
        world_size = hdist.get_world_size()

        def finish() -> Path:
            final = layout.commit(self.root, step, world_size, self.extra_record)
            layout.prune(self.root, self.keep)
            return final

        self._on_rank0(f"commit checkpoint of step {step}", finish)
        return layout.step_dir(self.root, step)

    def wait(self) -> None:
        """Block until the last save is committed (immediate: saves are synchronous today)."""

    def load(self, step: int, state: dict[str, Any]) -> None:
        """Read committed checkpoint ``step`` into ``state`` in place (collective).

        Stateful entries get ``load_state_dict`` called with what was read.

        Raises:
            CheckpointError: ``step_<step>/`` is not committed, or DCP could not read it (e.g. a
                key of ``state`` is missing from the checkpoint).
        """
        directory = layout.step_dir(self.root, step)
        if layout.read_commit_record(directory) is None:
            raise CheckpointError(f"{directory} is not a committed checkpoint; it is never loaded")
        import torch.distributed.checkpoint as dcp

        try:
            dcp.load(state, storage_reader=dcp.FileSystemReader(directory))
        except Exception as exc:
            raise CheckpointError(f"loading the checkpoint {directory} failed: {exc}") from exc

    def _on_rank0(self, what: str, work: Any) -> Any:
        """Run ``work()`` on rank 0, share success or the error message with every rank."""
        result: Any = None
        error: str | None = None
        if hdist.get_rank() == 0:
            try:
                result = work()
            except Exception as exc:  # reported on every rank below
                error = f"{what} under {self.root} failed: {type(exc).__name__}: {exc}"
        error = hdist.broadcast_object(error)
        if error is not None:
            raise CheckpointError(error)
        return result
