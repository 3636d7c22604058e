"""The hang watchdog the batch script runs beside each training step (docs/protocol.md, "Hangs
and in-job restarts")::

    python -m hpcflow.watchdog --heartbeat-dir DIR --ntasks N --run-dir RUN --job-id J \\
        --restart R --try T [--startup-s S --checkpoint-s S --step-floor-s S --step-factor K
        --warmup-steps W --step-s S --interval-s S --poll-s S]

It polls the ranks' heartbeats (:mod:`hpcflow.runtime.heartbeat`). On a hang
(:func:`hpcflow.watchdog.hang.find_hang`) it writes every rank's stacks to
``<run_dir>/hang-<job>-<restart>-<try>.txt``, appends a ``hang`` event to the ledger, leaves
``hang.json`` in the heartbeat folder for the batch script, and ends the step (``scancel
<job>.<step>``: the step, never the job; scancel(1)), then exits 0. It does nothing until the
first heartbeat appears (a program that does not use the runtime is never judged). The batch
script stops it when the step ends. Exit 2: bad arguments.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from hpcflow import fsutil, ledger, protocol
from hpcflow.watchdog.hang import Hang, Timeouts, find_hang
from hpcflow.watchdog.stacks import collect, stopped_ranks


def read_beats(directory: Path) -> dict[int, dict[str, Any]]:
    """rank -> last heartbeat, from ``<rank>.json`` files (unreadable ones are skipped)."""
    out: dict[int, dict[str, Any]] = {}
    for path in directory.glob("*.json"):
        if not path.stem.isdigit():
            continue
        try:
            obj = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(obj, dict):
            out[int(path.stem)] = obj
    return out


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m hpcflow.watchdog", description=__doc__.split("::")[0])
    p.add_argument("--heartbeat-dir", type=Path, required=True)
    p.add_argument("--ntasks", type=int, required=True)
    p.add_argument("--run-dir", type=Path, required=True)
    p.add_argument("--job-id", required=True)
    p.add_argument("--restart", type=int, default=0)
    p.add_argument("--try", dest="try_", type=int, default=0)
    # The settings come from the job spec (hpcflow.slurm.render.watchdog_options): no defaults.
    p.add_argument("--startup-s", type=float, required=True)
    p.add_argument("--checkpoint-s", type=float, required=True)
    p.add_argument("--step-floor-s", type=float, required=True)
    p.add_argument("--step-factor", type=float, required=True)
    p.add_argument("--warmup-steps", type=int, required=True)
    p.add_argument("--step-s", type=float, default=None, help="fixed; default: derived")
    p.add_argument("--interval-s", type=float, required=True)
    p.add_argument("--poll-s", type=float, default=1.0)
    args = p.parse_args(argv)
    if args.ntasks < 1 or args.poll_s <= 0 or args.interval_s <= 0:
        p.error("--ntasks must be at least 1, --poll-s and --interval-s positive")
    return args


def end_step(job_id: str, beats: dict[int, dict[str, Any]]) -> None:
    """Kill the step the ranks run in (their ``SLURM_STEP_ID``), once their stacks are written.

    KILL, not TERM: the runtime takes TERM as a stop request (Slurm's own preemption sends it),
    so a TERMed step of a program on the runtime would checkpoint and read as a preemption,
    not as the hang it is."""
    steps = sorted({str(b.get("slurm_step_id", "")) for b in beats.values()} - {""})
    if not steps:  # not under srun: nothing to cancel
        return
    for step in steps:
        subprocess.run(["scancel", "--signal=KILL", f"{job_id}.{step}"],
                       capture_output=True, check=False, timeout=60)


def handle(args: argparse.Namespace, beats: dict[int, dict[str, Any]], hang: Hang) -> None:
    """Stacks to the run directory, the ledger event, the marker, then the step's end."""
    now = time.time()
    name = protocol.stacks_name(args.job_id, args.restart, args.try_)
    stopped = [r for r in stopped_ranks(beats, args.job_id) if r in hang.ranks]
    first = stopped[0] if stopped else hang.first
    stacks = collect(beats, args.heartbeat_dir, args.job_id, now)
    (args.run_dir / name).write_text(stacks, encoding="utf-8")
    fields = {"try": args.try_, "section": hang.section, "ranks": hang.ranks, "first": first,
              "stopped": stopped, "step": hang.step, "timeout_s": round(hang.timeout_s, 3),
              "stacks": name}
    ledger.append_event(protocol.ledger_path(args.run_dir), protocol.EVENT_HANG,
                        job_id=args.job_id, restart=args.restart, time_s=int(now), **fields)
    marker = ledger.event_line(protocol.EVENT_HANG, job_id=args.job_id, restart=args.restart,
                               time_s=int(now), **fields)
    fsutil.write_atomic(args.heartbeat_dir / protocol.HANG_MARKER, marker)
    print(f"hpcflow-watchdog: hang in section {hang.section} (ranks {hang.ranks} silent for more "
          f"than {hang.timeout_s:.1f} s); stacks in {name}; ending the step", file=sys.stderr,
          flush=True)
    end_step(args.job_id, beats)


def main(argv: list[str] | None = None) -> int:
    """Watch until a hang is handled (0) or the batch script stops it."""
    args = _args(argv)
    t = Timeouts(startup_s=args.startup_s, checkpoint_s=args.checkpoint_s,
                 step_floor_s=args.step_floor_s, step_factor=args.step_factor,
                 warmup_steps=args.warmup_steps, step_s=args.step_s, interval_s=args.interval_s)
    armed_at: float | None = None
    while True:
        time.sleep(args.poll_s)
        beats = read_beats(args.heartbeat_dir)
        if not beats:
            continue
        now = time.time()
        armed_at = armed_at or now
        hang = find_hang(beats, args.ntasks, now, armed_at, t)
        if hang is not None:
            handle(args, beats, hang)
            return 0


if __name__ == "__main__":
    sys.exit(main())
