"""A Lightning script (a tiny MLP on fixed random data) made preemption-safe with hpcflow's
callback. Rank 0 prints ``pl-done {"params_sha256", "step"}`` at the end."""

from __future__ import annotations

import argparse
import json
import time

import lightning.pytorch as pl
import torch
from lightning.pytorch.plugins.environments import SLURMEnvironment

from hpcflow.runtime import Run, params_sha256
from hpcflow.runtime.lightning import HpcflowCallback, latest_checkpoint


class Regressor(pl.LightningModule):
    def __init__(self, step_time_s: float) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(),
                                       torch.nn.Dropout(0.1), torch.nn.Linear(32, 1))
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
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--devices", type=int, default=1)
    args = parser.parse_args()

    with Run.from_env(join_process_group=False) as run:
        pl.seed_everything(0, workers=True)
        data = torch.Generator().manual_seed(3)
        x = torch.randn(256, 8, generator=data)
        loader = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(x, x.sum(dim=1, keepdim=True)), batch_size=8,
            shuffle=True, generator=torch.Generator().manual_seed(5))
        model = Regressor(args.step_time_s)
        trainer = pl.Trainer(
            accelerator="cpu", devices=args.devices, num_nodes=args.nodes, strategy="ddp",
            max_steps=args.steps,
            plugins=[SLURMEnvironment(auto_requeue=False)] if SLURMEnvironment.detect() else [],
            callbacks=[HpcflowCallback(run)], enable_checkpointing=False, logger=False,
            enable_progress_bar=False, enable_model_summary=False, deterministic=True,
        )
        trainer.fit(model, loader, ckpt_path=latest_checkpoint(run.config.checkpoint_dir))
        digest = params_sha256(model)
        if run.env.is_rank0:
            print("pl-done " + json.dumps({"params_sha256": digest,
                                           "step": trainer.global_step}), flush=True)


if __name__ == "__main__":
    main()
