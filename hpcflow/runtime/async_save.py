"""The background half of :class:`~hpcflow.runtime.checkpoint.CheckpointManager`: staging the
state into CPU buffers, the writer thread, and collecting a save in flight.

``save(..., blocking=False)`` copies the state into CPU staging buffers (DCP's ``DefaultStager``,
reused by later saves, the copy spread over a few threads: :mod:`hpcflow.runtime.staging`) and
returns; a background thread does the write and the commit, as
``dcp.async_save`` does with its thread executor (torch/distributed/checkpoint/state_dict_saver.py).
torch is imported only when a save runs.
"""

from __future__ import annotations

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


class AsyncSaves:
    """At most one save in flight on a writer thread, and the saves committed but not yet
    reported. :class:`~hpcflow.runtime.checkpoint.CheckpointManager` is one; it sets ``root``."""

    root: Path

    def _init_async(self) -> None:
        self._executor: ThreadPoolExecutor | None = None
        self._stager: Any = None
        self._in_flight: _InFlight | None = None
        self._unreported: list[SaveResult] = []  # collected by save/load/..., kept for poll

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
        return SaveResult(flight.step, ckpt_dirs.step_dir(self.root, flight.step), flight.blocked_s,
                          done - flight.started)

    def _stage(self, flat: dict[str, Any]) -> Any:
        """Copy ``flat`` into this manager's CPU buffers (allocated on the first save, reused
        after), on a few threads (:mod:`hpcflow.runtime.staging`)."""
        import torch

        from hpcflow.runtime.staging import ParallelStager

        if self._stager is None:
            # pinned host memory speeds device-to-host copies
            self._stager = ParallelStager(pin=torch.cuda.is_available())
        return self._stager.stage(flat)

    def _submit(self, work: Callable[[Any, int], float], flat: Any, step: int, started: float,
                blocked_s: float) -> None:
        """Run ``work(flat, step)`` on the writer thread (made on first use) as the save in
        flight."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hpcflow-ckpt")
        future = self._executor.submit(work, flat, step)
        self._in_flight = _InFlight(step, future, started, blocked_s)

    def _close_async(self) -> None:
        """Free the writer thread and the staging buffers."""
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
