"""A researcher's own FSDP2 training loop that joins hpcflow's protocol with the public API only.

Run on every rank (srun or torchrun). Prints, on rank 0, ``user-done {"params_sha256", ...}``
when training is complete. The data of each step comes from the step number alone, so an
interrupted and resumed run must end with the same parameters and optimizer state as an
uninterrupted one.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from torch.distributed.fsdp import fully_shard

from hpcflow.runtime import Run, optimizer_sha256, params_sha256


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--step-time-s", type=float, default=0.0)
    args = parser.parse_args()

    with Run.from_env() as run:
        torch.manual_seed(0)
        model = torch.nn.Sequential(
            torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Dropout(0.1), torch.nn.Linear(32, 1)
        )
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer)
        fully_shard(model)
        optim = torch.optim.AdamW(model.parameters(), lr=1e-2)
        sched = torch.optim.lr_scheduler.StepLR(optim, step_size=5, gamma=0.9)
        state = {"model": model, "optim": optim, "sched": sched}

        step = run.restore(state)
        while step < args.steps:
            data = torch.Generator().manual_seed(1000 * step + run.env.rank)
            x = torch.randn(8, 16, generator=data)
            loss = torch.nn.functional.mse_loss(model(x), x.sum(dim=1, keepdim=True))
            loss.backward()
            optim.step()
            optim.zero_grad()
            sched.step()
            time.sleep(args.step_time_s)
            step += 1
            run.step_done(step, state, {"loss": loss.item()})

        digests = {"params_sha256": params_sha256(model),
                   "optim_sha256": optimizer_sha256(model, optim), "step": step}
        if run.env.is_rank0:
            print("user-done " + json.dumps(digests), flush=True)


if __name__ == "__main__":
    main()
