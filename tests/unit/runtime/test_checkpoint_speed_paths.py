"""The paths that make a checkpoint write and read at the disk's speed give the same bytes as the
plain ones: the write handed to the disk as it goes, large writes hashed piece by piece, the
staging copy spread over threads, the restore's hash queued behind the reads.

Each test forces the path it checks (tensors larger than a piece or a chunk, a second async
save that reuses its buffers, a strided target that goes through the reused bounce buffer)
and compares bytes, digests or values with what a plain computation gives.
"""

from __future__ import annotations

import json
import os
import threading

import blake3
import crc32c
import pytest
import torch

from hpcflow.runtime import commit as ckpt_dirs
from hpcflow.runtime import dcp_io, hashed_reads, staging, writeback
from hpcflow.runtime.checkpoint import CheckpointManager
from hpcflow.runtime.dcp_io import ChecksumMismatch

pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled:UserWarning")

SHARD = "__0_0.distcp"
MIB = 1 << 20


@pytest.mark.parametrize(("every", "positions", "started"), [
    # nothing until a whole `every` of whole pages has gathered; then from the last start
    (8192, [100, 8191, 8192], [(0, 8192)]),
    (8192, [9000, 20000, 20479, 28672], [(0, 8192), (8192, 8192), (16384, 12288)]),
    # a tail shorter than `every` is left to the fsync
    (8192, [4096, 12000], [(0, 8192)]),
])
def test_pages_are_handed_to_the_disk_in_whole_pages_once_enough_gathered(
        monkeypatch, every, positions, started):
    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(writeback, "start_writeback",
                        lambda fd, offset, nbytes: calls.append((offset, nbytes)) or True)
    tracker = writeback.WritebackTracker(fd=-1, every_bytes=every)
    for position in positions:
        tracker.written(position)
    assert calls == started


def test_a_file_system_that_refuses_it_is_not_asked_again(monkeypatch):
    calls: list[int] = []
    monkeypatch.setattr(writeback, "start_writeback",
                        lambda fd, offset, nbytes: calls.append(offset) and False)
    tracker = writeback.WritebackTracker(fd=-1, every_bytes=4096)
    for position in (4096, 8192, 12288):
        tracker.written(position)
    assert calls == [0]


def test_start_writeback_on_a_real_file_returns_and_the_bytes_stay(tmp_path):
    path = tmp_path / "f"
    data = os.urandom(3 * MIB)
    with open(path, "wb", buffering=0) as handle:
        handle.write(data)
        writeback.start_writeback(handle.fileno(), 0, len(data))  # True on Linux
        assert writeback.start_writeback(handle.fileno(), 0, 0) is False
        os.fsync(handle.fileno())
    assert path.read_bytes() == data


def test_a_large_tensor_is_written_in_pieces_handed_to_the_disk_with_exact_digests(
        tmp_path, monkeypatch, small_chunks):
    started: list[tuple[int, int]] = []
    real = writeback.start_writeback

    def spy(fd: int, offset: int, nbytes: int) -> bool:
        started.append((offset, nbytes))
        return real(fd, offset, nbytes)

    monkeypatch.setattr(writeback, "start_writeback", spy)
    manager = CheckpointManager(tmp_path / "ckpt", key_file=tmp_path / "key")
    big = torch.rand((dcp_io._PIECE_BYTES * 2 + MIB // 2) // 4)  # three pieces, the last short
    manager.save(1, {"big": big, "small": torch.rand(5)})
    directory = tmp_path / "ckpt" / "step_1"
    data = (directory / SHARD).read_bytes()
    assert len(started) >= 3  # handed over while the file was written, not once at the end
    assert [offset for offset, _ in started] == \
        [0] + [offset + n for offset, n in started[:-1]]  # back to back, each page once
    assert all(offset % writeback.PAGE_BYTES == 0 and n % writeback.PAGE_BYTES == 0
               for offset, n in started)
    assert started[-1][0] + started[-1][1] <= len(data)
    key = (tmp_path / "key").read_bytes()
    record = json.loads((directory / ckpt_dirs.COMMIT_NAME).read_text())
    entry = next(f for f in record["files"] if f["path"] == SHARD)
    assert entry["crc32c"] == f"{crc32c.crc32c(data):08x}"
    assert entry["blake3_keyed"] == blake3.blake3(data, key=key).hexdigest()
    target = {"big": torch.zeros_like(big), "small": torch.zeros(5)}
    manager.load(1, target)
    assert torch.equal(target["big"], big)


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Restore chunks, write pieces and staging pieces of 1 MiB: small tensors take every path
    a large model's do."""
    monkeypatch.setattr(hashed_reads, "CHUNK_BYTES", MIB)
    monkeypatch.setattr(dcp_io, "_PIECE_BYTES", MIB)
    monkeypatch.setattr(dcp_io, "_WRITEBACK_BYTES", MIB // 2)
    monkeypatch.setattr(staging, "PIECE_BYTES", MIB)


def big_state(seed: int) -> dict:
    """Two tensors of several restore chunks each, read straight into (or through the bounce
    buffer to) their targets, and a small one read through torch.load."""
    generator = torch.Generator().manual_seed(seed)
    n = (hashed_reads.CHUNK_BYTES * 2 + MIB // 2) // 4
    return {"a": torch.rand(n, generator=generator), "b": torch.rand(n, generator=generator),
            "c": torch.rand(7, generator=generator)}


@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_tensors_of_several_chunks_load_exactly_with_the_hash_behind_the_reads(
        tmp_path, layout, small_chunks):
    manager = CheckpointManager(tmp_path / "ckpt", key_file=tmp_path / "key")
    saved = big_state(0)
    manager.save(1, saved)
    n = saved["a"].numel()
    if layout == "contiguous":
        target = {name: torch.zeros_like(t) for name, t in saved.items()}
    else:  # both large ones through the one reused bounce buffer, one after the other
        target = {"a": torch.zeros(2 * n)[::2], "b": torch.zeros(2 * n)[1::2],
                  "c": torch.zeros(7)}
    manager.load(1, target)
    for name in saved:
        assert torch.equal(target[name], saved[name])


@pytest.mark.parametrize("at", [0.25, 0.5, 0.999])
def test_a_flipped_byte_in_any_chunk_of_a_large_tensor_is_caught(tmp_path, at, small_chunks):
    manager = CheckpointManager(tmp_path / "ckpt", key_file=tmp_path / "key")
    manager.save(1, big_state(0))
    path = tmp_path / "ckpt" / "step_1" / SHARD
    data = bytearray(path.read_bytes())
    data[int(len(data) * at)] ^= 0x10
    path.write_bytes(bytes(data))
    with pytest.raises(ChecksumMismatch, match=SHARD):
        manager.load(1, big_state(1))


def test_the_block_cache_of_the_zip_reader_gives_the_file_s_bytes(tmp_path):
    data = os.urandom(hashed_reads.PREAD_BLOCK * 3 + 123)
    path = tmp_path / "f"
    path.write_bytes(b"x" * 77 + data)
    fd = os.open(path, os.O_RDONLY)
    try:
        view = hashed_reads.PreadFile(fd, 77, len(data))
        for start, size in [(0, 10), (hashed_reads.PREAD_BLOCK - 5, 10), (0, len(data)),
                            (len(data) - 4, 100), (len(data), 8), (5, 0)]:
            view.seek(start)
            buffer = bytearray(size)
            got = view.readinto(buffer)
            assert bytes(buffer[:got]) == data[start:start + size]
            assert view.tell() == min(start + size, len(data))
    finally:
        os.close(fd)


def test_the_staging_copy_of_later_saves_runs_on_several_threads_and_is_exact(
        monkeypatch, small_chunks):
    threads: set[str] = set()
    copy = staging._copy_pieces

    def spy(pieces: list) -> None:
        threads.add(threading.current_thread().name)
        copy(pieces)

    monkeypatch.setattr(staging, "_copy_pieces", spy)
    stager = staging.ParallelStager(pin=False, threads=2)
    big = torch.rand((staging.PIECE_BYTES * 3) // 4 + 5)
    shared = torch.rand(staging.PARALLEL_MIN_BYTES // 4 * 2)
    state = {"big": big, "half": shared[: shared.numel() // 2], "whole": shared,
             "small": torch.rand(3), "step": 4}
    try:
        first, nothing = stager.stage(state)
        assert nothing.pairs == []
        assert not threads  # the first save allocates: the stager's own copy
        for value in (1.0, 2.0):
            for tensor in (big, shared, state["small"]):
                tensor.add_(value)
            staged, _ = stager.stage(state)
            for name in ("big", "half", "whole", "small"):
                assert torch.equal(staged[name], state[name])
                assert staged[name].data_ptr() == first[name].data_ptr()  # buffers reused
                assert staged[name].data_ptr() != state[name].data_ptr()
            assert staged["half"].untyped_storage().data_ptr() == \
                staged["whole"].untyped_storage().data_ptr()  # one buffer per storage
            assert staged["step"] == 4
        assert threading.current_thread().name in threads and len(threads) == 2
        big.add_(1.0)
        assert not torch.equal(staged["big"], big)  # a copy, not a view of the live state
    finally:
        stager.close()


def test_a_deferred_staging_copy_leaves_the_large_storages_to_its_run():
    stager = staging.ParallelStager(pin=False, threads=2)
    big = torch.rand(staging.PARALLEL_MIN_BYTES // 4 * 2)
    state = {"big": big, "small": torch.rand(3)}
    try:
        stager.stage(state)  # allocates the buffers
        big.add_(1.0)
        state["small"].add_(1.0)
        staged, deferred = stager.stage(state, defer=True)
        assert deferred.storages == {big.untyped_storage().data_ptr()}
        assert deferred.nbytes == big.nbytes
        assert torch.equal(staged["small"], state["small"])  # copied at once
        assert not torch.equal(staged["big"], big)  # not yet
        deferred.run()
        assert torch.equal(staged["big"], big)
    finally:
        stager.close()


def test_an_async_save_after_the_first_holds_the_state_at_its_save(tmp_path, small_chunks):
    manager = CheckpointManager(tmp_path / "ckpt", key_file=tmp_path / "key")
    state = {"w": torch.rand((staging.PIECE_BYTES + MIB) // 4)}
    try:
        for step in (1, 2):
            state["w"].add_(1.0)
            expected = state["w"].clone()
            manager.save(step, state, blocking=False)
            state["w"].add_(100.0)  # the training goes on while the write runs
            manager.wait()
            target = {"w": torch.zeros_like(expected)}
            manager.load(step, target)
            assert torch.equal(target["w"], expected)
    finally:
        manager.close()


def test_tensors_of_one_layout_are_unpickled_once_and_each_loads_exactly(tmp_path, monkeypatch):
    loads: list[object] = []
    load = torch.load

    def counting(*args, **kwargs):
        if kwargs.get("map_location") == "meta":
            loads.append(args[0])
        return load(*args, **kwargs)

    monkeypatch.setattr(torch, "load", counting)
    saved = {"a": torch.rand(512, 1024), "b": torch.rand(512, 1024),  # one layout
             "c": torch.rand(1024, 512),  # another shape
             "d": torch.rand(512, 1024, dtype=torch.float64),  # another dtype
             "e": torch.rand(1024, 512).t(),  # not contiguous: read through torch.load
             "f": torch.rand(512, 1024)}
    manager = CheckpointManager(tmp_path / "ckpt", key_file=tmp_path / "key")
    manager.save(1, saved)
    target = {name: torch.zeros_like(t) for name, t in saved.items()}
    manager.load(1, target)
    for name, tensor in saved.items():
        assert torch.equal(target[name], tensor), name
    assert len(loads) == 4  # a (b, f the same), c, d, e
