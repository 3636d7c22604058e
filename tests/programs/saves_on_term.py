"""A script written the way most Slurm guides write one: it saves its state only when it gets
SIGTERM, then exits 0, and resumes from that file when it starts. It knows nothing of hpcflow.

Each task runs the loop; task 0 (``SLURM_PROCID``) owns the state file. Prints ``term-step N``
after each step, ``term-saved N`` on TERM, ``term-resume N`` when it resumed, ``term-done N``.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--step-time-s", type=float, default=0.5)
    parser.add_argument("--state", type=Path, required=True)
    args = parser.parse_args()
    rank0 = os.environ.get("SLURM_PROCID", "0") == "0"
    step = int(args.state.read_text()) if args.state.exists() else 0
    if step and rank0:
        print(f"term-resume {step}", flush=True)

    def save(*_: object) -> None:
        if rank0:
            tmp = args.state.with_suffix(".tmp")
            tmp.write_text(str(step))
            os.replace(tmp, args.state)
            print(f"term-saved {step}", flush=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, save)
    while step < args.steps:
        time.sleep(args.step_time_s)
        step += 1
        if rank0:
            print(f"term-step {step}", flush=True)
    if rank0:
        print(f"term-done {step}", flush=True)


if __name__ == "__main__":
    main()
