"""A plain PyTorch DDP script that knows nothing of hpcflow: its own ``torch.save`` checkpoint
every few steps, resumed when present. It must never be harmed by hpcflow's protocol.

Rank and world size come from srun (SLURM_PROCID, SLURM_NTASKS); MASTER_ADDR and MASTER_PORT
from the job's environment. Rank 0 prints ``plain-step N`` after each step,
``plain-resume N`` when it resumed, and ``plain-done N`` at the end.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--save-every", type=int, default=5)
    parser.add_argument("--step-time-s", type=float, default=0.5)
    parser.add_argument("--ckpt", required=True)
    args = parser.parse_args()

    rank, world = int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"])
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(8, 1))
    optim = torch.optim.SGD(model.parameters(), lr=0.01)
    start = 0
    if os.path.exists(args.ckpt):
        saved = torch.load(args.ckpt, weights_only=True)
        model.module.load_state_dict(saved["model"])
        optim.load_state_dict(saved["optim"])
        start = saved["step"]
        if rank == 0:
            print(f"plain-resume {start}", flush=True)
    for step in range(start + 1, args.steps + 1):
        x = torch.randn(4, 8)
        loss = model(x).pow(2).mean()
        loss.backward()
        optim.step()
        optim.zero_grad()
        time.sleep(args.step_time_s)
        if rank == 0:
            print(f"plain-step {step}", flush=True)
            if step % args.save_every == 0:
                tmp = args.ckpt + ".tmp"
                torch.save({"model": model.module.state_dict(), "optim": optim.state_dict(),
                            "step": step}, tmp)
                os.replace(tmp, args.ckpt)
        dist.barrier()
    if rank == 0:
        print(f"plain-done {args.steps}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
