"""Read a job's log (``<name>-<jobid>.out``, every attempt appended): what each attempt printed.

The batch script prints a timestamped banner at each attempt start (``hpcflow: <time> job <id>
attempt <n> on <nodes>: ...``) and timestamped lines of its own; rank 0 prints tagged JSON lines
(``hpcflow-step {...}``, docs/protocol.md); srun prints one ``srun: error: <node>: task <n>:
<what>`` line per task that failed or was killed (srun(1)). Pure apart from :func:`read_text`.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

from hpcflow import fsutil
from hpcflow.contract import decode_tagged, loads_bounded
from hpcflow.protocol import TAG_STEP

_BANNER = re.compile(r"^hpcflow: \S+ job (?P<job>\S+) attempt (?P<attempt>\d+) on ")
_STAMPED = re.compile(r"^hpcflow: (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4}) ")
_TAGGED = re.compile(r"^(hpcflow-[a-z]+) (\{.*\})\s*$")
_SRUN_TASK = re.compile(r"^srun: error: (?P<node>\S+): tasks? (?P<task>[0-9,-]+): (?P<what>.+)$")
#: Pseudo-tags :func:`split_log` gives to the batch script's timestamps and srun's task errors.
TIME = "hpcflow-time"
SRUN_TASK = "srun-task"


def split_log(log_text: str, job_id: str) -> dict[int, list[tuple[str, dict[str, Any]]]]:
    """:func:`split_log_counted` without the count of skipped lines."""
    return split_log_counted(log_text, job_id)[0]


def split_log_counted(log_text: str, job_id: str
                      ) -> tuple[dict[int, list[tuple[str, dict[str, Any]]]], int]:
    """The tagged lines of each attempt of ``job_id``, keyed by restart count, and how many
    tagged lines of it were skipped.

    Tagged lines up to the next banner belong to that attempt; lines of other jobs sharing the
    log are skipped, and so is a tagged line whose JSON is not an object with members of their
    kinds (:func:`hpcflow.contract.decode_tagged`: the program prints them). The batch
    script's timestamped lines come as ``(TIME, {"time": <unix s>})`` and srun's task errors as
    ``(SRUN_TASK, {"node", "task", "what"})``, in log order.
    """
    attempts: dict[int, list[tuple[str, dict[str, Any]]]] = {}
    current: int | None = None
    skipped = 0
    for line in log_text.splitlines():
        if m := _BANNER.match(line):
            current = int(m["attempt"]) if m["job"] == job_id else None
            if current is not None:
                attempts.setdefault(current, [])
        if current is None:
            continue
        if m := _STAMPED.match(line):
            try:
                stamp = datetime.strptime(m[1], "%Y-%m-%dT%H:%M:%S%z").timestamp()
            except (ValueError, OverflowError):
                continue
            attempts[current].append((TIME, {"time": stamp}))
        elif m := _SRUN_TASK.match(line):
            attempts[current].append((SRUN_TASK, m.groupdict()))
        elif m := _TAGGED.match(line):
            try:
                payload = decode_tagged(m[1], loads_bounded(m[2]))
            except ValueError:
                payload = None
            if payload is not None:
                attempts[current].append((m[1], payload))
            else:
                skipped += 1
    return attempts, skipped


def steps_in(log_text: str, job_id: str) -> set[int]:
    """Every step the log says ``job_id`` trained (any attempt)."""
    return {int(p["step"]) for lines in split_log(log_text, job_id).values()
            for tag, p in lines if tag == TAG_STEP and "step" in p}


#: The most of a job log a report reads: its last 64 MiB (a log can be any size, or not a
#: file at all when someone else chose its path).
LOG_MAX_BYTES = 64 * 1024 * 1024


def read_text(path: Path, max_bytes: int = LOG_MAX_BYTES) -> str:
    """The last ``max_bytes`` of the file's text, or ``""`` when it cannot be read (not written
    yet, removed) or is not a regular file (a FIFO, a device, a symlink:
    :func:`hpcflow.fsutil.read_tail`)."""
    try:
        raw, _ = fsutil.read_tail(path, max_bytes)
    except OSError:
        return ""
    return raw.decode("utf-8", errors="replace")
