"""The copy of an async save's state into its CPU staging buffers, spread over a few threads.

DCP's ``DefaultStager`` (torch/distributed/checkpoint/staging.py) allocates one CPU buffer per
storage of the state at the first save, and at every later save copies each storage into its
buffer, one after another, on the calling thread: the training thread, which an async save
blocks for exactly that long. On a CPU that copy is bound by memory bandwidth, of which one
thread gets only a part. Here, at the later saves, the stager's copy of each storage of at least
:data:`PARALLEL_MIN_BYTES` into its reused buffer is noted instead of done, and once the stager
has walked the state the noted copies run in pieces of :data:`PIECE_BYTES` on the calling
thread and on helpers: ``Tensor.copy_`` releases the GIL, so they copy side by side. Device
storages (a GPU's, copied to pinned memory) are left to the stager as they are.

With ``defer``, those noted copies are not made by :meth:`ParallelStager.stage` at all: it
returns them as a :class:`DeferredCopy` that the save's writer thread makes, while the training
thread goes on with the next step's forward and backward passes (the overlap of staging with
compute of DCP's own async staging, torch/distributed/checkpoint/staging.py
``StagingOptions.use_async_staging``).

This reaches into the stager's storage cache (``_state_dict_stager``, torch 2.8 to 2.13); a
torch without it gets the stager's own copy on one thread, with the same result.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

#: Storages at least this large are copied by the threads; smaller ones by the stager at once.
PARALLEL_MIN_BYTES = 1 << 20
#: The piece of a storage one thread copies at a time.
PIECE_BYTES = 16 << 20
#: Threads copying at most (the calling thread is one of them).
MAX_THREADS = 4


def copy_threads() -> int:
    """Threads a staging copy uses: the cores this process may run on, at most
    :data:`MAX_THREADS`."""
    from hpcflow.runtime.checksum import usable_cores

    return max(1, min(MAX_THREADS, usable_cores()))


@dataclass
class DeferredCopy:
    """The copies :meth:`ParallelStager.stage` left for later with ``defer=True``.

    Attributes:
        pairs: ``(buffer, storage)`` of each storage still to copy.
        run: makes those copies (on the calling thread and the stager's helpers).
    """

    pairs: list[tuple[Any, Any]]
    run: Any

    @property
    def storages(self) -> set[int]:
        """The ``data_ptr`` of each storage still to copy."""
        return {storage.data_ptr() for _, storage in self.pairs}

    @property
    def nbytes(self) -> int:
        """Bytes still to copy."""
        return sum(storage.nbytes() for _, storage in self.pairs)


class ParallelStager:
    """``DefaultStager`` (no async staging, no shared memory; pinned buffers when ``pin``) whose
    copies into reused buffers run on ``threads`` threads.

    Args:
        pin: pin the staging buffers (CUDA present: device-to-host copies are faster into them).
        threads: threads per copy, the caller's included (default :func:`copy_threads`).
    """

    def __init__(self, pin: bool, threads: int | None = None) -> None:
        from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions

        self._stager = DefaultStager(StagingOptions(
            use_pinned_memory=pin, use_shared_memory=False, use_async_staging=False,
            use_non_blocking_copy=False,
        ))
        self.threads = copy_threads() if threads is None else max(1, threads)
        self._pool: ThreadPoolExecutor | None = None
        self._noted: list[tuple[Any, Any]] | None = None
        inner = getattr(self._stager, "_state_dict_stager", None)
        own = getattr(inner, "_stage_untyped_storage", None)
        cache = getattr(inner, "_cached_storage_mapping", None)
        if self.threads > 1 and own is not None and cache is not None:
            def stage_storage(storage: Any, non_blocking: bool = False) -> Any:
                cached = cache.get(storage)
                if self._noted is None or cached is None or storage.device.type != "cpu" or \
                        cached.size() != storage.size() or storage.nbytes() < PARALLEL_MIN_BYTES:
                    return own(storage, non_blocking)
                self._noted.append((cached, storage))
                return cached

            inner._stage_untyped_storage = stage_storage

    def stage(self, state: Any, *, defer: bool = False) -> tuple[Any, DeferredCopy]:
        """A copy of ``state`` in the staging buffers (allocated at the first call, reused after,
        as long as the state keeps its storages).

        Args:
            state: the flat state dict.
            defer: leave the copies of the CPU storages of at least :data:`PARALLEL_MIN_BYTES`
                into reused buffers to the returned :class:`DeferredCopy` (the staged dict holds
                their buffers, not yet filled); the rest is copied now.

        Returns:
            The staged dict, and the copies still to make (none unless ``defer``).
        """
        self._noted = []
        try:
            staged = self._stager.stage(state)
            noted = self._noted
        finally:
            self._noted = None
        if not defer:
            self._copy(noted)
            noted = []
        return staged, DeferredCopy(noted, lambda: self._copy(noted))

    def _copy(self, pairs: list[tuple[Any, Any]]) -> None:
        """Copy each ``(buffer, storage)`` in pieces, every ``threads``-th piece per thread."""
        if not pairs:
            return
        import torch

        pieces = []
        for buffer, storage in pairs:
            into = torch.empty(0, dtype=torch.uint8).set_(buffer)
            out_of = torch.empty(0, dtype=torch.uint8).set_(storage)
            for start in range(0, into.numel(), PIECE_BYTES):
                pieces.append((into[start:start + PIECE_BYTES], out_of[start:start + PIECE_BYTES]))
        shares = [pieces[i::self.threads] for i in range(self.threads)]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads - 1,
                                            thread_name_prefix="hpcflow-ckpt-stage")
        helpers = [self._pool.submit(_copy_pieces, share) for share in shares[1:] if share]
        try:
            _copy_pieces(shares[0])
        finally:
            for helper in helpers:
                helper.result()

    def close(self) -> None:
        """Free the buffers and the helper threads."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self._stager.close()


def _copy_pieces(pieces: list[tuple[Any, Any]]) -> None:
    for into, out_of in pieces:
        into.copy_(out_of)
