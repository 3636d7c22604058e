"""Benchmark: checkpoint write throughput against the same disk's raw sequential write, restore
(checksums checked while reading, plus the load) against a raw read, and the time an async save
blocks the training loop against a sync save.

Goals: checkpoint GiB/s / raw write GiB/s >= 0.8 for a state of at least 1 GiB; restore seconds /
raw read seconds <= 1.25; training loop blocked by an async save / by a sync save <= 0.1. All
figures are medians over repeats, measured side by side in one run on one directory; it never
fails on time. The header gives the cores, the load, a first raw write of the disk and the
checksums' own speed in memory.

One process (world of 1) saves a state of ``--size-gib`` GiB of float32 tensors with
``hpcflow.runtime.checkpoint.CheckpointManager``:

- raw write: Python ``write`` of the same number of bytes in 64 MiB blocks, then ``fsync``
  (as ``dd bs=64M conv=fsync``; ``dd if=/dev/zero`` itself is also timed when present); for
  reference, the same bytes written as the checkpoint writer writes them, handed to the disk
  as they are written (``sync_file_range``);
- raw read: that file, its pages dropped from the page cache first
  (``posix_fadvise(POSIX_FADV_DONTNEED)`` after the fsync), read in 64 MiB blocks;
- sync save: ``save(step, state)`` (DCP write with fsync of every file, the checksums computed
  as the bytes are written, commit record, rename);
- restore: ``load(step, state)`` of that checkpoint into a second state of the same shapes, its
  files dropped from the page cache first: every file's checksums checked while it is read;
  for reference, DCP's own ``FileSystemReader`` (no check) and the SHA-256 pass over every file
  that version 1 records cost after the write and before the load are timed too;
- async save: ``save(step, state, blocking=False)`` returns after copying the state into CPU
  staging buffers; a stand-in training loop (a forward and backward pass of ``--step-s``
  seconds of matrix products, then ``torch.optim.SGD`` on a slice of the state) then runs until
  the background write has committed. "Blocked" is the time inside ``save``; the first async
  save also allocates the staging buffers ("cold") and is reported apart from the later ones
  ("warm");
- async save with ``overlap=True``: the large tensors are copied by the writer thread while
  the loop runs; "blocked" is the time inside ``save`` plus the optimizer's wait for that copy.

Usage: python bench/bench_checkpoint.py [--size-gib 1] [--repeats 3] [--dir DIR] [--small]
       [--threads 1] [--step-s 0.25] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from machine import header, median, verdict

GIB = 2**30
BLOCK_BYTES = 64 * 2**20
GOAL_THROUGHPUT_RATIO = 0.8
GOAL_RESTORE_RATIO = 1.25
GOAL_BLOCKED_RATIO = 0.1


def make_state(nbytes: int):  # noqa: ANN201 - a DCP state dict
    """16 float32 tensors of ``nbytes`` in all (like the layers of a model) and a step."""
    import torch

    n_tensors = 16
    per = max(1, nbytes // 4 // n_tensors)
    layers = {f"layer{i}.weight": torch.empty(per).uniform_() for i in range(n_tensors)}
    return {"model": layers, "step": 0}


def drop_cache(path: Path) -> None:
    """Drop the clean pages of ``path`` (a file, or every file below a folder) from the page
    cache, so the next read comes from the disk (``posix_fadvise(2)``, ``POSIX_FADV_DONTNEED``;
    written pages must be fsynced first)."""
    for file in [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]:
        fd = os.open(file, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def raw_write_read_s(path: Path, nbytes: int) -> tuple[float, float]:
    """Seconds to write ``nbytes`` sequentially and fsync them, and to read them back after the
    pages were dropped from the cache (file removed afterwards)."""
    block = memoryview(os.urandom(2**20) * (BLOCK_BYTES // 2**20))
    started = time.perf_counter()
    with open(path, "wb", buffering=0) as handle:
        left = nbytes
        while left > 0:
            left -= handle.write(block[: min(left, BLOCK_BYTES)])
        os.fsync(handle.fileno())
    write_s = time.perf_counter() - started
    drop_cache(path)
    buffer = bytearray(BLOCK_BYTES)
    started = time.perf_counter()
    with open(path, "rb", buffering=0) as handle:
        while handle.readinto(buffer):
            pass
    read_s = time.perf_counter() - started
    path.unlink()
    return write_s, read_s


def raw_write_started_s(path: Path, nbytes: int) -> float:
    """Seconds to write ``nbytes`` as the checkpoint writer writes a tensor (pieces of 16 MiB,
    the pages handed to the disk each 8 MiB with ``sync_file_range``:
    ``hpcflow.runtime.dcp_io``, ``hpcflow.runtime.writeback``), then ``fsync``: the disk's
    speed when its writing overlaps the copying (file removed afterwards)."""
    from hpcflow.runtime import dcp_io
    from hpcflow.runtime.writeback import WritebackTracker

    block = memoryview(os.urandom(2**20) * (dcp_io._PIECE_BYTES // 2**20))
    started = time.perf_counter()
    with open(path, "wb", buffering=0) as handle:
        tracker = WritebackTracker(handle.fileno(), dcp_io._WRITEBACK_BYTES)
        written = 0
        while written < nbytes:
            written += handle.write(block[: min(nbytes - written, len(block))])
            tracker.written(written)
        os.fsync(handle.fileno())
    elapsed = time.perf_counter() - started
    path.unlink()
    return elapsed


def checksum_speeds(nbytes: int = 256 * 2**20) -> dict[str, float]:
    """GiB/s of each checksum over ``nbytes`` in memory, on this thread (best of 3)."""
    import hashlib

    from hpcflow.runtime import checksum

    data = memoryview(os.urandom(2**20) * (nbytes // 2**20))
    key = bytes(range(32))
    runs = {
        "crc32c": lambda: checksum.StreamDigest(None, (checksum.CRC32C,)).update(data),
        "blake3_keyed": lambda: checksum.StreamDigest(key, (checksum.BLAKE3_KEYED,)).update(data),
        "both (as written)": lambda: checksum.StreamDigest(key).update(data),
        "sha256 (before)": lambda: hashlib.sha256(data),
    }
    speeds = {}
    for name, run in runs.items():
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            run()
            best = min(best, time.perf_counter() - started)
        speeds[name] = nbytes / GIB / best
    return speeds


def copy_floor_s(state) -> float:  # noqa: ANN001 - a DCP state dict
    """Seconds to copy ``state``'s tensors into warm buffers of the same shapes with
    ``Tensor.copy_`` on as many threads as the staging copy uses, no checkpoint code (best of 3):
    the least an async save's blocked part can be on this machine."""
    from concurrent.futures import ThreadPoolExecutor

    import torch

    from hpcflow.runtime.staging import copy_threads

    pairs = [(torch.empty_like(t), t) for t in state["model"].values()]
    best = float("inf")
    with ThreadPoolExecutor(copy_threads()) as pool:
        for round_ in range(4):  # the first copy touches the buffers' pages: not counted
            started = time.perf_counter()
            list(pool.map(lambda pair: pair[0].copy_(pair[1]), pairs))
            if round_:
                best = min(best, time.perf_counter() - started)
    return best


def sha256_pass_s(directory: Path) -> float:
    """Seconds to read every file of ``directory`` and hash it with SHA-256: what a commit of
    record version 1 added after the write, and its restore before the load."""
    from hpcflow.runtime import commit as ckpt_dirs

    started = time.perf_counter()
    ckpt_dirs.list_files(directory)
    return time.perf_counter() - started


def dd_write_s(path: Path, nbytes: int) -> float | None:
    """Seconds for ``dd if=/dev/zero bs=64M conv=fsync`` of ``nbytes``, or None without dd."""
    if shutil.which("dd") is None:
        return None
    count = max(1, nbytes // BLOCK_BYTES)
    cmd = ["dd", "if=/dev/zero", f"of={path}", "bs=64M", f"count={count}", "conv=fsync",
           "status=none"]
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    path.unlink(missing_ok=True)
    if done.returncode != 0:
        print(f"dd failed ({done.returncode}): {done.stderr.strip()}", file=sys.stderr)
        return None
    return elapsed * nbytes / (count * BLOCK_BYTES)


def make_train_step(step_s: float):  # noqa: ANN201
    """A stand-in forward and backward pass of about ``step_s`` seconds: 384x384 matrix products
    (they release the GIL, as real kernels do), as many as take that long here."""
    import torch

    torch.set_flush_denormal(True)  # values that drift towards 0 must not slow the products
    a = torch.rand(384, 384)

    def products(n: int) -> None:
        b = a
        for _ in range(n):
            b = torch.mm(b, a) / 192  # entries of a average 0.5: b keeps its scale

    products(8)
    began = time.perf_counter()
    products(64)
    count = max(1, round(step_s / ((time.perf_counter() - began) / 64)))
    return lambda: products(count)


def make_update(state):  # noqa: ANN001, ANN201 - a DCP state dict
    """The stand-in optimizer step: ``torch.optim.SGD`` on a slice of the state's first weight
    (a torch optimizer's step waits for an overlapped save's staging copy)."""
    import torch

    weight = state["model"]["layer0.weight"]
    slice_ = torch.nn.Parameter(weight.view(-1)[:1024])
    slice_.grad = torch.full_like(slice_, -1.0)
    optimizer = torch.optim.SGD([slice_], lr=1.0)

    def update() -> None:
        with torch.no_grad():
            optimizer.step()  # the live state changes while the write goes on

    return update


def async_save(manager, step: int, state, train_step, update, *,  # noqa: ANN001
               overlap: bool) -> dict:
    """Start an async save, train until it commits; blocked time (in ``save``, plus waiting for
    the staging copy before an update with ``overlap``), total time, step times."""
    manager.save(step, state, blocking=False, overlap=overlap)
    step_times = []
    while manager.writing:
        t = time.perf_counter()
        train_step()
        update()
        step_times.append(time.perf_counter() - t)
    result = manager.wait()
    return {"blocked_s": result.blocked_s, "wait_s": result.staging_wait_s,
            "total_s": result.total_s, "steps": len(step_times),
            "step_s": median(step_times) if step_times else float("nan")}


def measure(args: argparse.Namespace, root: Path) -> dict:
    """Every measurement, ``args.repeats`` times, interleaved."""
    import torch
    import torch.distributed.checkpoint as dcp

    from hpcflow.runtime.checkpoint import CheckpointManager

    # One compute thread for the stand-in loop: on a GPU node the device computes while a CPU
    # core writes; here the writer thread gets the other core (OpenMP threads that share a core
    # with the writer spin and slow each step several-fold).
    torch.set_num_threads(args.threads)
    nbytes = int(args.size_gib * GIB)
    state = make_state(nbytes)
    nbytes = sum(t.numel() * t.element_size() for t in state["model"].values())
    train_step = make_train_step(args.step_s)
    update = make_update(state)
    for _ in range(3):
        train_step()  # warm up
    baseline = []
    for _ in range(max(5, min(50, round(2.0 / args.step_s)))):
        t = time.perf_counter()
        train_step()
        update()
        baseline.append(time.perf_counter() - t)
    warm = CheckpointManager(root / "warmup", keep=1)  # first-call costs of DCP, not the disk
    warm.save(1, make_state(2**20))
    warm.load(1, make_state(2**20))
    shutil.rmtree(root / "warmup")
    target = make_state(nbytes)  # restored into: the same shapes, other values
    # keep > rounds: no pruning inside a timed save; each round's checkpoints are removed
    # between timings, and os.sync() before each timing flushes what earlier steps left dirty.
    sync_mgr = CheckpointManager(root / "sync", keep=args.repeats + 2)
    async_mgr = CheckpointManager(root / "async", keep=args.repeats + 2)
    overlap_mgr = CheckpointManager(root / "overlap", keep=args.repeats + 2)
    runs: dict[str, list] = {"raw_s": [], "raw_read_s": [], "dd_s": [], "raw_started_s": [],
                             "sync_s": [],
                             "restore_s": [], "dcp_load_s": [], "v1_commit_s": [],
                             "v1_verify_s": [], "async": [], "overlap": []}
    for rep in range(args.repeats + 1):  # one more async save: the first one is cold
        if rep < args.repeats:
            os.sync()
            write_s, read_s = raw_write_read_s(root / "raw.bin", nbytes)
            runs["raw_s"].append(write_s)
            runs["raw_read_s"].append(read_s)
            os.sync()
            started = time.perf_counter()
            sync_mgr.save(rep + 1, state)
            runs["sync_s"].append(time.perf_counter() - started)
            directory = root / "sync" / f"step_{rep + 1}"
            runs["v1_commit_s"].append(sha256_pass_s(directory))  # warm, as the commit did
            drop_cache(directory)
            started = time.perf_counter()
            sync_mgr.load(rep + 1, target)
            runs["restore_s"].append(time.perf_counter() - started)
            if not torch.equal(target["model"]["layer1.weight"], state["model"]["layer1.weight"]):
                raise SystemExit("the restored state differs from the saved one")
            drop_cache(directory)
            started = time.perf_counter()
            dcp.load(target, storage_reader=dcp.FileSystemReader(directory), no_dist=True)
            runs["dcp_load_s"].append(time.perf_counter() - started)
            drop_cache(directory)
            runs["v1_verify_s"].append(sha256_pass_s(directory))  # cold, as the restore did
            shutil.rmtree(directory)
        os.sync()
        runs["async"].append(async_save(async_mgr, rep + 1, state, train_step, update,
                                        overlap=False))
        shutil.rmtree(root / "async" / f"step_{rep + 1}")
        os.sync()
        runs["overlap"].append(async_save(overlap_mgr, rep + 1, state, train_step, update,
                                          overlap=True))
        shutil.rmtree(root / "overlap" / f"step_{rep + 1}")
        os.sync()
        if rep < args.repeats and (dd := dd_write_s(root / "dd.bin", nbytes)) is not None:
            runs["dd_s"].append(dd)
        if rep < args.repeats:
            os.sync()
            runs["raw_started_s"].append(raw_write_started_s(root / "raw2.bin", nbytes))
        last, over = runs["async"][-1], runs["overlap"][-1]
        sync_text = f"raw write {runs['raw_s'][-1]:.2f} s, sync save {runs['sync_s'][-1]:.2f} " \
            f"s, raw read {runs['raw_read_s'][-1]:.2f} s, restore {runs['restore_s'][-1]:.2f} s, " \
            if rep < args.repeats else "(extra) "
        print(f"  {'cold' if rep == 0 else 'warm'} round {rep + 1}: {sync_text}async save blocked "
              f"{last['blocked_s']:.3f} s of {last['total_s']:.2f} s, with overlap "
              f"{over['blocked_s']:.3f} s of {over['total_s']:.2f} s", flush=True)
    async_mgr.close()
    overlap_mgr.close()
    return {"nbytes": nbytes, "baseline_step_s": median(baseline), "threads": args.threads,
            "step_s": args.step_s,
            "copy_floor_s": copy_floor_s(state), **runs}


def report(m: dict) -> dict:
    """Print the medians and ratios; return them."""
    gib = m["nbytes"] / GIB
    raw = gib / median(m["raw_s"])
    dd = gib / median(m["dd_s"]) if m["dd_s"] else float("nan")
    started = gib / median(m["raw_started_s"])
    sync_s = median(m["sync_s"])
    ckpt = gib / sync_s
    cold, warm = m["async"][0], m["async"][1:]
    blocked_warm = median([r["blocked_s"] for r in warm])
    async_total = median([r["total_s"] for r in warm])
    during = median([r["step_s"] for r in warm if r["steps"]])
    over_warm = m["overlap"][1:]
    over_blocked = median([r["blocked_s"] for r in over_warm])
    over_wait = median([r["wait_s"] for r in over_warm])
    over_total = median([r["total_s"] for r in over_warm])
    over_during = median([r["step_s"] for r in over_warm if r["steps"]])
    paired = median([r / s for r, s in zip(m["raw_s"], m["sync_s"], strict=True)])
    raw_read = gib / median(m["raw_read_s"])
    restore_s = median(m["restore_s"])
    restore_paired = median([r / s for r, s in zip(m["restore_s"], m["raw_read_s"],
                                                    strict=True)])
    out = {
        "state_gib": gib, "repeats": len(m["sync_s"]), "throughput_ratio_paired": paired,
        "raw_gib_s": raw, "dd_gib_s": dd, "raw_started_gib_s": started,
        "throughput_ratio_started": ckpt / started, "sync_save_gib_s": ckpt,
        "throughput_ratio": ckpt / raw, "sync_save_s": sync_s,
        "raw_read_gib_s": raw_read, "restore_s": restore_s, "restore_gib_s": gib / restore_s,
        "restore_ratio": restore_s / median(m["raw_read_s"]),
        "restore_ratio_paired": restore_paired, "checksum_gib_s": m["checksums"],
        "dcp_load_s": median(m["dcp_load_s"]), "v1_commit_extra_s": median(m["v1_commit_s"]),
        "v1_verify_extra_s": median(m["v1_verify_s"]),
        "async_blocked_s_warm": blocked_warm, "async_blocked_s_cold": cold["blocked_s"],
        "async_total_s": async_total, "async_write_gib_s": gib / async_total,
        "blocked_ratio": blocked_warm / sync_s, "blocked_ratio_cold": cold["blocked_s"] / sync_s,
        "copy_floor_s": m["copy_floor_s"], "blocked_ratio_floor": m["copy_floor_s"] / sync_s,
        "steps_during_async": median([r["steps"] for r in warm]),
        "step_s_baseline": m["baseline_step_s"], "step_s_during_async": during,
        "overlap_blocked_s_warm": over_blocked, "overlap_wait_s_warm": over_wait,
        "overlap_total_s": over_total, "blocked_ratio_overlap": over_blocked / sync_s,
        "steps_during_overlap": median([r["steps"] for r in over_warm]),
        "step_s_during_overlap": over_during, "stand_in_step_s": m["step_s"],
    }
    print(f"state {gib:.3f} GiB, {out['repeats']} repeats, medians "
          f"(stand-in loop on {m['threads']} compute thread(s)):")
    print(f"  raw sequential write + fsync (Python) {raw:7.3f} GiB/s   (dd conv=fsync {dd:.3f})")
    print(f"  sync checkpoint save                 {ckpt:7.3f} GiB/s   ({sync_s:.2f} s)")
    print(f"  -> throughput ratio checkpoint/raw   {out['throughput_ratio']:7.3f}   "
          f"{verdict(out['throughput_ratio'], GOAL_THROUGHPUT_RATIO, at_least=True)}"
          f"   (median of per-round ratios {paired:.3f})")
    print(f"  for reference: raw write handed to the disk as written (sync_file_range, "
          f"as the checkpoint writer does) {started:.3f} GiB/s; checkpoint / that "
          f"{out['throughput_ratio_started']:.3f}")
    print(f"  raw read (dropped from the cache)     {raw_read:7.3f} GiB/s")
    print(f"  restore (checksums + load)           {gib / restore_s:7.3f} GiB/s   "
          f"({restore_s:.2f} s)")
    print(f"  -> restore ratio restore/raw read    {out['restore_ratio']:7.3f}   "
          f"{verdict(out['restore_ratio'], GOAL_RESTORE_RATIO, at_least=False)}"
          f"   (median of per-round ratios {restore_paired:.3f})")
    print(f"  for reference: DCP's own reader, no check, {out['dcp_load_s']:.2f} s; version 1 "
          f"records read every file back for SHA-256 after the write (+{out['v1_commit_extra_s']:.2f}"
          f" s, from the page cache) and again before the load (+{out['v1_verify_extra_s']:.2f} s,"
          " from the disk)")
    speeds = ", ".join(f"{name} {v:.2f}" for name, v in m["checksums"].items())
    print(f"  checksums in memory, one core (GiB/s): {speeds}; disk: write {raw:.3f}, "
          f"read {raw_read:.3f}")
    print(f"  stand-in training step (forward and backward: matrix products on "
          f"{m['threads']} thread(s), then torch.optim.SGD on a slice of the state) "
          f"{m['baseline_step_s'] * 1e3:.0f} ms without a write")
    print(f"  async save, copy in save (overlap=False): loop blocked {blocked_warm:.3f} s warm, "
          f"{cold['blocked_s']:.3f} s "
          f"cold (first save allocates the staging buffers); committed after {async_total:.2f} s "
          f"({out['async_write_gib_s']:.3f} GiB/s)")
    print(f"  -> blocked ratio async/sync (warm)   {out['blocked_ratio']:7.3f}   "
          f"(cold {out['blocked_ratio_cold']:.3f})")
    print(f"  async save, copy overlapping the next step (overlap=True): loop blocked "
          f"{over_blocked:.3f} s warm, of which {over_wait:.3f} s waiting for the copy before the "
          f"optimizer's step; committed after {over_total:.2f} s")
    print(f"  -> blocked ratio async/sync (warm, overlap) {out['blocked_ratio_overlap']:7.3f}   "
          f"{verdict(out['blocked_ratio_overlap'], GOAL_BLOCKED_RATIO, at_least=False)}   "
          f"(with a step of {m['baseline_step_s'] * 1e3:.0f} ms: a shorter step than the copy "
          "waits for the rest of it)")
    print(f"  for reference: the state copied into warm buffers alone (Tensor.copy_, the staging "
          f"copy's threads, best of 3) {m['copy_floor_s']:.3f} s, {out['blocked_ratio_floor']:.3f}"
          f" of the sync save: the least blocked ratio a copy into staging allows here")
    print(f"  training steps during an async write: {out['steps_during_async']:.0f}, "
          f"{during * 1e3:.2f} ms each vs {m['baseline_step_s'] * 1e3:.2f} ms without a write "
          f"(x{during / m['baseline_step_s']:.2f}); with overlap "
          f"{out['steps_during_overlap']:.0f}, {over_during * 1e3:.2f} ms each "
          f"(x{over_during / m['baseline_step_s']:.2f})")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-gib", type=float, default=1.0,
                        help="state size in GiB (default 1; the goal is stated for >= 1)")
    parser.add_argument("--repeats", type=int, default=3, help="repeats for the medians")
    parser.add_argument("--dir", type=Path, default=None,
                        help="directory on the disk to measure (default: a new one under .)")
    parser.add_argument("--small", action="store_true",
                        help="CI size: 0.125 GiB, 2 repeats (under a minute)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch compute threads of the stand-in training loop (default 1)")
    parser.add_argument("--step-s", type=float, default=0.25,
                        help="seconds of the stand-in forward and backward pass (default 0.25)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    if args.small:
        args.size_gib, args.repeats = 0.125, 2
    if args.size_gib <= 0 or args.repeats < 1 or args.threads < 1 or not 0 < args.step_s <= 10:
        parser.error("--size-gib must be > 0, --repeats and --threads >= 1, --step-s in (0, 10]")
    # DCP warns on every save without a process group; this benchmark is one process on purpose.
    warnings.filterwarnings("ignore", message="torch.distributed is disabled")
    base = args.dir or Path.cwd()
    base.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="bench-checkpoint-", dir=base))
    print("\n".join(header("hpcflow checkpoint benchmark", root)), flush=True)
    try:
        probe_bytes = min(int(args.size_gib * GIB), 256 * 2**20)
        probe_write_s, probe_read_s = raw_write_read_s(root / "probe.bin", probe_bytes)
        speeds = checksum_speeds()
        print(f"disk:     raw write + fsync {probe_bytes / GIB / probe_write_s:.3f} GiB/s, raw read "
              f"{probe_bytes / GIB / probe_read_s:.3f} GiB/s ({probe_bytes >> 20} MiB, first "
              f"probe; medians below); cores usable {len(os.sched_getaffinity(0))}, load "
              f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}")
        print("checksum: " + ", ".join(f"{name} {v:.2f} GiB/s" for name, v in speeds.items())
              + " (in memory, one core)", flush=True)
        measured = measure(args, root)
        measured["checksums"] = speeds
        figures = report(measured)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
