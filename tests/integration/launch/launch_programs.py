"""Functions the launch tests submit. They live in a module of their own, importable on the
nodes (the tests put this folder on PYTHONPATH), as a user's training code would be."""

from __future__ import annotations

import os
import time
from typing import Any


def add(a: int, b: int) -> int:
    return a + b


def fsdp_train(cfg: dict[str, Any]) -> dict[str, Any]:
    """A researcher's FSDP2 training function written with hpcflow.runtime.Run: the data of each
    step comes from the step number alone, so a resumed run must end with the same parameters
    and optimizer state as an uninterrupted one. Returns rank 0's digests (every rank returns
    its own)."""
    import torch
    from torch.distributed.fsdp import fully_shard

    from hpcflow.runtime import Run, optimizer_sha256, params_sha256

    with Run.from_env() as run:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                    torch.nn.Dropout(0.1), torch.nn.Linear(32, 1))
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer)
        fully_shard(model)
        optim = torch.optim.AdamW(model.parameters(), lr=1e-2)
        state = {"model": model, "optim": optim}
        step = run.restore(state)
        first = step
        while step < cfg["steps"]:
            data = torch.Generator().manual_seed(1000 * step + run.env.rank)
            x = torch.randn(8, 16, generator=data)
            loss = torch.nn.functional.mse_loss(model(x), x.sum(dim=1, keepdim=True))
            loss.backward()
            optim.step()
            optim.zero_grad()
            time.sleep(cfg.get("step_time_s", 0.0))
            step += 1
            run.step_done(step, state, {"loss": loss.item()})
        return {"params_sha256": params_sha256(model), "optim_sha256": optimizer_sha256(model, optim),
                "step": step, "rank": run.env.rank, "first_step": first,
                "restart": int(os.environ.get("SLURM_RESTART_COUNT", "0"))}


def linear_train(cfg: dict[str, Any]) -> dict[str, Any]:
    """A one-rank training function with hpcflow.runtime.Run (a sweep element): seeded by
    ``cfg["seed"]``; with ``cfg["finish"]`` it ends with ``Run.finish``; returns its parameter
    digest and where this attempt started."""
    import torch

    from hpcflow.runtime import Run, params_sha256

    with Run.from_env() as run:
        torch.manual_seed(cfg["seed"])
        model = torch.nn.Linear(8, 1)
        optim = torch.optim.SGD(model.parameters(), lr=0.05)
        state = {"model": model, "optim": optim}
        step = first = run.restore(state)
        while step < cfg["steps"]:
            x = torch.randn(4, 8, generator=torch.Generator().manual_seed(step))
            loss = (model(x) - x.sum(dim=1, keepdim=True)).pow(2).mean()
            loss.backward()
            optim.step()
            optim.zero_grad()
            time.sleep(cfg.get("step_time_s", 0.0))
            step += 1
            run.step_done(step, state, {"loss": loss.item()})
        if cfg.get("finish"):
            run.finish(state)  # the final checkpoint and the done record
        return {"params_sha256": params_sha256(model), "step": step, "first_step": first,
                "restart": int(os.environ.get("SLURM_RESTART_COUNT", "0")),
                "run_dir": os.environ.get("HPCFLOW_RUN_DIR")}


def fail(message: str) -> None:
    raise ValueError(message)


def sleep_then(seconds: float, value: Any) -> Any:
    """A function that does not join hpcflow's protocol."""
    time.sleep(seconds)
    return value


try:  # submitit is a dependency of hpcflow.launch; this module is also imported without it
    from submitit.helpers import Checkpointable
except ImportError:  # pragma: no cover
    Checkpointable = object  # type: ignore[misc,assignment]


class Counter(Checkpointable):
    """A submitit Checkpointable that counts to n; its whole state is itself."""

    def __init__(self) -> None:
        self.done = 0
        self.starts: list[int] = []

    def __call__(self, n: int, step_s: float = 0.0) -> dict[str, Any]:
        self.starts.append(self.done)
        while self.done < n:
            time.sleep(step_s)
            self.done += 1
        return {"done": self.done, "starts": self.starts}
