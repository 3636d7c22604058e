"""Atomic file writes: a reader sees the old file or the new one, never a half-written one.

The one routine every hpcflow module uses to replace a file: write a temp file in the same
directory, fsync it, ``os.replace`` it over the target (``rename(2)`` is atomic within one file
system, POSIX), then fsync the directory so the rename itself survives a crash (Linux
``fsync(2)``: "calling fsync() on the file does not necessarily ensure that the entry in the
directory containing the file has also reached disk").

Standard library only: the in-job runtime imports it.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any

__all__ = ["append_jsonl", "fsync_dir", "write_atomic", "write_json_atomic"]


def fsync_dir(directory: Path) -> None:
    """fsync a directory so a rename or create inside it survives a crash (Linux semantics).

    Raises:
        OSError: the directory cannot be opened or synced.
    """
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: str | bytes) -> None:
    """Replace ``path`` with ``data`` (text is written as UTF-8) through a temp file, fsync,
    ``os.replace`` and an fsync of the parent directory.

    The parent must exist. The new file gets the permissions a plain ``open(path, "w")`` gives
    (``0o666`` less the umask). On failure the temp file is removed and the old file is untouched.

    Raises:
        OSError: the directory is missing or the file system refused a write, fsync or rename.
    """
    path = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent if str(path.parent) else Path("."))


def write_json_atomic(path: Path, payload: Any, *, indent: int | None = 1,
                      sort_keys: bool = False) -> None:
    """:func:`write_atomic` of ``json.dumps(payload)`` plus a final newline.

    Raises:
        TypeError: ``payload`` is not JSON-serializable (nothing is written).
        OSError: as :func:`write_atomic`.
    """
    write_atomic(path, json.dumps(payload, indent=indent, sort_keys=sort_keys) + "\n")


def append_jsonl(path: Path, obj: dict[str, Any]) -> None:
    """Append one JSON line to ``path`` (a ledger), creating it and its parent as needed.

    One ``write(2)`` on an ``O_APPEND`` descriptor, so lines of concurrent appenders (the batch
    shell, the ranks, the watchers) do not interleave on a local file system (POSIX ``write``:
    with ``O_APPEND`` the offset is set to the end and the write made in one step).

    Raises:
        TypeError: ``obj`` is not JSON-serializable (nothing is written).
        OSError: the directory cannot be created or the file written.
    """
    line = (json.dumps(obj, sort_keys=True) + "\n").encode("utf-8")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
