"""Atomic file writes: a reader sees the old file or the new one, never a half-written one.

The one routine every hpcflow module uses to replace a file: write a temp file in the same
directory, fsync it, ``os.replace`` it over the target (``rename(2)`` is atomic within one file
system, POSIX), then fsync the directory so the rename itself survives a crash (Linux
``fsync(2)``: "calling fsync() on the file does not necessarily ensure that the entry in the
directory containing the file has also reached disk").

Standard library only: the in-job runtime imports it.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any

__all__ = ["NotRegularFile", "fsync_dir", "open_regular", "output_problem", "read_capped",
           "read_tail", "write_atomic_at", "write_atomic", "write_json_atomic"]

#: The most a record file (ledger, index, JSON record) is read of, the one cap of every such
#: read: far above any real one (a ledger line is ~200 bytes; 64 MiB is ~300,000 events), low
#: enough that ``/dev/zero`` or a planted giant file cannot fill memory.
RECORD_MAX_BYTES = 64 * 1024 * 1024
_CHUNK_BYTES = 1024 * 1024


class NotRegularFile(OSError):
    """The path is a FIFO, device, socket or folder: hpcflow reads records and logs from regular
    files only (a FIFO would block the reader, ``/dev/zero`` never ends)."""


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


def write_atomic(path: Path, data: str | bytes, *, mode: int | None = None,
                 durable: bool = True) -> None:
    """Replace ``path`` with ``data`` (text is written as UTF-8) through a temp file, fsync,
    ``os.replace`` and an fsync of the parent directory.

    The parent must exist. The new file gets the permissions a plain ``open(path, "w")`` gives
    (``0o666`` less the umask), or exactly ``mode`` whatever the umask; the temp file is created
    with ``mode`` already, so the data is never readable more widely, even for a moment. On
    failure the temp file is removed and the old file is untouched. With ``durable=False`` both
    fsyncs are left out: a reader still sees the old file or the new one whole, but a crash of
    the machine may lose the write (for a rank's heartbeat, rewritten every few seconds).

    Raises:
        OSError: the directory is missing or the file system refused a write, fsync or rename.
    """
    path = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if mode is None else mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            if mode is not None:
                os.fchmod(fh.fileno(), mode)
            fh.write(raw)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent if str(path.parent) else Path("."))


def commit_file(tmp: Path, final: Path) -> None:
    """Make the finished file ``tmp`` appear as ``final`` durably: fsync ``tmp``,
    ``os.replace`` it onto ``final``, fsync the folder. For a file another library wrote (a
    framework's checkpoint): a reader sees ``final`` whole or not at all.

    Raises:
        OSError: ``tmp`` is missing or the file system refused the fsync or rename.
    """
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, final)
    fsync_dir(Path(final).parent)


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
                      sort_keys: bool = False, durable: bool = True) -> None:
    """:func:`write_atomic` of ``json.dumps(payload)`` plus a final newline.

    Raises:
        TypeError: ``payload`` is not JSON-serializable (nothing is written).
        OSError: as :func:`write_atomic`.
    """
    write_atomic(path, json.dumps(payload, indent=indent, sort_keys=sort_keys) + "\n",
                 durable=durable)


def open_regular(path: Path) -> int:
    """Open ``path`` read-only as a regular file and return the descriptor.

    ``O_NOFOLLOW`` refuses a symlink as the last component and ``O_NONBLOCK`` keeps ``open`` of a
    FIFO from waiting for a writer (open(2)); ``fstat`` then refuses anything but a regular file,
    on the descriptor itself, so nothing can be swapped in between.

    Raises:
        NotRegularFile: the path is a FIFO, device, socket or folder.
        OSError: missing (``FileNotFoundError``), a symlink (``errno.ELOOP``), or unreadable.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
    except BaseException:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise NotRegularFile(errno.EINVAL, "not a regular file", str(path))
    return fd


def read_capped(path: Path, max_bytes: int = RECORD_MAX_BYTES) -> bytes:
    """The first ``max_bytes`` of the regular file ``path`` (the rest is not read).

    Raises:
        NotRegularFile, OSError: as :func:`open_regular`.
    """
    fd = open_regular(path)
    with os.fdopen(fd, "rb") as fh:
        return fh.read(max_bytes)


def read_tail(path: Path, max_bytes: int = RECORD_MAX_BYTES) -> tuple[bytes, int]:
    """The last ``max_bytes`` of the regular file ``path``, and how many bytes before them were
    left out (0 when the whole file was read). Memory is bounded by ``max_bytes`` whatever the
    file's size; a file that grows while it is read is read up to its size at the ``fstat``.

    Raises:
        NotRegularFile, OSError: as :func:`open_regular`.
    """
    fd = open_regular(path)
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fd).st_size
        start = max(0, size - max_bytes)
        fh.seek(start)
        parts, left = [], size - start
        while left > 0 and (chunk := fh.read(min(_CHUNK_BYTES, left))):
            parts.append(chunk)
            left -= len(chunk)
        return b"".join(parts), start


def output_problem(path: Path) -> str | None:
    """Why ``path`` may not be an output file that :func:`write_atomic` replaces, or None.

    An existing path that is not a regular file (a device such as ``/dev/full``, a FIFO, a
    folder, a socket; a symlink is judged by what it points to) is refused: the rename would
    replace the node itself, and run as root that clobbers a device. A missing path is fine.
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{path} cannot be looked at ({exc.strerror or exc})"
    if stat.S_ISREG(mode):
        return None
    kind = ("a folder" if stat.S_ISDIR(mode) else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
    return (f"{path} exists and is {kind}; an output path must be a regular file or a new one "
            "(it is replaced whole)")
