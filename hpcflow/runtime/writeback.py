"""Start the write-out of a file's pages while the file is still being written.

A file written whole and then ``fsync``ed reaches the disk in two phases: every ``write(2)``
copies into the page cache, where the pages wait (Linux starts writing dirty pages back only past
``vm.dirty_background_ratio`` of memory, or after ``vm.dirty_expire_centisecs``), then ``fsync``
writes them all. ``sync_file_range(fd, offset, nbytes, SYNC_FILE_RANGE_WRITE)`` hands the pages
written so far to the disk at once, without waiting for them (Linux ``sync_file_range(2)``,
https://man7.org/linux/man-pages/man2/sync_file_range.2.html), so the disk writes while the
program copies the next bytes, and the final ``fsync`` has only the tail left. It makes nothing
durable by itself: the ``fsync`` after it is still what a commit relies on.

Standard library only (``ctypes``); elsewhere than Linux, or where the C library lacks the call,
nothing is started and the ``fsync`` does all the work, as before.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from typing import Any

#: ``SYNC_FILE_RANGE_WRITE`` (linux/fs.h): start write-out of the range's dirty pages that are
#: not under write-out already; do not wait for them.
SYNC_FILE_RANGE_WRITE = 2
#: Pages are handed over in whole pages, so a page the writer is still filling is not written
#: out half-full and then again.
PAGE_BYTES = 4096


@functools.lru_cache(maxsize=1)
def _sync_file_range() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        call = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    call.restype = ctypes.c_int
    return call


def start_writeback(fd: int, offset: int, nbytes: int) -> bool:
    """Start writing bytes ``[offset, offset + nbytes)`` of the open file ``fd`` to its disk, and
    return at once (ctypes releases the GIL during the call; it may block briefly when the
    disk's queue is full). False where it could not be started (not Linux, a file system that
    refuses it): the later ``fsync`` writes those pages instead. Never raises.
    """
    call = _sync_file_range()
    if call is None or nbytes <= 0:
        return False
    return call(fd, offset, nbytes, SYNC_FILE_RANGE_WRITE) == 0


class WritebackTracker:
    """Hands a sequentially written file's pages to the disk every ``every_bytes``.

    Call :meth:`written` with the file's position after each write; the range since the last
    hand-over, cut at a page boundary, is started once it reaches ``every_bytes``.
    """

    def __init__(self, fd: int, every_bytes: int) -> None:
        self._fd = fd
        self._every = every_bytes
        self._started = 0
        self._working = True

    def written(self, position: int) -> None:
        """The file now holds ``position`` bytes (some may still sit in a user-space buffer:
        those are handed over next time, or written by the ``fsync``)."""
        end = position - position % PAGE_BYTES
        if not self._working or end - self._started < self._every:
            return
        self._working = start_writeback(self._fd, self._started, end - self._started)
        self._started = end
