"""Your own training loop, made preemption-safe with hpcflow's runtime API.

An ordinary DistributedDataParallel loop; the lines marked ``# hpcflow`` are all it takes:
join the job, restore the latest committed checkpoint, and report each step boundary. Run it
with ``hpcflow submit my-loop.yaml`` (every rank runs ``python -m my_loop``), or alone with
``python my_loop.py`` (one process, no checkpoints).
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.nn.parallel import DistributedDataParallel

from hpcflow.runtime import Run  # hpcflow


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--step-time-s", type=float, default=0.0,
                        help="extra seconds each step sleeps (a rehearsal's warning then lands "
                             "mid-run on a loop this small)")
    args = parser.parse_args()

    with Run.from_env() as run:  # hpcflow: process group joined, USR1 handler installed
        device = torch.device("cuda", run.env.local_rank) if run.backend == "nccl" else "cpu"
        torch.manual_seed(0)
        model = DistributedDataParallel(torch.nn.Sequential(
            torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 1)).to(device))
        optim = torch.optim.AdamW(model.parameters(), lr=args.lr)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(optim, T_max=args.steps)
        state = {"model": model, "optim": optim, "sched": sched}

        step = run.restore(state)  # hpcflow: 0, or the step of the latest committed checkpoint
        while step < args.steps:
            x = torch.randn(16, 32, device=device)
            loss = torch.nn.functional.mse_loss(model(x), x.mean(dim=1, keepdim=True))
            loss.backward()
            optim.step()
            optim.zero_grad()
            sched.step()
            time.sleep(args.step_time_s)
            step += 1
            run.step_done(step, state, {"loss": loss.item()})  # hpcflow: save or stop here


if __name__ == "__main__":
    main()
