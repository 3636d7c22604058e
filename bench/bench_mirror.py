"""Benchmark: training step time with and without an S3 checkpoint mirror in flight.

Goal (two-phase checkpoints): step time while the mirror uploads / step time without <= 1.1,
medians, measured side by side in one run; it never fails on time.

Set-up, all on this machine: a moto S3 server on loopback (``moto_server``; run at the lowest
CPU priority, as a stand-in for S3, which is not on the training node), the mirror process as the
batch script starts it (``python -m hpcflow.mirror watch``, at nice 19, 4 transfers in flight, 8 MiB
parts), and a stand-in training loop in this process: matrix products on one thread (torch), one
"step" = ``--matmuls`` products of 512 x 512 float32.

Each round: ``--steps`` steps with no upload (baseline), then a new committed checkpoint of
``--size-mib`` MiB appears in the checkpoint folder (``hpcflow.runtime.commit``, as the runtime
commits). The steps until the mirror's ``mirror_start`` ledger event (the mirror has not seen the
checkpoint yet: it polls every 0.5 s) belong to neither window and are counted apart, as are the
steps from ``mirror_start`` until the first byte is sent (the mirror hashes the first file
first; ``mirror_done``'s ``first_byte_s``). From the first byte to ``mirror_done`` the steps are
"in flight": the mirror uploads, hashing the next files meanwhile. Then ``--steps`` more
baseline steps (before and after, so a drift of the machine's load cancels). The ledger is read
after every step, so each window edge is known to within one step. Reported: median step time of each
window, their ratio (and the median of per-round ratios), upload MiB/s and the lag from commit
to S3 record.

Usage: python bench/bench_mirror.py [--size-mib 256] [--rounds 3] [--steps 60] [--small]
       [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from machine import header, median, verdict

GOAL_RATIO = 1.1


def start_moto() -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exe = Path(sys.executable).with_name("moto_server")
    cmd = [str(exe) if exe.exists() else "moto_server", "-H", "127.0.0.1", "-p", str(port)]
    proc = subprocess.Popen(["nice", "-n", "19", *cmd], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url + "/moto-api/", timeout=1).read()
            return proc, url
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("moto_server did not start")


def commit_unit(root: Path, step: int, size_mib: int) -> None:
    """A committed ``step_<step>/`` of ``size_mib`` MiB in 4 shard files (random bytes)."""
    from hpcflow.runtime import commit as ckpt_dirs

    tmp = ckpt_dirs.fresh_tmp_dir(root, step)
    per = size_mib * 2**20 // 4
    for rank in range(4):
        (tmp / f"__{rank}_0.distcp").write_bytes(os.urandom(per))
    (tmp / ckpt_dirs.DCP_METADATA).write_bytes(b"m" * 512)
    ckpt_dirs.commit(root, step, world_size=4)


def mirror_event(ledger: Path, step: int, names: tuple[str, ...]) -> dict | None:
    """The first ledger event of the mirror for ``step`` whose name is one of ``names``."""
    if not ledger.exists():
        return None
    for line in ledger.read_text().splitlines():
        event = json.loads(line)
        if event.get("event") in names and event.get("step") == step:
            return event
    return None


ENDED = ("mirror_done", "mirror_failed")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=60, help="baseline steps per round")
    parser.add_argument("--matmuls", type=int, default=4, help="512x512 products per step")
    parser.add_argument("--small", action="store_true", help="64 MiB, 2 rounds, 30 steps")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.small:
        args.size_mib, args.rounds, args.steps = 64, 2, 30
    import torch

    torch.set_num_threads(1)
    a, b = torch.randn(512, 512), torch.randn(512, 512)

    def step() -> float:
        started = time.perf_counter()
        for _ in range(args.matmuls):
            a.copy_(torch.tanh(a @ b) * 0.5)
        return time.perf_counter() - started

    work = Path(tempfile.mkdtemp(prefix="bench-mirror-"))
    moto, url = start_moto()
    env = {**os.environ, "AWS_ENDPOINT_URL_S3": url, "AWS_ACCESS_KEY_ID": "bench",
           "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"}
    os.environ.update({k: v for k, v in env.items() if k.startswith("AWS_")})
    from hpcflow.mirror import store

    store.make_client().create_bucket(Bucket="bench-mirror")
    root, ledger = work / "checkpoints", work / "events.jsonl"
    root.mkdir()
    mirror = subprocess.Popen(
        [sys.executable, "-m", "hpcflow.mirror", "watch", "--checkpoint-dir", str(root),
         "--s3-uri", "s3://bench-mirror/run", "--keep", "2", "--ledger", str(ledger),
         "--poll-s", "0.5"], env=env, stderr=subprocess.DEVNULL)
    base_all, flight_all, waiting, hashing, ratios, rates, lags = [], [], [], [], [], [], []
    try:
        for _ in range(20):  # warm-up
            step()
        for r in range(1, args.rounds + 1):
            base = [step() for _ in range(args.steps)]
            commit_unit(root, r, args.size_mib)
            timed, deadline = [], time.monotonic() + 600
            while (mirror_event(ledger, r, ("mirror_start", *ENDED)) is None
                   and time.monotonic() < deadline):
                waiting.append(step())
            seen_start = time.monotonic()
            while (done := mirror_event(ledger, r, ENDED)) is None and time.monotonic() < deadline:
                timed.append((step(), time.monotonic()))
            if done is None or done["event"] != "mirror_done":
                raise SystemExit(f"the mirror of round {r} did not complete: {done}")
            # The window opens at the first byte sent (the mirror hashes the first file first).
            first_byte = seen_start + float(done.get("first_byte_s") or 0.0)
            hashing += [d for d, end in timed if end < first_byte]
            flight = [d for d, end in timed if end >= first_byte]
            if not flight:
                raise SystemExit(f"round {r}: the upload ended within one step; use a larger "
                                 "--size-mib")
            base += [step() for _ in range(args.steps)]  # after as well: cancels drift
            base_all += base
            flight_all += flight
            ratios.append(median(flight) / median(base))
            rates.append(done["bytes"] / 2**20 / done["upload_s"])
            lags.append(done["lag_s"])
    finally:
        mirror.terminate()
        mirror.wait(60)
        moto.terminate()
        moto.wait(30)
        shutil.rmtree(work, ignore_errors=True)
    ratio = median(flight_all) / median(base_all)
    lines = header("S3 checkpoint mirror vs training step time", None) + [
        f"set-up:   moto_server on loopback (nice 19), mirror process (nice 19, 4 in flight, "
        f"8 MiB parts), checkpoint {args.size_mib} MiB in 4 files, {args.rounds} rounds",
        f"step without a mirror in flight: median {1e3 * median(base_all):.2f} ms "
        f"({len(base_all)} steps)",
        f"step with the mirror uploading:  median {1e3 * median(flight_all):.2f} ms "
        f"({len(flight_all)} steps, first byte sent to mirror_done)",
        f"left out: {len(waiting)} steps between the commit and mirror_start (the mirror's poll)"
        + (f", median {1e3 * median(waiting):.2f} ms" if waiting else "")
        + f"; {len(hashing)} steps from mirror_start to the first byte (hashing the first file)"
        + (f", median {1e3 * median(hashing):.2f} ms" if hashing else ""),
        f"ratio with / without: {ratio:.3f} (median of per-round ratios "
        f"{median(ratios):.3f}) -> {verdict(ratio, GOAL_RATIO, at_least=False)}",
        f"upload: median {median(rates):.1f} MiB/s; lag commit -> S3 record: median "
        f"{median(lags):.2f} s",
    ]
    print("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps({
            "base_median_s": median(base_all), "flight_median_s": median(flight_all),
            "ratio": ratio, "round_ratios": ratios, "upload_mib_s": rates, "lag_s": lags,
            "steps_before_mirror_start": len(waiting), "steps_hashing": len(hashing)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
