"""Sharded checkpoints that are complete or ignored, written in line or in the background
(docs/architecture.md, "Checkpoints", docs/protocol.md step 5).

A save: rank 0 makes a fresh ``step_<N>.tmp/`` → every rank writes its shards there with
``torch.distributed.checkpoint`` (DCP), whose last collective gathers every rank's write result
on rank 0 before it writes ``.metadata`` → rank 0 writes the commit record, renames the directory
to ``step_<N>/`` and prunes → every rank learns the outcome. A failure anywhere raises
:class:`~hpcflow.errors.CheckpointError` on every rank and commits nothing.

``save(..., blocking=False)`` copies the state into CPU staging buffers and returns; a background
thread does the write and the commit (:mod:`hpcflow.runtime.async_save`).
Every collective of a save runs on a gloo group of its own, never on the training group
(torchtitan ``components/checkpoint.py`` does the same for its async mode).

``state`` is a DCP state dict: tensors, DTensors, picklable values, and ``Stateful`` objects
(``state_dict()`` / ``load_state_dict()``), e.g. :class:`hpcflow.examples.trainstate.TrainState`.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpcflow.errors import CheckpointError
from hpcflow.runtime import checksum
from hpcflow.runtime import commit as ckpt_dirs
from hpcflow.runtime import dist as hdist
from hpcflow.runtime.async_save import (
    AsyncSaves,
    SaveResult,  # noqa: F401 - re-exported
    dcp_errors,
)
from hpcflow.runtime.dcp_io import (
    MISMATCH_WORDS,
    ChecksumMismatch,
    checksum_writer,
    mismatch_message,
)
from hpcflow.runtime.dcp_read import verifying_reader

#: ``on_event(event, step)``; called on the thread where the event happens (see CheckpointManager).
EventHook = Callable[[str, int], None]

#: Seconds a checkpoint collective may wait for the other ranks (the checkpoint group's timeout).
DEFAULT_COORD_TIMEOUT_S = 1800.0


class CheckpointManager(AsyncSaves):
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
        extra_record: more facts for each commit record, e.g. the mesh ckpt_dirs.
        on_event: observer of the save's phases (tests, metrics); must be thread-safe.
        coord_timeout_s: seconds a checkpoint collective waits for the other ranks.
        host: ``(node_rank, local_rank)`` when every host has its own checkpoint folder (a
            SageMaker job of several instances): each host publishes its own files and rank 0
            commits them all (:mod:`hpcflow.runtime.host_local`); None: one shared folder.
        key_file: the run's checkpoint key (32 bytes, mode 0600), outside the checkpoint folder;
            rank 0 creates it at the first save. Default: ``<root>.key`` beside the folder
            (:class:`~hpcflow.runtime.run.Run` uses ``<run_dir>/.hpcflow/checkpoint.key``).

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
        host: tuple[int, int] | None = None,
        key_file: str | os.PathLike[str] | None = None,
    ) -> None:
        if keep < 1:
            raise ValueError(f"keep={keep}: at least the newest checkpoint must be kept")
        if interval_steps < 0:
            raise ValueError(f"interval_steps={interval_steps} must be 0 (off) or positive")
        if coord_timeout_s <= 0:
            raise ValueError(f"coord_timeout_s={coord_timeout_s} must be positive")
        self.root = Path(root)
        absolute = self.root.absolute()
        self.key_file = Path(key_file) if key_file is not None else \
            absolute.with_name(absolute.name + ".key")
        self.keep = keep
        self.interval_steps = interval_steps
        self.extra_record = dict(extra_record or {})
        self.on_event = on_event
        self.coord_timeout_s = coord_timeout_s
        self.host = host
        self._group: Any = None
        self._group_made = False
        self._init_async()

    def due(self, step: int) -> bool:
        """True if the periodic interval asks for a checkpoint after ``step``."""
        return self.interval_steps > 0 and step > 0 and step % self.interval_steps == 0

    def committed_steps(self) -> list[int]:
        """Steps with a valid commit record, ascending (local file-system read)."""
        return ckpt_dirs.scan(self.root).committed

    def latest_committed(self) -> int | None:
        """The highest committed step, or ``None`` when there is none.

        ``.tmp`` directories and directories without a valid record never count. Local read:
        call it after :meth:`clean_partial` (which ends with a collective) and, to be safe against
        a file system with lagging metadata, let rank 0 decide and broadcast the result.
        """
        steps = self.committed_steps()
        return steps[-1] if steps else None

    def latest_verified(self, on_ignored: Callable[[str], None] | None = None) -> int | None:
        """The highest committed step whose record and files match their recorded digests,
        read in full now; a newer one that does not match is passed over, and ``on_ignored``
        told why (:func:`hpcflow.runtime.commit.latest_verified`). Local read of the whole chosen
        checkpoint. A restore does not need it: :meth:`load` checks while it reads."""
        return ckpt_dirs.latest_verified(self.root, on_ignored, self.key())

    def latest_loadable(self, below: int | None = None,
                        on_ignored: Callable[[str], None] | None = None, *,
                        set_aside: bool = False) -> int | None:
        """The highest committed step (below ``below`` when given) whose record passes the
        checks that need no file read: listed sizes (:func:`~hpcflow.runtime.commit.scan`) and,
        when the run has a key, the record's MAC. Each newer one that fails is passed over and
        ``on_ignored`` told why; with ``set_aside`` it is also renamed out of the way
        (:meth:`set_aside`). Local: call it on rank 0 and broadcast the result.

        Raises:
            CheckpointError: the key file exists but is unusable (mode, size).
        """
        steps = [s for s in self.committed_steps() if below is None or s < below]
        key = self.key() if steps else None
        for step in reversed(steps):
            directory = ckpt_dirs.step_dir(self.root, step)
            record = ckpt_dirs.read_commit_record(directory)
            problem = "its record is gone" if record is None else \
                ckpt_dirs.record_problem(record, key)
            if problem is None:
                return step
            where = f"; {self.set_aside(step)}" if set_aside else ""
            if on_ignored is not None:
                on_ignored(f"checkpoint {directory} is ignored: {problem}; the previous "
                           f"committed checkpoint is used instead{where}")
        return None

    def set_aside(self, step: int) -> str:
        """Rename committed ``step_<step>/``, which failed its checks, to
        ``step_<step>.damaged/`` (:func:`hpcflow.runtime.commit.set_aside`), so that the step
        can be saved again. Local (rank 0).

        Returns:
            What was done, for the log: where it went, or why it stayed.
        """
        try:
            return f"moved to {ckpt_dirs.set_aside(self.root, step)} for inspection"
        except OSError as exc:
            return f"it could not be moved aside ({exc.strerror or exc})"

    def key(self) -> bytes | None:
        """The run's checkpoint key, or None before the first save made it.

        Raises:
            CheckpointError: the key file exists but is unusable (a symlink, not 32 bytes,
                readable by others).
        """
        try:
            return checksum.read_key_file(self.key_file)
        except OSError as exc:
            raise CheckpointError(f"the checkpoint key {self.key_file} cannot be used: "
                                  f"{exc.strerror or exc}") from exc

    def clean_partial(self) -> list[Path]:
        """Wait for a save in flight, then rank 0 removes partial directories (``step_<N>.tmp/``,
        ``step_<N>/`` without a record). Call at start, before anything is loaded or saved:
        leftovers can hang the next save (docs/architecture.md, "Checkpoints").

        Returns:
            The directories removed (empty on ranks other than 0).

        Raises:
            CheckpointError: rank 0 could not remove one (raised on every rank).
        """
        self._wait_quietly()
        if self.host is not None:
            from hpcflow.runtime.host_local import clean_host

            return clean_host(self.root, local_rank=self.host[1], group=self._coord_group())
        return self._on_rank0("clean partial checkpoints", self._remove_partial) or []

    def save(self, step: int, state: dict[str, Any], *, blocking: bool = True,
             overlap: bool = False) -> Path:
        """Write the checkpoint of ``step`` and commit it, now or in the background.

        A save still in flight is waited for first (and its failure raised). Saving the step
        that is in flight again does not write it twice: ``blocking=True`` waits for it.

        Cost, blocking: a sharded write of the state by every rank (fsync of each file), each
        file's CRC32C and keyed BLAKE3 computed as its bytes are written (no file is read back),
        DCP's collectives and four small ones, the record and one rename on rank 0. Non-blocking: the
        caller pays one copy of the state into CPU staging buffers (as large as this rank's
        state, kept for the next save) and two small collectives; a background thread does the
        rest.

        Args:
            step: the number of completed training steps the state holds.
            state: the DCP state dict to write.
            blocking: False = return once the state is staged; the commit follows when every
                rank's files are written (see :meth:`poll`, :meth:`wait`).
            overlap: with ``blocking=False``, return before the large CPU tensors are copied:
                the writer thread copies them while training goes on, and every torch
                optimizer's ``step`` (or :meth:`wait_staged`) waits for that copy first
                (:mod:`hpcflow.runtime.overlap`). A tensor changed in place before then fails
                the save on every rank.

        Returns:
            The directory ``<root>/step_<step>`` (committed already when ``blocking``).

        Raises:
            CheckpointError: ``step_<step>/`` exists already, or staging, a write, the commit or
                the pruning failed, this save's or the one in flight before it (raised on every
                rank; no committed directory is left for a failed write).
        """
        started = time.monotonic()
        final = ckpt_dirs.step_dir(self.root, step)
        if self._in_flight is not None and self._in_flight.step == step:
            if blocking:
                self._wait_quietly()
            return final
        self._wait_quietly()
        self._emit("save_start", step)
        self._on_rank0(f"prepare checkpoint of step {step}", lambda: self._prepare(step))
        self._emit("prepared", step)
        key, error = self._shared_key()
        flat = deferred = None
        watched: list[tuple[str, Any, int]] = []
        try:  # a local failure here must not leave the other ranks waiting inside DCP
            if key is None:
                raise FileNotFoundError(error or f"the checkpoint key {self.key_file} is missing")
            flat = self._flatten(state)
            if not blocking:
                live = flat
                flat, deferred = self._stage(flat, overlap=overlap)
                if deferred.pairs:  # versions read before the writer thread starts copying
                    from hpcflow.runtime.overlap import watch_versions

                    watched = watch_versions(live, deferred.storages)
        except Exception as exc:  # agreed on below, so every rank raises it
            error = f"capturing the state of step {step} failed: {type(exc).__name__}: {exc}"
        error = self._first_error(error)
        if error is not None:
            self._emit("failed", step)
            raise CheckpointError(error)
        write = functools.partial(self._write_and_commit, key=key)
        if blocking:
            write(flat, step)
            return final
        self._emit("staged", step)
        staged = None
        if deferred is not None and deferred.pairs:
            staged = threading.Event()
            write = functools.partial(self._copy_then_write, write, deferred, watched, staged)
        self._submit(write, flat, step, started, time.monotonic() - started, staged)
        return final

    def close(self) -> None:
        """Wait for a save in flight, then free the writer thread and the staging buffers.

        Raises:
            CheckpointError: the save in flight failed (the resources are freed anyway).
        """
        try:
            self.wait()
        finally:
            self._close_async()

    def load(self, step: int, state: dict[str, Any]) -> None:
        """Read committed checkpoint ``step`` into ``state`` in place (collective), checking
        every file's digests as it is read (:func:`hpcflow.runtime.dcp_read.verifying_reader`).

        Stateful entries get ``load_state_dict`` called with what was read. A save in flight is
        waited for first.

        Raises:
            ChecksumMismatch: the record's MAC or a file's bytes differ from the record (on
                every rank); tensors read before the mismatch was known are in ``state``
                already: load an older checkpoint over it.
            CheckpointError: ``step_<step>/`` is not committed, or DCP could not read it (e.g. a
                key of ``state`` is missing from the checkpoint).
        """
        self._wait_quietly()
        directory = ckpt_dirs.step_dir(self.root, step)
        record = ckpt_dirs.read_commit_record(directory)
        if record is None:
            raise CheckpointError(f"{directory} is not a committed checkpoint; it is never loaded")
        key, error = self._shared_key()
        if error is not None:
            raise CheckpointError(error)
        problem = ckpt_dirs.record_problem(record, key)
        if problem is not None:
            raise ChecksumMismatch(f"{directory} {MISMATCH_WORDS}: {problem}")
        import torch.distributed.checkpoint as dcp

        reader = verifying_reader(directory, record["files"], key)
        try:
            dcp.load(state, storage_reader=reader, no_dist=not hdist.is_distributed())
        except dcp_errors() as exc:
            if (why := mismatch_message(exc)) is not None:
                raise ChecksumMismatch(why) from exc
            raise CheckpointError(f"loading the checkpoint {directory} failed: {exc}") from exc

    # ---- internals

    def _remove_partial(self) -> list[Path]:
        return ckpt_dirs.remove_partial(self.root)

    def _shared_key(self) -> tuple[bytes | None, str | None]:
        """``(key, None)`` as rank 0 reads it (None before the first save), or ``(None, why)``
        when it cannot be used; the same on every rank (collective: one small broadcast on the
        checkpoint group). Only rank 0 reads the file: a file another node created a moment
        ago may not be visible yet through a network file system's attribute cache."""
        outcome: tuple[bytes | None, str | None] = (None, None)
        if hdist.get_rank() == 0:
            try:
                outcome = (self.key(), None)
            except CheckpointError as exc:
                outcome = (None, str(exc))
        group = self._coord_group()
        if group is None:
            return outcome
        import torch.distributed as dist

        shared: list[Any] = [outcome]
        dist.broadcast_object_list(shared, src=0, group=group)
        return shared[0]

    def _prepare(self, step: int) -> Path:
        """Rank 0, before a save: the run's key (made at the first save), a fresh ``.tmp``."""
        checksum.new_key_file(self.key_file)
        return ckpt_dirs.fresh_tmp_dir(self.root, step)

    def _emit(self, event: str, step: int) -> None:
        if self.on_event is not None:
            self.on_event(event, step)

    @staticmethod
    def _flatten(state: dict[str, Any]) -> dict[str, Any]:
        """``state`` with each Stateful entry replaced by its ``state_dict()``, as DCP's own
        ``save`` does first, so the checkpoint's keys are the same either way."""
        from torch.distributed.checkpoint.stateful import Stateful

        return {k: v.state_dict() if isinstance(v, Stateful) else v for k, v in state.items()}

    def _write_and_commit(self, state: Any, step: int, key: bytes) -> float:
        """Write with DCP, computing each file's digests as it goes, then gather them and commit
        on rank 0; every rank returns or raises the same outcome.

        Runs on the writer thread for an async save. Uses only the checkpoint group.

        Returns:
            The monotonic time at which this rank knew the commit.
        """
        import torch.distributed.checkpoint as dcp

        tmp = ckpt_dirs.tmp_dir(self.root, step)
        try:
            self._emit("write_start", step)
            writer = checksum_writer(tmp, key, lambda: self._emit("write_data", step),
                                     lambda: self._emit("finish", step))
            try:
                dcp.save(state, storage_writer=writer, process_group=self._coord_group(),
                         no_dist=not hdist.is_distributed())
            except dcp_errors() as exc:  # DCP gathers every rank's failure, raises on all
                raise CheckpointError(
                    f"writing the checkpoint of step {step} to {tmp} failed: {exc}"
                ) from exc
            # DCP's last step gathers every rank's write result on rank 0 (each file fsynced
            # with sync_files=True) before rank 0 writes .metadata: every rank has written.
            self._emit("written", step)
            streamed = self._gather_digests(writer.digests)
            if self.host is None:
                self._on_rank0(f"commit checkpoint of step {step}",
                               lambda: self._commit(step, streamed, key))
            else:
                from hpcflow.runtime.host_local import commit_across_hosts

                commit_across_hosts(self.root, step, self.keep, self.extra_record,
                                    local_rank=self.host[1], group=self._coord_group(),
                                    streamed=streamed, key=key)
            self._emit("committed", step)
        except BaseException:
            self._emit("failed", step)
            raise
        return time.monotonic()

    def _gather_digests(self, local: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """Every rank's ``{file: digests}`` merged (one small ``all_gather_object``)."""
        group = self._coord_group()
        if group is None:
            return dict(local)
        import torch.distributed as dist

        tables: list[Any] = [None] * dist.get_world_size(group)
        dist.all_gather_object(tables, local, group=group)
        return {name: entry for table in tables for name, entry in (table or {}).items()}

    def _commit(self, step: int, streamed: dict[str, dict[str, Any]], key: bytes) -> None:
        ckpt_dirs.check_committable(self.root, step)
        world_size = hdist.get_world_size()
        ckpt_dirs.write_commit_record(ckpt_dirs.tmp_dir(self.root, step), step, world_size,
                                      self.extra_record, streamed=streamed, key=key)
        self._emit("record_written", step)
        ckpt_dirs.publish(self.root, step)
        self._emit("renamed", step)
        ckpt_dirs.prune(self.root, self.keep)

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
