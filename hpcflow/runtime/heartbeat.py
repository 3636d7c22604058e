"""Each rank's heartbeat for the hang watchdog, and its exception record (docs/protocol.md,
"Hangs and in-job restarts").

A heartbeat is a small JSON file, ``<HPCFLOW_HEARTBEAT_DIR>/<rank>.json``, rewritten through a
temp file and a rename (readers see a whole file) when the rank enters a section (start-up and
restore, a training step, a checkpoint save) and, inside the step section, at most every
``HPCFLOW_HEARTBEAT_INTERVAL_S`` seconds. It carries the section, the step, the host, the pid, the
Slurm step id and the rank's own step-time statistics, from which the watchdog
(:mod:`hpcflow.watchdog`) derives its timeouts. Cost at a step boundary: one ``time.time()``;
one small write and rename when the interval has passed.

The rank also registers :mod:`faulthandler` on :data:`hpcflow.protocol.STACKS_SIGNAL`: on that
signal the interpreter writes every thread's Python stack to ``<rank>.stacks`` beside the
heartbeat (Python ``faulthandler`` docs: ``register``), the watchdog's fallback without py-spy.

Nothing here runs without ``HPCFLOW_HEARTBEAT_DIR`` (the job spec says ``resilience: false``,
or the program runs outside an hpcflow job). Pure standard library: no torch.
"""

from __future__ import annotations

import faulthandler
import os
import re
import signal
import socket
import sys
import time
import traceback
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import hpcflow.protocol as P
from hpcflow.fsutil import write_json_atomic as _write_json

#: Step times each rank keeps for its p99 (the most recent ones).
WINDOW_STEPS = 200


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def write_json_atomic(path: Path, obj: Mapping[str, Any]) -> None:
    """Replace ``path`` with ``obj`` as JSON (:func:`hpcflow.fsutil.write_json_atomic`, without
    fsync: a heartbeat lost in a crash does not matter, a torn one would)."""
    _write_json(path, obj, indent=None, sort_keys=True, durable=False)


class Heartbeat:
    """One rank's heartbeat file and stacks file.

    Args:
        directory: ``HPCFLOW_HEARTBEAT_DIR`` (created if missing).
        rank: this process's global rank.
        interval_s: least seconds between two writes inside one section.
        clock: Unix time in seconds (a seam for tests).

    Raises:
        OSError: the directory or the stacks file cannot be created.
    """

    def __init__(self, directory: Path, rank: int, *, interval_s: float,
                 clock: Any = time.time) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / f"{rank}.json"
        self.rank = rank
        self.interval_s = interval_s
        self._clock = clock
        self._section = ""
        self._written_at = 0.0
        self._step_times: deque[float] = deque(maxlen=WINDOW_STEPS)
        self._steps_timed = 0
        self._save_max_s = 0.0
        self._host = socket.gethostname()
        self._step_id = os.environ.get("SLURM_STEP_ID", "")
        self._stacks: IO[str] | None = None
        self._signum = int(getattr(signal, "SIG" + P.STACKS_SIGNAL))
        try:
            self._stacks = (self.directory / f"{rank}.stacks").open("w", encoding="utf-8")
            faulthandler.register(self._signum, file=self._stacks, all_threads=True)
        except (OSError, ValueError, RuntimeError):  # not the main thread, or no such signal
            if self._stacks is not None:
                self._stacks.close()
            self._stacks = None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], rank: int) -> Heartbeat | None:
        """The heartbeat of ``rank`` when the batch script asked for one, else ``None``.

        The interval has no default here: the batch script exports it with the folder, from
        ``resilience.heartbeat_interval_s`` of the job spec (the one place it lives).

        Raises:
            ValueError: ``HPCFLOW_HEARTBEAT_INTERVAL_S`` is unset or not a positive number.
        """
        directory = environ.get(P.ENV_HEARTBEAT_DIR, "").strip()
        if not directory:
            return None
        text = environ.get(P.ENV_HEARTBEAT_INTERVAL_S, "").strip()
        if not text:
            raise ValueError(f"{P.ENV_HEARTBEAT_DIR} is set but {P.ENV_HEARTBEAT_INTERVAL_S} is "
                             "not; the batch script sets both (resilience.heartbeat_interval_s)")
        try:
            interval_s = float(text)
        except ValueError:
            interval_s = -1.0
        if not interval_s > 0:
            raise ValueError(f"{P.ENV_HEARTBEAT_INTERVAL_S}={text!r} must be a positive number")
        return cls(Path(directory), rank, interval_s=interval_s)

    def step_time(self, seconds: float) -> None:
        """Count one step's duration (seconds) into this rank's p99."""
        self._step_times.append(seconds)
        self._steps_timed += 1

    def save_time(self, seconds: float) -> None:
        """Count one blocking checkpoint save (seconds)."""
        self._save_max_s = max(self._save_max_s, seconds)

    def beat(self, section: str, step: int) -> None:
        """Report ``section`` at ``step``: written at once on a new section, else at most every
        ``interval_s``. An unwritable file is ignored (the watchdog then sees a stale rank)."""
        now = self._clock()
        if section == self._section and now - self._written_at < self.interval_s:
            return
        record = {
            "rank": self.rank, "host": self._host, "pid": os.getpid(),
            "slurm_step_id": self._step_id, "section": section, "step": step, "time": now,
            "steps_timed": self._steps_timed, "save_max_s": self._save_max_s,
            "step_p99_s": _p99(list(self._step_times)) if self._step_times else None,
        }
        try:
            write_json_atomic(self.path, record)
        except OSError:
            return
        self._section, self._written_at = section, now

    def close(self) -> None:
        """Unregister the stacks signal and close the stacks file (idempotent)."""
        if self._stacks is not None:
            try:
                faulthandler.unregister(self._signum)
            except (ValueError, RuntimeError):
                pass
            self._stacks.close()
            self._stacks = None


#: Messages of a collective that failed because another rank went away (gloo's TCP transport,
#: NCCL, the c10d store), seen here with torch 2.13 and gloo: "Connection closed by peer".
_PEER_FAILURE_RE = re.compile(
    r"Connection (closed|reset) by peer|gloo/transport|NCCL (error|communicator)|"
    r"Broken pipe|Socket Timeout|ProcessGroup\w* .*(abort|timed? ?out)", re.I)


def is_peer_failure(exc: BaseException) -> bool:
    """Whether ``exc`` says that another rank failed rather than this rank's program: a
    ``torch.distributed`` error type (``DistError`` and its subclasses; looked up only when torch
    is already imported) or a collective's transport message (:data:`_PEER_FAILURE_RE`)."""
    dist = sys.modules.get("torch.distributed")
    dist_error = getattr(dist, "DistError", None) if dist is not None else None
    if isinstance(dist_error, type) and isinstance(exc, dist_error):
        return True
    return bool(_PEER_FAILURE_RE.search(str(exc)))


def error_signature(exc: BaseException, step: int) -> str:
    """``<type>@<step>``: what makes two failures "the same exception at the same step"."""
    return f"{type(exc).__qualname__}@{step}"


def record_error(environ: Mapping[str, str], rank: int, step: int, exc: BaseException) -> None:
    """Leave this rank's exception in ``HPCFLOW_ERROR_DIR`` (nothing when unset): ``<rank>.json``
    with ``type``, ``message``, ``step`` (the last completed step), ``traceback`` and
    ``peer_failure``, then, unless it is a peer failure (:func:`is_peer_failure`: the rank only
    saw another one die), ``<rank>.sig`` with :func:`error_signature`, which the batch script
    reads. Never raises: the process is already failing."""
    directory = environ.get(P.ENV_ERROR_DIR, "").strip()
    if not directory:
        return
    peer = is_peer_failure(exc)
    try:
        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        write_json_atomic(folder / f"{rank}.json", {
            "rank": rank, "step": step, "type": type(exc).__qualname__, "message": str(exc),
            "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
            "peer_failure": peer,
        })
        if not peer:
            (folder / f"{rank}.sig").write_text(error_signature(exc, step) + "\n", encoding="utf-8")
    except OSError:
        pass
