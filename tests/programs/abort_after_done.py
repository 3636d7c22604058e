"""A small loop on the public Run API whose rank ``ABORT_AFTER_DONE_RANK`` aborts right after
training is done and the final checkpoint is committed: what a rank that hits "terminate called
without an active exception" in its process-group teardown looks like to srun (SIGABRT, 134).

The knob is this test program's, not the runtime's. Rank 0 prints ``user-done {"step": N}``.
"""

from __future__ import annotations

import argparse
import json
import os

import torch

from hpcflow.runtime import Run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    with Run.from_env() as run:
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 1)
        optim = torch.optim.SGD(model.parameters(), lr=0.1)
        state = {"model": model, "optim": optim}
        step = run.restore(state)
        while step < args.steps:
            model(torch.randn(2, 4)).pow(2).mean().backward()
            optim.step()
            optim.zero_grad()
            step += 1
            run.step_done(step, state)
        run.finish(state)
        if run.env.is_rank0:
            print("user-done " + json.dumps({"step": step}), flush=True)
        if os.environ.get("ABORT_AFTER_DONE_RANK") == str(run.env.rank):
            os.abort()


if __name__ == "__main__":
    main()
