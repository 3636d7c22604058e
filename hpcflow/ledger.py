"""The job's ledger, ``<run_dir>/.hpcflow/events.jsonl``: the one writer and the one reader.

One event is one JSON object on one line: ``{"event", "time", "job_id", "restart", ...}``
(docs/protocol.md, "The ledger"). Every process that records something (the supervisor, the hang
watchdog, the S3 mirror, the spot watcher) appends through :func:`append_event`: a single
``write(2)`` on a descriptor opened with ``O_APPEND``, so lines from several processes never
interleave on a local file system (POSIX ``write``: "the file offset shall be set to the end of
the file prior to each write"), and ``O_NOFOLLOW`` so a symlink planted in place of the ledger is
refused rather than followed. Reads are bounded (:data:`MAX_READ_BYTES`, the one cap of every
ledger read) and take regular files only, so a FIFO or ``/dev/zero`` in its place cannot hang
or bloat the reader; :func:`read_ledger` gives the readers of a run directory typed events
(:mod:`hpcflow.contract`) and the count of lines it skipped.

Standard library only: the in-job runtime and the supervisor import it.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpcflow import fsutil
from hpcflow.contract import Decoded, decode_events, loads_bounded

__all__ = ["MAX_READ_BYTES", "append_event", "event_line", "read_events", "read_ledger",
           "read_lines"]

#: The most bytes a ledger read takes (the last ones are kept): the one cap of every record
#: read, :data:`hpcflow.fsutil.RECORD_MAX_BYTES`.
MAX_READ_BYTES = fsutil.RECORD_MAX_BYTES


def event_line(name: str, *, job_id: str, restart: int, time_s: int | None = None,
               **fields: Any) -> str:
    """The ledger line of one event (with its newline): the one JSON form.

    Args:
        name: the event (a name in :mod:`hpcflow.protocol`).
        job_id: the job's id as users and scontrol spell it (``<arrayjob>_<task>`` for an array
            element).
        restart: ``SLURM_RESTART_COUNT`` of the attempt.
        time_s: Unix time in whole seconds; default now.
        fields: the event's own members (JSON-serializable).

    Raises:
        TypeError: a field is not JSON-serializable.
    """
    event = {"event": name, "time": int(time.time() if time_s is None else time_s),
             "job_id": str(job_id), "restart": int(restart), **fields}
    return json.dumps(event, separators=(",", ":")) + "\n"


def append_event(path: Path, name: str, *, job_id: str, restart: int,
                 time_s: int | None = None, **fields: Any) -> bool:
    """Append one event to the ledger at ``path`` (created 0600 if missing).

    A failed write is reported on stderr and returns False, never raises: a full disk must not
    turn a job's decision into a crash.

    Returns:
        True when the line was written.
    """
    line = event_line(name, job_id=job_id, restart=restart, time_s=time_s, **fields).encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(f"{path} is not a regular file")
            written = os.write(fd, line)
        finally:
            os.close(fd)
    except OSError as exc:
        print(f"hpcflow: could not append {name!r} to the ledger {path}: {exc}", file=sys.stderr,
              flush=True)
        return False
    return written == len(line)


def read_lines(path: Path, *, max_bytes: int = MAX_READ_BYTES) -> list[str]:
    """The lines of a JSON-lines record file (the ledger, a run directory's submissions), oldest
    first: the one bounded raw read of such a file (:func:`hpcflow.fsutil.read_tail`).

    A missing, unreadable or non-regular file (a FIFO, ``/dev/zero``, a symlink) gives ``[]``;
    past ``max_bytes`` only the last ``max_bytes`` are read (the first, partial line of that
    window is dropped).
    """
    try:
        raw, skipped = fsutil.read_tail(path, max_bytes)
    except OSError:
        return []
    lines = raw.decode("utf-8", errors="replace").splitlines()
    return lines[1:] if skipped and lines else lines


def read_ledger(path: Path, *, job_id: str | None = None,
                max_bytes: int = MAX_READ_BYTES) -> Decoded:
    """The ledger's events as :func:`hpcflow.contract.decode_events` types them (members of
    their kinds), oldest first, and the count of lines skipped; with ``job_id``, that job's
    only. Read as :func:`read_lines` reads."""
    return decode_events(read_lines(path, max_bytes=max_bytes), job_id=job_id)


def read_events(path: Path, *, job_id: str | None = None,
                max_bytes: int = MAX_READ_BYTES) -> list[dict[str, Any]]:
    """The ledger's events, oldest first; with ``job_id``, that job's only: the supervisor's
    and the in-job runtime's view, which keeps every JSON object (their rules read each member
    defensively and must count what they counted before).

    Lines that are not JSON objects (a torn last line after a crash), longer or deeper than
    :func:`hpcflow.contract.loads_bounded` takes, are skipped. Read as :func:`read_lines` reads.
    """
    out: list[dict[str, Any]] = []
    for line in read_lines(path, max_bytes=max_bytes):
        try:
            obj = loads_bounded(line)
        except ValueError:
            continue
        if isinstance(obj, Mapping) and (job_id is None or str(obj.get("job_id")) == job_id):
            out.append(dict(obj))
    return out
