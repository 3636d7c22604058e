"""A Lightning script made preemption-safe with hpcflow's callback, written so that a resumed
run can repeat an uninterrupted one exactly: no dropout, and a train loader that says where it
is (``state_dict``/``load_state_dict``: Lightning saves and restores it with the loops).
Rank 0 prints ``pl-done {"params_sha256", "step"}`` at the end."""

from __future__ import annotations

import argparse
import json
import time

import lightning.pytorch as pl
import torch

from hpcflow.runtime import Run, params_sha256
from hpcflow.runtime.lightning import HpcflowCallback, latest_checkpoint


class Positioned:
    """This rank's share of a fixed data set, in batches, remembering how many it has given."""

    def __init__(self, rank: int, world: int, batch: int = 8, samples: int = 512) -> None:
        data = torch.Generator().manual_seed(3)
        x = torch.randn(samples, 8, generator=data)
        order = torch.randperm(samples, generator=data)[rank::world]
        self.x, self.y = x[order], x[order].sum(dim=1, keepdim=True)
        self.batch = batch
        self.given = 0
        self._resume = 0

    def __len__(self) -> int:
        return len(self.x) // self.batch

    def __iter__(self):  # noqa: ANN204
        start, self._resume = self._resume, 0
        for i in range(start, len(self)):
            self.given = i + 1
            part = slice(i * self.batch, (i + 1) * self.batch)
            yield self.x[part], self.y[part]

    def state_dict(self) -> dict:
        return {"given": self.given}

    def load_state_dict(self, state: dict) -> None:
        self._resume = self.given = int(state["given"])


class Regressor(pl.LightningModule):
    def __init__(self, step_time_s: float) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(),
                                       torch.nn.Linear(32, 1))
        self.step_time_s = step_time_s

    def training_step(self, batch, batch_idx):  # noqa: ANN001, ANN201
        x, y = batch
        time.sleep(self.step_time_s)
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):  # noqa: ANN201
        return torch.optim.AdamW(self.parameters(), lr=1e-2)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--step-time-s", type=float, default=0.0)
    args = parser.parse_args()

    with Run.from_env(join_process_group=False) as run:
        pl.seed_everything(0)
        model = Regressor(args.step_time_s)
        trainer = pl.Trainer(
            accelerator="cpu", devices=run.env.local_world_size,
            num_nodes=run.env.world_size // run.env.local_world_size, strategy="ddp",
            max_steps=args.steps, use_distributed_sampler=False,
            callbacks=[HpcflowCallback(run)], enable_checkpointing=False, logger=False,
            enable_progress_bar=False, enable_model_summary=False, deterministic=True,
        )
        trainer.fit(model, Positioned(run.env.rank, run.env.world_size),
                    ckpt_path=latest_checkpoint(run.config.checkpoint_dir))
        digest = params_sha256(model)
        if run.env.is_rank0:
            print("pl-done " + json.dumps({"params_sha256": digest,
                                           "step": trainer.global_step}), flush=True)


if __name__ == "__main__":
    main()
