"""The background half of :class:`~hpcflow.runtime.checkpoint.CheckpointManager`: staging the
state into CPU buffers, the writer thread, and collecting a save in flight.

``save(..., blocking=False)`` copies the state into CPU staging buffers (DCP's ``DefaultStager``,
reused by later saves, the copy spread over a few threads: :mod:`hpcflow.runtime.staging`) and
returns; a background thread does the write and the commit, as
``dcp.async_save`` does with its thread executor (torch/distributed/checkpoint/state_dict_saver.py).
With ``overlap``, the large CPU storages are copied by the writer thread instead, while
training goes on, and the training thread waits for that copy only before it changes the state
(:mod:`hpcflow.runtime.overlap`). torch is imported only when a save runs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcflow.errors import CheckpointError
from hpcflow.runtime import commit as ckpt_dirs


@dataclass(frozen=True)
class SaveResult:
    """A committed asynchronous save as this rank saw it.

    Attributes:
        step: the step the checkpoint holds.
        path: the committed directory ``<root>/step_<step>``.
        blocked_s: seconds the training thread was held by this save: inside
            :meth:`CheckpointManager.save`, plus (``overlap``) waiting for its staging copy.
        total_s: seconds from the ``save`` call until this rank knew the commit.
        staging_wait_s: of ``blocked_s``, the seconds spent waiting for the staging copy
            (``overlap``; 0 otherwise).
    """

    step: int
    path: Path
    blocked_s: float
    total_s: float
    staging_wait_s: float = 0.0


@dataclass
class _InFlight:
    step: int
    future: Future[float]  # monotonic time at which this rank learned the commit
    started: float
    blocked_s: float
    staged: threading.Event | None = None  # set once the late staging copy is made (overlap)
    staging_wait_s: float = 0.0


class AsyncSaves:
    """At most one save in flight on a writer thread, and the saves committed but not yet
    reported. :class:`~hpcflow.runtime.checkpoint.CheckpointManager` is one; it sets ``root``."""

    root: Path
    # the manager's: every rank's error agreed on (a collective), and a ledger event
    _first_error: Callable[[str | None], str | None]
    _emit: Callable[[str, int], None]

    def _init_async(self) -> None:
        self._executor: ThreadPoolExecutor | None = None
        self._stager: Any = None
        self._in_flight: _InFlight | None = None
        self._unreported: list[SaveResult] = []  # collected by save/load/..., kept for poll
        self._gate: Any = None  # the optimizer hook of overlapped saves, made on first use

    def wait_staged(self) -> float:
        """Block until the state of the save in flight is wholly in its staging buffers: call it
        before changing the state in place other than in a torch optimizer's ``step`` (which
        calls it) after ``save(..., blocking=False, overlap=True)``. Local, never raises.

        Returns:
            Seconds waited (0 when nothing was being copied).
        """
        flight = self._in_flight
        if flight is None or flight.staged is None or flight.staged.is_set():
            return 0.0
        began = time.monotonic()
        flight.staged.wait()
        waited = time.monotonic() - began
        flight.staging_wait_s += waited
        return waited

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
        except dcp_errors() as exc:  # an error outside the write itself; still every rank's
            what = f"{type(exc).__name__}: {exc}"
            raise CheckpointError(f"the checkpoint of step {flight.step} failed: {what}") from exc
        return SaveResult(flight.step, ckpt_dirs.step_dir(self.root, flight.step),
                          flight.blocked_s + flight.staging_wait_s, done - flight.started,
                          flight.staging_wait_s)

    def _stage(self, flat: dict[str, Any], *, overlap: bool = False) -> tuple[Any, Any]:
        """Copy ``flat`` into this manager's CPU buffers (allocated on the first save, reused
        after), on a few threads (:mod:`hpcflow.runtime.staging`); with ``overlap``, the large
        CPU storages are left to the returned :class:`~hpcflow.runtime.staging.DeferredCopy`."""
        import torch

        from hpcflow.runtime.staging import ParallelStager

        if self._stager is None:
            # pinned host memory speeds device-to-host copies
            self._stager = ParallelStager(pin=torch.cuda.is_available())
        return self._stager.stage(flat, defer=overlap)

    def _late_copy(self, deferred: Any, watched: list[tuple[str, Any, int]], step: int,
                   done: threading.Event) -> str | None:
        """On the writer thread: make the deferred staging copy, then check that no watched
        tensor changed meanwhile; ``done`` is set either way. Returns the error, or None."""
        from hpcflow.runtime.overlap import changed_error, changed_names

        try:
            deferred.run()
            names = changed_names(watched)
        except Exception as exc:  # agreed on by the caller, so every rank fails alike
            return f"staging the state of step {step} failed: {type(exc).__name__}: {exc}"
        finally:
            done.set()
        return changed_error(step, names) if names else None

    def _copy_then_write(self, write: Callable[[Any, int], float], deferred: Any,
                         watched: list[tuple[str, Any, int]], staged: Any, flat: Any,
                         step: int) -> float:
        """On the writer thread: the late staging copy of an overlapped save, agreed on by every
        rank (one small collective: the manager's ``_first_error``), then ``write``."""
        error = self._first_error(self._late_copy(deferred, watched, step, staged))
        if error is not None:
            self._emit("failed", step)
            raise CheckpointError(error)
        return write(flat, step)

    def _submit(self, work: Callable[[Any, int], float], flat: Any, step: int, started: float,
                blocked_s: float, staged: threading.Event | None = None) -> None:
        """Run ``work(flat, step)`` on the writer thread (made on first use) as the save in
        flight; ``staged``: the event its late staging copy sets (overlap)."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hpcflow-ckpt")
        if staged is not None:
            if self._gate is None:
                from hpcflow.runtime.overlap import OptimizerGate

                self._gate = OptimizerGate(self, type(self).wait_staged)
            self._gate.arm()
        future = self._executor.submit(work, flat, step)
        self._in_flight = _InFlight(step, future, started, blocked_s, staged)

    def _close_async(self) -> None:
        """Free the writer thread, the optimizer hook and the staging buffers."""
        if self._gate is not None:
            self._gate.close()
            self._gate = None
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        if self._stager is not None:
            self._stager.close()
            self._stager = None


def dcp_errors() -> tuple[type[BaseException], ...]:
    """What a DCP call raises: its ``CheckpointException`` (a ``BaseException``, so
    ``except Exception`` misses it; torch/distributed/checkpoint/api.py) or any ``Exception``."""
    from torch.distributed.checkpoint.api import CheckpointException

    return (Exception, CheckpointException)
