"""DCP's file-system writer and reader with the checksums of :mod:`hpcflow.runtime.checksum`
computed over the bytes as they pass: nothing is read back after a save, and nothing is read
twice for a restore.

- :func:`checksum_writer`: ``FileSystemWriter`` whose streams feed every byte written to the
  file's digests. A large write (a tensor's data) goes to ``write(2)`` in pieces, each hashed on
  a helper thread while it is written (both release the GIL, so the two overlap), and the pages
  written are handed to the disk as they fill (:mod:`hpcflow.runtime.writeback`), so the disk
  writes while the next piece is copied instead of all at the ``fsync``. ``fsync`` comes after a
  flush, so it covers the whole file. Each rank keeps the digests of the files it wrote
  (``digests``); rank 0 gathers them into the commit record.
- :func:`hpcflow.runtime.dcp_read.verifying_reader`: a ``FileSystemReader`` that reads each
  file it needs once, in order, feeding every byte to the digests the record lists, and fails the load with
  :class:`ChecksumMismatch` when a file differs. ``.metadata`` is checked before it is
  unpickled; a file's pickled (non-tensor) items are unpickled only once the whole file has
  passed; tensors (``torch.load(weights_only=True)``, which runs no code) are copied into the
  state as they arrive, so a failed load leaves the state partly overwritten.

Relies on DCP's file layout (torch/distributed/checkpoint/filesystem.py, torch 2.6 to 2.13):
one ``__<rank>_<n>.distcp`` file per rank and writer thread, items written back to back,
``.metadata`` pickled by the coordinator into ``.metadata.tmp`` and renamed.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hpcflow.errors import CheckpointError
from hpcflow.runtime import checksum
from hpcflow.runtime.writeback import WritebackTracker

#: Writes at least this large are hashed on the helper thread while they are written.
_PARALLEL_BYTES = 1 << 20
#: A large write goes to the file in pieces of at most this size: the hash of each is queued
#: as it is written, and a write of one huge tensor still lets the disk start early.
_PIECE_BYTES = 16 << 20
#: The pages written are handed to the disk each time this many have gathered.
_WRITEBACK_BYTES = 8 << 20
METADATA = ".metadata"
#: In every message of :class:`ChecksumMismatch`: how a failure gathered by DCP from another
#: rank (only its text survives) is still known as one.
MISMATCH_WORDS = "differs from its commit record"


class ChecksumMismatch(CheckpointError):
    """A checkpoint file's bytes differ from its commit record (damaged, truncated, replaced)."""


class _HashingStream:
    """A binary file opened for writing whose bytes also go to a :class:`StreamDigest`."""

    def __init__(self, raw: Any, digest: checksum.StreamDigest) -> None:
        self._raw = raw
        self.digest = digest
        self._pool: ThreadPoolExecutor | None = None
        self._writeback = WritebackTracker(raw.fileno(), _WRITEBACK_BYTES)

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        if view.nbytes < _PARALLEL_BYTES:
            self.digest.update(view)  # nothing is queued: a large write waits for its hashes
            return self._raw.write(view)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="hpcflow-ckpt-hash")
        queued = []  # one worker: the pieces are hashed in order
        try:
            for start in range(0, view.nbytes, _PIECE_BYTES):
                piece = view[start:start + _PIECE_BYTES]
                queued.append(self._pool.submit(self.digest.update, piece))
                self._raw.write(piece)
                self._writeback.written(self._raw.tell())
        finally:
            for hashed in queued:  # the caller may reuse the buffer once write returns
                hashed.result()
        return view.nbytes

    def tell(self) -> int:
        return self._raw.tell()

    def writable(self) -> bool:
        return True

    def flush(self) -> None:
        self._raw.flush()

    def fileno(self) -> int:
        self._raw.flush()  # DCP fsyncs the descriptor next: the buffered tail must be in it
        return self._raw.fileno()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self._raw.close()


def checksum_writer(path: Path, key: bytes, on_write_data: Any = None, on_finish: Any = None
                    ) -> Any:
    """DCP's ``FileSystemWriter`` into ``path`` (``sync_files=True``: every file fsynced;
    ``overwrite=False``) that computes each file's CRC32C and keyed BLAKE3 as it writes.

    After ``dcp.save``, its ``digests`` holds ``{relative path: StreamDigest.result()}`` for
    every file this process wrote (``.metadata`` on the coordinator). ``on_write_data()`` and
    ``on_finish()`` are called before DCP's own ``write_data`` and ``finish``.
    """
    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.filesystem import FileSystem

    root = Path(path)
    digests: dict[str, dict[str, Any]] = {}
    lock = threading.Lock()

    def relative(target: Any) -> str:
        return Path(os.path.relpath(target, root)).as_posix()

    class HashingFileSystem(FileSystem):
        @contextmanager
        def create_stream(self, target: Any, mode: str) -> Iterator[Any]:
            if "w" not in mode:
                with super().create_stream(target, mode) as stream:
                    yield stream
                return
            with Path(target).open(mode) as raw:
                stream = _HashingStream(raw, checksum.StreamDigest(key))
                try:
                    yield stream
                finally:
                    stream.close()
            with lock:
                digests[relative(target)] = stream.digest.result()

        def rename(self, source: Any, target: Any) -> None:
            super().rename(source, target)
            with lock:
                if relative(source) in digests:
                    digests[relative(target)] = digests.pop(relative(source))

    class ChecksumWriter(dcp.FileSystemWriter):
        def write_data(self, plan: Any, planner: Any) -> Any:
            if on_write_data is not None:
                on_write_data()
            # torch.save's zip writer computes a CRC-32 of every record (about 0.3 s per GiB
            # on one core); the CRC32C and BLAKE3 here cover the same bytes, and torch.load does
            # not check it, so it is off while this rank writes (a process-wide switch:
            # torch.serialization.set_crc32_options, torch >= 2.6), then put back.
            crc32_before = torch.serialization.get_crc32_options()
            torch.serialization.set_crc32_options(False)
            try:
                return super().write_data(plan, planner)
            finally:
                torch.serialization.set_crc32_options(crc32_before)

        def finish(self, metadata: Any, results: Any) -> None:
            if on_finish is not None:
                on_finish()
            super().finish(metadata, results)

    writer = ChecksumWriter(root, sync_files=True, overwrite=False)
    writer.fs = HashingFileSystem()
    writer.digests = digests
    return writer


def mismatch_message(exc: BaseException) -> str | None:
    """The first :class:`ChecksumMismatch` message inside ``exc`` (a DCP
    ``CheckpointException`` gathered from every rank, whose failures may be one wrapped in
    another error's text), or None when it holds none."""
    for line in str(exc).splitlines():
        if MISMATCH_WORDS in line:
            for lead in ("ChecksumMismatch: ", "metadata read failed: "):  # DCP's wrappings
                line = line.split(lead, 1)[-1]
            return line.split("; rank local metadata", 1)[0].strip()
    return str(exc) if isinstance(exc, ChecksumMismatch) else None
