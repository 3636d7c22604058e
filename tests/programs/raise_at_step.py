"""A training loop on hpcflow's runtime whose step ``--fail-at`` raises ``ValueError`` on every
rank, every time it is run: a deterministic program error. It saves every ``--interval`` steps
(the job's checkpoint interval) so a committed checkpoint exists before the failure.
"""

from __future__ import annotations

import argparse
import time

import torch

from hpcflow.runtime import Run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--fail-at", type=int, default=7)
    parser.add_argument("--step-time-s", type=float, default=0.1)
    args = parser.parse_args()
    with Run.from_env() as run:
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 1)
        optim = torch.optim.SGD(model.parameters(), lr=0.01)
        state = {"model": model, "optim": optim}
        step = run.restore(state)
        while step < args.steps:
            if step + 1 == args.fail_at:
                raise ValueError(f"bad batch at step {args.fail_at}")
            loss = model(torch.ones(2, 4)).pow(2).mean()
            loss.backward()
            optim.step()
            optim.zero_grad()
            time.sleep(args.step_time_s)
            step += 1
            run.step_done(step, state, {"loss": float(loss)})
        run.finish(state)


if __name__ == "__main__":
    main()
