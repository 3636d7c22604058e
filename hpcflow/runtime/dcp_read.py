"""The restore half of :mod:`hpcflow.runtime.dcp_io`: DCP's ``FileSystemReader`` that checks
every file's checksums while it reads it, once, front to back.

Per file: the bytes go through the record's digest as they are read, on one helper thread
that runs behind the reads (the reader waits for it only at the end of the file, or before it
overwrites a buffer still being hashed); a tensor item of at least 1 MiB whose target is a
plain tensor of the same dtype and shape is read straight into the target (or into one reused
buffer, then copied, for a GPU target), with no ``torch.load`` allocation and copy; other items
go through ``torch.load(weights_only=True)`` from one reused buffer; pickled items wait until
the whole file has passed. The kernel is told the file is read front to back (a larger
read-ahead) and asked ahead for the end of every large tensor item (its zip directory, read
before the data); reads are large, as a raw read's are (:mod:`hpcflow.runtime.hashed_reads`).
"""

from __future__ import annotations

import io
import os
import pickle
from pathlib import Path
from typing import Any

from hpcflow.errors import CheckpointError
from hpcflow.runtime import checksum
from hpcflow.runtime.dcp_io import METADATA, MISMATCH_WORDS, ChecksumMismatch
from hpcflow.runtime.hashed_reads import (
    DIRECT_BYTES,
    BufferFile,
    HashedReads,
    ask_for_tails,
)


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
            self.known_metas: dict[Any, Any] = {}  # see HashedReads.tensor_record

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
            ask_for_tails(handle.fileno(), [info for info, _ in infos])
            with handle, HashedReads(handle, digest, where) as reads:
                try:
                    for info, item in infos:
                        reads.skip_to(info.offset)
                        if item.type != LoadItemType.BYTE_IO and self._read_direct(
                                reads, info, item, planner):
                            continue
                        view = reads.item(info.length)
                        stream = self.transforms.transform_load_stream(
                            item, info.transform_descriptors or (), BufferFile(view))
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

        def _read_direct(self, reads: HashedReads, info: Any, item: Any, planner: Any
                         ) -> bool:
            """Read a large tensor item's data straight into its target (a contiguous CPU
            tensor of the same dtype and shape) or a reused buffer, without ``torch.load``
            allocating and copying it; False (nothing read) when the item does not qualify."""
            if info.length < DIRECT_BYTES or info.transform_descriptors:
                return False
            found = reads.tensor_record(info.offset, info.length, self.known_metas)
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
