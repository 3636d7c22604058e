"""Sharded checkpoints that are complete or ignored, written in line or in the background
(DESIGN.md §3, docs/protocol.md step 5).

A save: rank 0 makes a fresh ``step_<N>.tmp/`` → every rank writes its shards there with
``torch.distributed.checkpoint`` (DCP), whose last collective gathers every rank's write result
on rank 0 before it writes ``.metadata`` → rank 0 writes the commit record, renames the directory
to ``step_<N>/`` and prunes → every rank learns the outcome. A failure anywhere raises
:class:`~hpcflow.errors.CheckpointError` on every rank and commits nothing.

``save(..., blocking=False)`` copies the state into CPU staging buffers (DCP's ``DefaultStager``,
reused by later saves) and returns; a background thread does the write and the commit, as
``dcp.async_save`` does with its thread executor (torch/distributed/checkpoint/state_dict_saver.py).
Every collective of a save runs on a gloo group of its own, never on the training group
(torchtitan ``components/checkpoint.py`` does the same for its async mode).

``state`` is a DCP state dict: tensors, DTensors, picklable values, and ``Stateful`` objects
(``state_dict()`` / ``load_state_dict()``), e.g. :class:`hpcflow.examples.trainstate.TrainState`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcflow.errors import CheckpointError
from hpcflow.runtime import commit as layout
from hpcflow.runtime import dist as hdist

#: ``on_event(event, step)``; called on the thread where the event happens (see CheckpointManager).
EventHook = Callable[[str, int], None]

#: Seconds a checkpoint collective may wait for the other ranks (the checkpoint group's timeout).
DEFAULT_COORD_TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class SaveResult:
    """A committed asynchronous save as this rank saw it.

    Attributes:
        step: the step the checkpoint holds.
        path: the committed directory ``<root>/step_<step>``.
        blocked_s: seconds the caller spent inside :meth:`CheckpointManager.save`.
        total_s: seconds from the ``save`` call until this rank knew the commit.
    """

    step: int
    path: Path
    blocked_s: float
    total_s: float


@dataclass
class _InFlight:
    step: int
    future: Future[float]  # monotonic time at which this rank learned the commit
    started: float
    blocked_s: float


class CheckpointManager:
    """Saves, commits, finds and loads the checkpoints under one root directory.

    :meth:`save`, :meth:`wait`, :meth:`close`, :meth:`clean_partial` and :meth:`load` are
    collective when a process group is active: every rank calls them in the same order, at the
    same step. :meth:`poll`, :attr:`in_flight`, :attr:`writing`, :meth:`latest_committed`,
    :meth:`committed_steps` and :meth:`due` are local. The root must be on a file system every
    rank sees.

    At most one save is in flight: :meth:`save` first waits for the previous one, so the ranks
    never disagree about which saves exist. Before the process ends, call :meth:`wait` (or
    :meth:`close`): a save still in flight when the process dies is never committed, and the
    next start removes its directory.

    ``on_event(event, step)`` sees, in order: ``save_start``, ``prepared`` (the ``.tmp``
    directory exists), ``staged`` (async only: the live state may change from here on),
    ``write_start``, ``write_data`` (this rank starts writing its files), ``finish`` (rank 0,
    before DCP writes ``.metadata``), ``written`` (every rank's files are written), then on rank 0
    ``record_written`` and ``renamed`` (the commit point), then ``committed`` on every rank; or
    ``failed``. Events from ``write_start`` on come from the writer thread for an async save.

    Args:
        root: checkpoint directory (``HPCFLOW_CHECKPOINT_DIR``); created on the first save.
        keep: committed checkpoints to keep (at least 1).
        interval_steps: :meth:`due` is true every this many steps; 0 = never (save only when
            preempted).
        extra_record: more facts for each commit record, e.g. the mesh layout.
        on_event: observer of the save's phases (tests, metrics); must be thread-safe.
        coord_timeout_s: seconds a checkpoint collective waits for the other ranks.

    Raises:
        ValueError: ``keep`` < 1, ``interval_steps`` < 0 or ``coord_timeout_s`` <= 0.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        keep: int = 3,
        interval_steps: int = 0,
        *,
        extra_record: dict[str, Any] | None = None,
        on_event: EventHook | None = None,
        coord_timeout_s: float = DEFAULT_COORD_TIMEOUT_S,
    ) -> None:
        if keep < 1:
            raise ValueError(f"keep={keep}: at least the newest checkpoint must be kept")
        if interval_steps < 0:
            raise ValueError(f"interval_steps={interval_steps} must be 0 (off) or positive")
        if coord_timeout_s <= 0:
            raise ValueError(f"coord_timeout_s={coord_timeout_s} must be positive")
        self.root = Path(root)
        self.keep = keep
        self.interval_steps = interval_steps
        self.extra_record = dict(extra_record or {})
        self.on_event = on_event
        self.coord_timeout_s = coord_timeout_s
        self._group: Any = None
        self._group_made = False
        self._executor: ThreadPoolExecutor | None = None
        self._stager: Any = None
        self._in_flight: _InFlight | None = None
        self._unreported: list[SaveResult] = []  # collected by save/load/..., kept for poll

    def due(self, step: int) -> bool:
        """True if the periodic interval asks for a checkpoint after ``step``."""
        return self.interval_steps > 0 and step > 0 and step % self.interval_steps == 0

    def committed_steps(self) -> list[int]:
        """Steps with a valid commit record, ascending (local file-system read)."""
        return layout.scan(self.root).committed

    def latest_committed(self) -> int | None:
        """The highest committed step, or ``None`` when there is none.

        ``.tmp`` directories and directories without a valid record never count. Local read:
        call it after :meth:`clean_partial` (which ends with a collective) and, to be safe against
        a file system with lagging metadata, let rank 0 decide and broadcast the result.
        """
        steps = self.committed_steps()
        return steps[-1] if steps else None

    @property
    def in_flight(self) -> int | None:
        """The step of the asynchronous save not yet collected, or ``None`` (local)."""
        return self._in_flight.step if self._in_flight else None

    @property
    def writing(self) -> bool:
        """True while the asynchronous save is still being written or committed (local; false
        once it has committed or failed, before :meth:`poll` or :meth:`wait` collects it)."""
        return self._in_flight is not None and not self._in_flight.future.done()

    @property
    def failure(self) -> str | None:
        """The error of the asynchronous save in flight once it has failed on this rank, else
        ``None`` (local, never blocks; :meth:`wait` then raises it)."""
        flight = self._in_flight
        if flight is None or not flight.future.done() or flight.future.exception() is None:
            return None
        return str(flight.future.exception())

    def clean_partial(self) -> list[Path]:
        """Wait for a save in flight, then rank 0 removes partial directories (``step_<N>.tmp/``,
        ``step_<N>/`` without a record). Call at start, before anything is loaded or saved:
        leftovers can hang the next save (DESIGN.md §3).

        Returns:
            The directories removed (empty on ranks other than 0).

        Raises:
            CheckpointError: rank 0 could not remove one (raised on every rank).
        """
        self._wait_quietly()
        return self._on_rank0("clean partial checkpoints", self._remove_partial) or []

    def save(self, step: int, state: dict[str, Any], *, blocking: bool = True) -> Path:
        """Write the checkpoint of ``step`` and commit it, now or in the background.

        A save still in flight is waited for first (and its failure raised). Saving the step
        that is in flight again does not write it twice: ``blocking=True`` waits for it.

        Cost, blocking: a sharded write of the state by every rank (fsync of each file), DCP's
        collectives and three small ones, the record and one rename on rank 0. Non-blocking: the
        caller pays one copy of the state into CPU staging buffers (as large as this rank's
        state, kept for the next save) and two small collectives; a background thread does the
        rest.

        Args:
            step: the number of completed training steps the state holds.
            state: the DCP state dict to write.
            blocking: False = return once the state is staged; the commit follows when every
                rank's files are written (see :meth:`poll`, :meth:`wait`).

        Returns:
            The directory ``<root>/step_<step>`` (committed already when ``blocking``).

        Raises:
            CheckpointError: ``step_<step>/`` exists already, or staging, a write, the commit or
                the pruning failed, this save's or the one in flight before it (raised on every
                rank; no committed directory is left for a failed write).
        """
        started = time.monotonic()
        final = layout.step_dir(self.root, step)
        if self._in_flight is not None and self._in_flight.step == step:
            if blocking:
                self._wait_quietly()
            return final
        self._wait_quietly()
        self._emit("save_start", step)
        self._on_rank0(f"prepare checkpoint of step {step}",
                       lambda: layout.fresh_tmp_dir(self.root, step))
        self._emit("prepared", step)
        flat, error = None, None
        try:  # a local failure here must not leave the other ranks waiting inside DCP
            flat = self._flatten(state)
            if not blocking:
                flat = self._stage(flat)
        except Exception as exc:  # agreed on below, so every rank raises it
            error = f"capturing the state of step {step} failed: {type(exc).__name__}: {exc}"
        error = self._first_error(error)
        if error is not None:
            self._emit("failed", step)
            raise CheckpointError(error)
        if blocking:
            self._write_and_commit(flat, step)
            return final
        self._emit("staged", step)
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hpcflow-ckpt")
        future = self._executor.submit(self._write_and_commit, flat, step)
        self._in_flight = _InFlight(step, future, started, time.monotonic() - started)
        return final

    def poll(self) -> SaveResult | None:
        """Collect the asynchronous save if it has committed; never blocks, never raises.

        Local: ranks may see the commit at different steps, so never base a collective decision
        on it. A failed save is left in flight for :meth:`wait` or the next :meth:`save` to raise
        on every rank.

        Returns:
            Each committed async save once (also one that :meth:`save`, :meth:`load` or
            :meth:`clean_partial` waited for), or ``None`` while it runs, after a failure, or
            when nothing is in flight.
        """
        if self._unreported:
            return self._unreported.pop(0)
        flight = self._in_flight
        if flight is None or not flight.future.done() or flight.future.exception() is not None:
            return None
        return self._collect()

    def wait(self) -> SaveResult | None:
        """Block until the asynchronous save in flight is committed on this rank.

        Returns:
            The save it waited for (or one committed earlier and not yet reported by
            :meth:`poll`), or ``None``.

        Raises:
            CheckpointError: that save failed (raised on every rank).
        """
        result = self._collect()
        if result is None and self._unreported:
            result = self._unreported.pop(0)
        return result

    def _wait_quietly(self) -> None:
        """Wait for the save in flight, keeping its result for :meth:`poll`."""
        result = self._collect()
        if result is not None:
            self._unreported.append(result)

    def _collect(self) -> SaveResult | None:
        flight, self._in_flight = self._in_flight, None
        if flight is None:
            return None
        try:
            done = flight.future.result()
        except CheckpointError:
            raise
        except _dcp_errors() as exc:  # an error outside the write itself; still every rank's
            what = f"{type(exc).__name__}: {exc}"
            raise CheckpointError(f"the checkpoint of step {flight.step} failed: {what}") from exc
        return SaveResult(flight.step, layout.step_dir(self.root, flight.step), flight.blocked_s,
                          done - flight.started)

    def close(self) -> None:
        """Wait for a save in flight, then free the writer thread and the staging buffers.

        Raises:
            CheckpointError: the save in flight failed (the resources are freed anyway).
        """
        try:
            self.wait()
        finally:
            if self._executor is not None:
                self._executor.shutdown(wait=True)
                self._executor = None
            if self._stager is not None:
                self._stager.close()
                self._stager = None

    def load(self, step: int, state: dict[str, Any]) -> None:
        """Read committed checkpoint ``step`` into ``state`` in place (collective).

        Stateful entries get ``load_state_dict`` called with what was read. A save in flight is
        waited for first.

        Raises:
            CheckpointError: ``step_<step>/`` is not committed, or DCP could not read it (e.g. a
                key of ``state`` is missing from the checkpoint).
        """
        self._wait_quietly()
        directory = layout.step_dir(self.root, step)
        if layout.read_commit_record(directory) is None:
            raise CheckpointError(f"{directory} is not a committed checkpoint; it is never loaded")
        import torch.distributed.checkpoint as dcp

        try:
            dcp.load(state, storage_reader=dcp.FileSystemReader(directory),
                     no_dist=not hdist.is_distributed())
        except _dcp_errors() as exc:
            raise CheckpointError(f"loading the checkpoint {directory} failed: {exc}") from exc

    # ---- internals

    def _remove_partial(self) -> list[Path]:
        return layout.remove_partial(self.root)

    def _emit(self, event: str, step: int) -> None:
        if self.on_event is not None:
            self.on_event(event, step)

    @staticmethod
    def _flatten(state: dict[str, Any]) -> dict[str, Any]:
        """``state`` with each Stateful entry replaced by its ``state_dict()``, as DCP's own
        ``save`` does first, so the checkpoint's keys are the same either way."""
        from torch.distributed.checkpoint.stateful import Stateful

        return {k: v.state_dict() if isinstance(v, Stateful) else v for k, v in state.items()}

    def _stage(self, flat: dict[str, Any]) -> Any:
        """Copy ``flat`` into this manager's CPU buffers (allocated on the first save)."""
        import torch
        from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions

        if self._stager is None:
            pin = torch.cuda.is_available()  # pinned host memory speeds device-to-host copies
            self._stager = DefaultStager(StagingOptions(
                use_pinned_memory=pin, use_shared_memory=False, use_async_staging=False,
                use_non_blocking_copy=False,
            ))
        return self._stager.stage(flat)

    def _write_and_commit(self, state: Any, step: int) -> float:
        """Write with DCP, then commit on rank 0; every rank returns or raises the same outcome.

        Runs on the writer thread for an async save. Uses only the checkpoint group.

        Returns:
            The monotonic time at which this rank knew the commit.
        """
        import torch.distributed.checkpoint as dcp

        tmp = layout.tmp_dir(self.root, step)
        try:
            self._emit("write_start", step)
            try:
                dcp.save(state, storage_writer=_observed_writer(tmp, self._emit, step),
                         process_group=self._coord_group(), no_dist=not hdist.is_distributed())
            except _dcp_errors() as exc:  # DCP gathers every rank's failure, raises on all
                raise CheckpointError(
                    f"writing the checkpoint of step {step} to {tmp} failed: {exc}"
                ) from exc
            # DCP's last step gathers every rank's write result on rank 0 (each file fsynced
            # with sync_files=True) before rank 0 writes .metadata: every rank has written.
            self._emit("written", step)
            self._on_rank0(f"commit checkpoint of step {step}", lambda: self._commit(step))
            self._emit("committed", step)
        except BaseException:
            self._emit("failed", step)
            raise
        return time.monotonic()

    def _commit(self, step: int) -> None:
        layout.check_committable(self.root, step)
        world_size = hdist.get_world_size()
        layout.write_commit_record(layout.tmp_dir(self.root, step), step, world_size,
                                   self.extra_record)
        self._emit("record_written", step)
        layout.publish(self.root, step)
        self._emit("renamed", step)
        layout.prune(self.root, self.keep)

    def _coord_group(self) -> Any:
        """The gloo group for checkpoint collectives, made on first use (collective), or
        ``None`` without a process group."""
        if not self._group_made and hdist.is_distributed():
            from datetime import timedelta

            import torch.distributed as dist

            timeout = timedelta(seconds=self.coord_timeout_s)
            self._group = dist.new_group(backend="gloo", timeout=timeout)
        self._group_made = True
        return self._group

    def _first_error(self, error: str | None) -> str | None:
        """Every rank's ``error`` gathered; the first one (by rank) on every rank, or None."""
        group = self._coord_group()
        if group is None:
            return error
        import torch.distributed as dist

        errors: list[Any] = [None] * dist.get_world_size(group)
        dist.all_gather_object(errors, error, group=group)
        return next((e for e in errors if e is not None), None)

    def _on_rank0(self, what: str, work: Callable[[], Any]) -> Any:
        """Run ``work()`` on rank 0, share success or the error message with every rank."""
        result: Any = None
        error: str | None = None
        if hdist.get_rank() == 0:
            try:
                result = work()
            except Exception as exc:  # reported on every rank below
                error = f"{what} under {self.root} failed: {type(exc).__name__}: {exc}"
        error = self._first_error(error)
        if error is not None:
            raise CheckpointError(error)
        return result


def _dcp_errors() -> tuple[type[BaseException], ...]:
    """What a DCP call raises: its ``CheckpointException`` (a ``BaseException``, so
    ``except Exception`` misses it; torch/distributed/checkpoint/api.py) or any ``Exception``."""
    from torch.distributed.checkpoint.api import CheckpointException

    return (Exception, CheckpointException)


def _observed_writer(path: Path, emit: EventHook, step: int) -> Any:
    """DCP's ``FileSystemWriter`` (fsync of every file, refuses an existing checkpoint) that
    reports ``write_data`` and ``finish`` to ``emit``."""
    import torch.distributed.checkpoint as dcp

    class ObservedWriter(dcp.FileSystemWriter):
        def write_data(self, plan: Any, planner: Any) -> Any:
            emit("write_data", step)
            return super().write_data(plan, planner)

        def finish(self, metadata: Any, results: Any) -> None:
            emit("finish", step)
            super().finish(metadata, results)

    return ObservedWriter(path, sync_files=True, overwrite=False)


