"""The reading half of :mod:`hpcflow.runtime.dcp_read`: one checkpoint file read front to back
with every byte fed to its digests on a helper thread behind the reads, and the small readers
that parse a ``torch.save`` zip without reading its data.

:class:`HashedReads` reads large (:data:`CHUNK_BYTES`: large reads keep the disk's queue full)
and queues each chunk for the digest; the reader waits for the hash only at the end of the file
(:meth:`HashedReads.drain`) or before it overwrites a reused buffer still being hashed; small
reads are copied for the hash instead. :func:`ask_for_tails` asks the kernel ahead for the end
of every large tensor item (its zip directory, read before its data).
"""

from __future__ import annotations

import io
import os
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from hpcflow.runtime import checksum
from hpcflow.runtime.dcp_io import MISMATCH_WORDS, ChecksumMismatch

#: Bytes read at a time for the parts of a file this rank does not load.
SKIP_BYTES = 8 << 20
#: Chunks of a large read: each is hashed on a helper thread while the next ones are read.
#: Large reads keep the disk's queue full (measured on the machine in bench/README.md: 1 GiB
#: from a dropped page cache in 64 MiB reads 0.38 s, in 4 MiB reads 0.43 to 0.53 s).
CHUNK_BYTES = 32 << 20
#: Tensor items at least this large are read straight into their target.
DIRECT_BYTES = 1 << 20
#: ``tensor_record`` reads a zip's directory and pickle in blocks this large, and keeps at
#: most this many of them.
PREAD_BLOCK = 16 << 10
PREAD_BLOCKS_KEPT = 16
#: The end of a tensor item asked for ahead (its zip directory; a few hundred bytes for one
#: tensor).
TAIL_BYTES = 2 * PREAD_BLOCK
#: The record of a ``torch.save`` zip that changes at every save (torch/serialization.py).
SERIALIZATION_ID = ".data/serialization_id"
#: Meta tensors kept per load, by their zip's small records.
KNOWN_METAS = 4096
#: Reads at most this large are copied for the hash, so their buffer can be reused at once.
COPY_BYTES = 256 << 10


class SeekableRead(io.RawIOBase):
    """A readable, seekable raw file of ``length`` bytes whose position is kept here (the
    two readers below differ only in where the bytes come from)."""

    def __init__(self, length: int) -> None:
        super().__init__()
        self._length = length
        self._at = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._at

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._at, io.SEEK_END: self._length}[whence]
        self._at = max(0, base + offset)
        return self._at


class BufferFile(SeekableRead):
    """A read-only, seekable file over a memoryview, without copying it (``io.BytesIO`` of a
    memoryview copies it): ``torch.load`` reads a tensor's bytes from it straight into the
    tensor's storage."""

    def __init__(self, view: memoryview) -> None:
        super().__init__(len(view))
        self._view = view

    def readinto(self, buffer: Any) -> int:
        out = memoryview(buffer).cast("B")
        n = max(0, min(out.nbytes, len(self._view) - self._at))
        out[:n] = self._view[self._at:self._at + n]
        self._at += n
        return n


class HashedReads:
    """Sequential reads of one open file, every byte fed to ``digest`` in order on one helper
    thread. The reader never waits for the hash, except before it overwrites a buffer a queued
    hash still reads, and at the end of the file (:meth:`drain`): the hash of one tensor runs
    while the next is read. Small reads are copied for the hash, so their reused buffer is free
    at once; pages of the reused buffers are faulted in once per file."""

    def __init__(self, handle: Any, digest: checksum.StreamDigest, where: str) -> None:
        self._handle, self._digest, self._where = handle, digest, where
        self._at = 0
        self._buffer = bytearray(0)
        self._bounce: Any = None
        self._pool: ThreadPoolExecutor | None = None
        self._queued: deque[Future[None]] = deque()
        self._busy: set[str] = set()  # "buffer", "bounce": a queued hash still reads it

    def __enter__(self) -> HashedReads:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    def drain(self) -> None:
        """Wait until every byte read so far is in the digest (raises what a hash raised)."""
        while self._queued:
            self._queued.popleft().result()
        self._busy.clear()

    def _hash(self, view: memoryview, holds: str | None = None) -> None:
        """Queue ``view`` for the digest; ``holds`` names the reused buffer it lies in (None:
        it stays untouched until the load ends, or is a copy)."""
        if view.nbytes <= COPY_BYTES:
            view, holds = memoryview(bytes(view)), None  # cheaper than waiting to reuse it
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="hpcflow-ckpt-hash")
        while self._queued and self._queued[0].done():
            self._queued.popleft().result()
        self._queued.append(self._pool.submit(self._digest.update, view))
        if holds is not None:
            self._busy.add(holds)

    def _reuse(self, name: str) -> None:
        if name in self._busy:
            self.drain()

    def skip_to(self, offset: int | None) -> None:
        """Read and hash up to ``offset`` (None: the end of the file, then :meth:`drain`),
        keeping nothing."""
        if offset is not None and offset < self._at:  # overlapping items: never written by DCP
            raise ChecksumMismatch(f"{self._where} {MISMATCH_WORDS}: two items overlap at "
                                   f"byte {offset}")
        while offset is None or self._at < offset:
            want = SKIP_BYTES if offset is None else min(offset - self._at, SKIP_BYTES)
            self._reuse("buffer")
            if len(self._buffer) < want:
                self._buffer = bytearray(want)
            n = self._handle.readinto(memoryview(self._buffer)[:want])
            if not n:
                if offset is None:
                    break
                raise ChecksumMismatch(f"{self._where} {MISMATCH_WORDS}: it ends at byte "
                                       f"{self._at}, before byte {offset}")
            self._hash(memoryview(self._buffer)[:n], "buffer")
            self._at += n
        if offset is None:
            self.drain()

    def item(self, nbytes: int) -> memoryview:
        """The next ``nbytes``, hashed; valid until the next call."""
        self._reuse("buffer")
        if len(self._buffer) < nbytes:
            self._buffer = bytearray(nbytes)
        view = memoryview(self._buffer)[:nbytes]
        self.into(view, "buffer")
        return view

    def into(self, view: memoryview, holds: str | None = None) -> None:
        """Fill ``view`` with the next bytes, queued for the hash chunk by chunk; ``view`` must
        stay unchanged until :meth:`drain` unless ``holds`` names the reused buffer it is."""
        view = view.cast("B")
        for start in range(0, view.nbytes, CHUNK_BYTES):
            chunk = view[start:start + CHUNK_BYTES]
            read_into(self._handle, chunk, self._where, self._at)
            self._at += chunk.nbytes
            self._hash(chunk, holds)

    def tensor_record(self, offset: int, length: int, known: dict[Any, Any]
                      ) -> tuple[Any, int] | None:
        """``(meta tensor, file offset of its data)`` of the ``torch.save`` zip at ``offset``
        holding one tensor whose storage is exactly its data, read with small ``pread`` calls
        (the zip directory and small records; the data is not read); None for anything else.

        The meta tensor is a function of the zip's small records alone (the pickle, the byte
        order, the format versions: ``torch.load(map_location="meta")`` reads nothing else), so
        it is kept in ``known`` under them: tensors of one shape, dtype and layout, as a
        model's layers are, are unpickled once per load, not once each (about 0.5 ms).
        """
        import torch

        view = PreadFile(self._handle.fileno(), offset, length)
        try:
            archive = torch._C.PyTorchFileReader(view)
            names = archive.get_all_records()
            records = [r for r in names if r.startswith("data/")]
            if len(records) != 1:
                return None
            # serialization_id differs at every torch.save and is not read by the unpickling
            key = (records[0], *((n, archive.get_record(n)) for n in sorted(names)
                                 if n not in (records[0], SERIALIZATION_ID)))
            meta = known.get(key)
            if meta is None:
                view.seek(0)
                meta = torch.load(view, map_location="meta", weights_only=True)
                if len(known) < KNOWN_METAS:
                    known[key] = meta
            if not isinstance(meta, torch.Tensor) or not meta.is_contiguous() or \
                    meta.storage_offset() != 0 or \
                    meta.untyped_storage().nbytes() != meta.numel() * meta.element_size():
                return None
            return meta, offset + archive.get_record_offset(records[0])
        except Exception:  # noqa: BLE001 - not a plain tensor item: the general path reads it
            return None

    def bounce(self, nbytes: int, dtype: Any) -> Any:
        """A reused CPU buffer of ``nbytes`` (pinned when CUDA is there), as ``dtype``; fill it
        with :meth:`into` (``holds="bounce"``)."""
        import torch

        self._reuse("bounce")
        if self._bounce is None or self._bounce.numel() < nbytes:
            self._bounce = torch.empty(nbytes, dtype=torch.uint8,
                                       pin_memory=torch.cuda.is_available())
        return self._bounce[:nbytes].view(dtype)


class PreadFile(SeekableRead):
    """A read-only, seekable view of ``length`` bytes at ``offset`` of an open descriptor, read
    with ``os.pread`` in blocks of :data:`PREAD_BLOCK` kept for the next parse (the
    descriptor's own position is left alone): parsing a zip's directory and pickle three
    times costs a few ``pread`` calls, not dozens."""

    def __init__(self, fd: int, offset: int, length: int) -> None:
        super().__init__(length)
        self._fd, self._offset = fd, offset
        self._blocks: dict[int, bytes] = {}

    def _block(self, index: int) -> bytes:
        block = self._blocks.get(index)
        if block is None:
            start = index * PREAD_BLOCK
            block = os.pread(self._fd, min(PREAD_BLOCK, self._length - start),
                             self._offset + start)
            if len(self._blocks) < PREAD_BLOCKS_KEPT:
                self._blocks[index] = block
        return block

    def readinto(self, buffer: Any) -> int:
        out = memoryview(buffer).cast("B")
        want = max(0, min(out.nbytes, self._length - self._at))
        got = 0
        while got < want:
            index, within = divmod(self._at + got, PREAD_BLOCK)
            block = self._block(index)
            n = min(want - got, len(block) - within)
            if n <= 0:  # the file is shorter than its record says: the hash reports it
                break
            out[got:got + n] = block[within:within + n]
            got += n
        self._at += got
        return got


def ask_for_tails(fd: int, infos: list[Any]) -> None:
    """Ask the kernel to fetch, all at once and in the background, the last bytes of every item
    that may be read straight into its target: :meth:`HashedReads.tensor_record` reads each
    one's zip directory, at its end, before the sequential read gets there, and one request per
    item, each waited for, would cost a disk round trip per tensor
    (``posix_fadvise(POSIX_FADV_WILLNEED)``, which starts the reads and returns)."""
    if not hasattr(os, "posix_fadvise"):
        return
    for info in infos:
        if info.length >= DIRECT_BYTES and not info.transform_descriptors:
            start = info.offset + max(0, info.length - TAIL_BYTES)
            os.posix_fadvise(fd, start, info.offset + info.length - start,
                             os.POSIX_FADV_WILLNEED)


def read_into(handle: Any, view: memoryview, where: str, at: int) -> None:
    """Fill ``view`` from ``handle`` (at file offset ``at``, for the message).

    Raises:
        ChecksumMismatch: the file ends first (truncated after its record was written).
    """
    got = 0
    while got < view.nbytes:
        n = handle.readinto(view[got:])
        if not n:
            raise ChecksumMismatch(f"{where} {MISMATCH_WORDS}: it ends at byte {at + got}, "
                                   f"within an item")
        got += n
