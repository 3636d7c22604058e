"""The restore half of :mod:`hpcflow.runtime.dcp_io`: DCP's ``FileSystemReader`` that checks
every file's checksums while it reads it, once, front to back.

Per file: the bytes go through the record's digest as they are read (a large read in chunks,
each hashed on a helper thread while the next one is read); a tensor item of at least 1 MiB
whose target is a plain tensor of the same dtype and shape is read straight into the target (or
into one reused buffer, then copied, for a GPU target), with no ``torch.load`` allocation and
copy; other items go through ``torch.load(weights_only=True)`` from one reused buffer; pickled
items wait until the whole file has passed.
"""

from __future__ import annotations

import io
import os
import pickle
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from hpcflow.errors import CheckpointError
from hpcflow.runtime import checksum
from hpcflow.runtime.dcp_io import METADATA, MISMATCH_WORDS, ChecksumMismatch

#: Bytes read at a time for the parts of a file this rank does not load.
_SKIP_BYTES = 8 << 20
#: Chunks of a large read: each is hashed on a helper thread while the next one is read.
_CHUNK_BYTES = 4 << 20
#: Tensor items at least this large are read straight into their target.
_DIRECT_BYTES = 1 << 20
#: ``tensor_record`` reads a zip's directory and pickle in blocks this large, and keeps at
#: most this many of them.
_PREAD_BLOCK = 16 << 10
_PREAD_BLOCKS_KEPT = 16
#: The end of a tensor item asked for ahead (its zip directory; a few hundred bytes for one
#: tensor).
_TAIL_BYTES = 2 * _PREAD_BLOCK
#: Reads at most this large are copied for the hash, so their buffer can be reused at once.
_COPY_BYTES = 256 << 10


def _reader_class() -> type:
    import torch
    from torch.distributed._shard._utils import narrow_tensor_by_index
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import StorageMeta
    from torch.distributed.checkpoint.planner import LoadItemType

    class Reader(FileSystemReader):
        """See :func:`verifying_reader`."""

        def __init__(self, path: Path, files: dict[str, dict[str, Any]], key: bytes | None
                     ) -> None:
            super().__init__(path)
            self.files = files
            self.key = key

        def _open_checked(self, relative: str) -> tuple[Any, checksum.StreamDigest, str]:
            entry = self.files.get(relative)
            where = Path(self.path) / relative
            if entry is None:
                raise ChecksumMismatch(f"{where} {MISMATCH_WORDS}: the record does not list it")
            algorithms = checksum.checked_algorithms(entry, self.key)
            digest = checksum.StreamDigest(self.key, algorithms, all_cores=True)
            handle = open(where, "rb", buffering=0)  # noqa: SIM115 - the caller closes it
            if hasattr(os, "posix_fadvise"):  # read front to back: a larger read-ahead
                os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
            return handle, digest, str(where)

        def _verify(self, relative: str, digest: checksum.StreamDigest, where: str) -> None:
            problem = checksum.mismatch(where, self.files[relative], digest.result())
            if problem is not None:
                raise ChecksumMismatch(f"{where} {MISMATCH_WORDS}: {problem}")

        def read_metadata(self, *args: Any, **kwargs: Any) -> Any:
            if kwargs.get("rank") is not None:  # hpcflow writes the global .metadata only
                raise FileNotFoundError("hpcflow checkpoints have no rank-local metadata")
            handle, digest, where = self._open_checked(METADATA)
            with handle:
                data = handle.read()
            digest.update(data)
            self._verify(METADATA, digest, where)  # before anything is unpickled
            metadata = pickle.loads(data)
            if getattr(metadata, "storage_meta", None) is None:
                metadata.storage_meta = StorageMeta()
            metadata.storage_meta.load_id = self.load_id
            return metadata

        def read_data(self, plan: Any, planner: Any) -> Any:
            per_file: dict[str, list[Any]] = {}
            for item in plan.items:
                per_file.setdefault(self.storage_data[item.storage_index].relative_path,
                                    []).append(item)
            for relative, items in per_file.items():
                self._read_file(relative, items, planner)
            done: Any = torch.futures.Future()  # DCP waits on it with .wait()
            done.set_result(None)
            return done

        def _read_file(self, relative: str, items: list[Any], planner: Any) -> None:
            """Read ``relative`` front to back once, every byte through the digests; tensors
            go into the state as they come, pickled items after the whole file passed."""
            handle, digest, where = self._open_checked(relative)
            infos = sorted(((self.storage_data[i.storage_index], i) for i in items),
                           key=lambda pair: pair[0].offset)
            pickled: list[tuple[Any, bytes]] = []
            _ask_for_tails(handle.fileno(), [info for info, _ in infos])
            with handle, _HashedReads(handle, digest, where) as reads:
                try:
                    for info, item in infos:
                        reads.skip_to(info.offset)
                        if item.type != LoadItemType.BYTE_IO and self._read_direct(
                                reads, info, item, planner):
                            continue
                        view = reads.item(info.length)
                        stream = self.transforms.transform_load_stream(
                            item, info.transform_descriptors or (), _BufferFile(view))
                        if item.type == LoadItemType.BYTE_IO:
                            pickled.append((item, stream.read()))
                            continue
                        if not stream.seekable():
                            stream = io.BytesIO(stream.read())
                        tensor = torch.load(stream, map_location="cpu", weights_only=True)
                        self._commit(item, planner, narrow_tensor_by_index(
                            tensor, item.storage_offsets, item.lengths), where)
                except ChecksumMismatch:
                    raise
                except Exception:
                    # A damaged item can fail to decode before the file's digest is known:
                    # hash the rest, and report the damage rather than its symptom.
                    reads.skip_to(None)
                    self._verify(relative, digest, where)
                    raise
                reads.skip_to(None)  # the rest of the file
            self._verify(relative, digest, where)
            for item, data in pickled:  # unpickled only now that the file passed
                planner.load_bytes(item, io.BytesIO(data))

        def _commit(self, item: Any, planner: Any, tensor: Any, where: str) -> None:
            target = planner.resolve_tensor(item).detach()
            if target.size() != tensor.size():
                raise CheckpointError(f"{where}: item {item.storage_index} has shape "
                                      f"{tuple(tensor.size())}, the state expects "
                                      f"{tuple(target.size())}")
            target.copy_(tensor)
            planner.commit_tensor(item, target)

        def _read_direct(self, reads: _HashedReads, info: Any, item: Any, planner: Any
                         ) -> bool:
            """Read a large tensor item's data straight into its target (a contiguous CPU
            tensor of the same dtype and shape) or a reused buffer, without ``torch.load``
            allocating and copying it; False (nothing read) when the item does not qualify."""
            if info.length < _DIRECT_BYTES or info.transform_descriptors:
                return False
            found = reads.tensor_record(info.offset, info.length)
            if found is None:
                return False
            meta, record_at = found
            if any(o != 0 for o in item.storage_offsets) or \
                    list(item.lengths) != list(meta.shape):
                return False
            target = planner.resolve_tensor(item).detach()
            if target.dtype != meta.dtype or target.shape != meta.shape:
                return False
            nbytes = meta.numel() * meta.element_size()
            direct = target.device.type == "cpu" and target.is_contiguous()
            dest = target if direct else reads.bounce(nbytes, meta.dtype).view(meta.shape)
            reads.item(record_at - info.offset)  # the zip entries before the data
            reads.into(memoryview(dest.view(-1).view(torch.uint8).numpy()),
                       None if direct else "bounce")
            reads.item(info.offset + info.length - record_at - nbytes)  # and after it
            if not direct:
                target.copy_(dest)
            planner.commit_tensor(item, target)
            return True

    return Reader


def verifying_reader(path: Path, files: list[dict[str, Any]], key: bytes | None) -> Any:
    """A DCP storage reader of the committed checkpoint ``path`` whose record lists
    ``files`` (``[{"path", "size_bytes", digests...}]``); keyed BLAKE3 digests are checked only
    with ``key``.

    Loading through it raises (inside DCP's ``CheckpointException``) :class:`ChecksumMismatch`
    for a file whose size or digests differ, or that the record does not list.

    Cost: one sequential read of every file this rank loads from (the parts it does not need
    too: a rank that needs a slice of another rank's file, after a change of layout, reads that
    whole file), the digests at several GiB/s per core.
    """
    by_path = {str(f["path"]): f for f in files if isinstance(f, dict) and "path" in f}
    return _reader_class()(path, by_path, key)


class _SeekableRead(io.RawIOBase):
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


class _BufferFile(_SeekableRead):
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


class _HashedReads:
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

    def __enter__(self) -> _HashedReads:
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
        if view.nbytes <= _COPY_BYTES:
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
            want = _SKIP_BYTES if offset is None else min(offset - self._at, _SKIP_BYTES)
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
        for start in range(0, view.nbytes, _CHUNK_BYTES):
            chunk = view[start:start + _CHUNK_BYTES]
            _read_into(self._handle, chunk, self._where, self._at)
            self._at += chunk.nbytes
            self._hash(chunk, holds)

    def tensor_record(self, offset: int, length: int) -> tuple[Any, int] | None:
        """``(meta tensor, file offset of its data)`` of the ``torch.save`` zip at ``offset``
        holding one tensor whose storage is exactly its data, read with small ``pread`` calls
        (the zip directory and the pickle: ``torch.load(map_location="meta")`` reads no data);
        None for anything else."""
        import torch

        view = _PreadFile(self._handle.fileno(), offset, length)
        try:
            meta = torch.load(view, map_location="meta", weights_only=True)
            view.seek(0)
            records = [r for r in torch._C.PyTorchFileReader(view).get_all_records()
                       if r.startswith("data/")]
            view.seek(0)
            if not isinstance(meta, torch.Tensor) or len(records) != 1 or \
                    not meta.is_contiguous() or meta.storage_offset() != 0 or \
                    meta.untyped_storage().nbytes() != meta.numel() * meta.element_size():
                return None
            return meta, offset + torch._C.PyTorchFileReader(view).get_record_offset(records[0])
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


class _PreadFile(_SeekableRead):
    """A read-only, seekable view of ``length`` bytes at ``offset`` of an open descriptor, read
    with ``os.pread`` in blocks of :data:`_PREAD_BLOCK` kept for the next parse (the
    descriptor's own position is left alone): parsing a zip's directory and pickle three
    times costs a few ``pread`` calls, not dozens."""

    def __init__(self, fd: int, offset: int, length: int) -> None:
        super().__init__(length)
        self._fd, self._offset = fd, offset
        self._blocks: dict[int, bytes] = {}

    def _block(self, index: int) -> bytes:
        block = self._blocks.get(index)
        if block is None:
            start = index * _PREAD_BLOCK
            block = os.pread(self._fd, min(_PREAD_BLOCK, self._length - start),
                             self._offset + start)
            if len(self._blocks) < _PREAD_BLOCKS_KEPT:
                self._blocks[index] = block
        return block

    def readinto(self, buffer: Any) -> int:
        out = memoryview(buffer).cast("B")
        want = max(0, min(out.nbytes, self._length - self._at))
        got = 0
        while got < want:
            index, within = divmod(self._at + got, _PREAD_BLOCK)
            block = self._block(index)
            n = min(want - got, len(block) - within)
            if n <= 0:  # the file is shorter than its record says: the hash reports it
                break
            out[got:got + n] = block[within:within + n]
            got += n
        self._at += got
        return got


def _ask_for_tails(fd: int, infos: list[Any]) -> None:
    """Ask the kernel to fetch, all at once and in the background, the last bytes of every item
    that may be read straight into its target: :meth:`_HashedReads.tensor_record` reads each
    one's zip directory, at its end, before the sequential read gets there, and one request per
    item, each waited for, would cost a disk round trip per tensor
    (``posix_fadvise(POSIX_FADV_WILLNEED)``, which starts the reads and returns)."""
    if not hasattr(os, "posix_fadvise"):
        return
    for info in infos:
        if info.length >= _DIRECT_BYTES and not info.transform_descriptors:
            start = info.offset + max(0, info.length - _TAIL_BYTES)
            os.posix_fadvise(fd, start, info.offset + info.length - start,
                             os.POSIX_FADV_WILLNEED)


def _read_into(handle: Any, view: memoryview, where: str, at: int) -> None:
    got = 0
    while got < view.nbytes:
        n = handle.readinto(view[got:])
        if not n:
            raise ChecksumMismatch(f"{where} {MISMATCH_WORDS}: it ends at byte {at + got}, "
                                   f"within an item")
        got += n
