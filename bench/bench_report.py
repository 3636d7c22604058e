"""Benchmark: ``hpcflow report``'s reading and building time against the size of the ledger.

A synthetic job of ``--events`` ledger events (attempts of ten events each: a start, a signal,
network, interval and step-end records, a requeue) and a log with one program start and ten
steps per attempt is written to a temporary run directory; the ledger is read and decoded
(:func:`hpcflow.ledger.read_ledger`) and the report built (:func:`hpcflow.jobs.report.build_report`),
each timed over ``--repeats`` runs (median). The same is done for a tenth of the events, so the
two rates side by side show whether the work grows linearly: seconds per 10,000 events should
be about the same at both sizes (a quadratic report was 58 s for 20,000 attempts).

It never fails on time: it prints the figures.

Usage: python bench/bench_report.py [--events 100000] [--repeats 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from machine import header, median

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hpcflow import ledger  # noqa: E402
from hpcflow import protocol as P  # noqa: E402
from hpcflow.jobs.report import build_report  # noqa: E402

EVENTS_PER_ATTEMPT = 10
T0 = 1_700_000_000


def write_job(run_dir: Path, events: int) -> tuple[Path, str]:
    """A ledger of ``events`` events and the matching log text; returns the ledger's path."""
    path = P.ledger_path(run_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines, log = [], []
    for restart in range(events // EVENTS_PER_ATTEMPT):
        t = T0 + restart * 100
        common = {"job_id": "1", "restart": restart}
        lines.append(ledger.event_line(P.EVENT_ATTEMPT_START, time_s=t, nodelist="n[1-2]",
                                       **common))
        lines.append(ledger.event_line(P.EVENT_NETWORK, time_s=t + 1, summary="NCCL over EFA",
                                       **common))
        for k in range(6):
            lines.append(ledger.event_line("mirror_done", time_s=t + 2 + k, step=restart * 10 + k,
                                           bytes=100, lag_s=0.5, **common))
        lines.append(ledger.event_line(P.EVENT_SIGNAL, time_s=t + 60, signal="USR1", **common))
        lines.append(ledger.event_line(P.EVENT_REQUEUE, time_s=t + 90, step=restart * 10 + 9,
                                       **common))
        log.append(f"hpcflow: 2026-01-01T00:00:00+0000 job 1 attempt {restart} on n1: start")
        log.append(f"{P.TAG_START} {{}}")
        log += [f'{P.TAG_STEP} {{"step": {restart * 10 + k}, "step_time_s": 1.0}}'
                for k in range(10)]
    path.write_text("".join(lines))
    return path, "\n".join(log) + "\n"


def time_one(run_dir: Path, events: int, repeats: int) -> dict[str, float]:
    path, log = write_job(run_dir, events)
    reads, builds = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        decoded = ledger.read_ledger(path, job_id="1")
        mid = time.perf_counter()
        build_report("1", submitted_at=T0, events=decoded.events, log_text=log,
                     now_s=T0 + events * 10, alive=False)
        end = time.perf_counter()
        reads.append(mid - start)
        builds.append(end - mid)
    read_s, build_s = median(reads), median(builds)
    return {"events": events, "read_s": read_s, "build_s": build_s,
            "s_per_10k_events": (read_s + build_s) * 10_000 / events}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000, help="ledger events (largest size)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per size (median)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print("\n".join(header("report over a ledger of many events", Path(tmp))))
        rows = [time_one(Path(tmp) / f"r{n}", n, args.repeats)
                for n in (max(EVENTS_PER_ATTEMPT, args.events // 10), args.events)]
    for row in rows:
        print(f"{row['events']:>8} events: read {row['read_s']:.3f} s, build {row['build_s']:.3f} s, "
              f"{row['s_per_10k_events']:.3f} s per 10,000 events")
    ratio = rows[1]["s_per_10k_events"] / max(rows[0]["s_per_10k_events"], 1e-9)
    print(f"growth: {ratio:.2f}x the seconds per 10,000 events at 10x the events "
          "(1 = linear)")
    if args.json:
        args.json.write_text(json.dumps({"sizes": rows, "growth": ratio}, indent=1) + "\n")


if __name__ == "__main__":
    main()
