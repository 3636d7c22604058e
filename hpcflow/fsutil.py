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

__all__ = ["fsync_dir", "write_atomic", "write_atomic_at", "write_json_atomic"]


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


def write_atomic_at(dir_fd: int, name: str, data: str | bytes, *, mode: int = 0o600) -> None:
    """Replace the entry ``name`` of the open directory ``dir_fd`` with a regular file holding
    ``data``, as :func:`write_atomic` does, without following any path: the temp file is created
    with ``O_CREAT | O_EXCL | O_NOFOLLOW`` inside that directory, and ``rename(2)`` replaces a
    symlink, FIFO or file of that name rather than writing through it (rename(2): "If newpath
    is an existing symbolic link, the link is overwritten"). For code that writes into a folder
    another user controls (hpcflow.spot.jobfiles).

    Args:
        dir_fd: a directory opened with ``os.open(..., O_DIRECTORY)``.
        name: a plain file name (no ``/``).
        data: the content; text is written as UTF-8.
        mode: the new file's permission bits (less the umask).

    Raises:
        ValueError: ``name`` is empty or holds a ``/``.
        OSError: the file system refused the create, write, fsync or rename (``name`` being a
            directory, say); the temp file is removed.
    """
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"write_atomic_at: {name!r} is not a plain file name")
    raw = data.encode("utf-8") if isinstance(data, str) else data
    tmp = f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise
    os.fsync(dir_fd)


def write_json_atomic(path: Path, payload: Any, *, indent: int | None = 1,
                      sort_keys: bool = False) -> None:
    """:func:`write_atomic` of ``json.dumps(payload)`` plus a final newline.

    Raises:
        TypeError: ``payload`` is not JSON-serializable (nothing is written).
        OSError: as :func:`write_atomic`.
    """
    write_atomic(path, json.dumps(payload, indent=indent, sort_keys=sort_keys) + "\n")
