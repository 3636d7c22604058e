"""A PyTorch Lightning script made preemption-safe with hpcflow's callback.

A small regression model on fixed random data. The lines marked ``# hpcflow`` are what hpcflow
adds; Lightning's own SLURM auto-requeue is turned off, as hpcflow requires. Run with
``hpcflow submit lightning-fit.yaml``.
"""

from __future__ import annotations

import argparse

import lightning.pytorch as pl
import torch
from lightning.pytorch.plugins.environments import SLURMEnvironment

from hpcflow.runtime import Run  # hpcflow
from hpcflow.runtime.lightning import HpcflowCallback, latest_checkpoint  # hpcflow


class Regressor(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(),
                                       torch.nn.Linear(64, 1))

    def training_step(self, batch, batch_idx):  # noqa: ANN001, ANN201
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):  # noqa: ANN201
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--devices", type=int, default=1, help="ranks per node")
    parser.add_argument("--nodes", type=int, default=1)
    args = parser.parse_args()

    with Run.from_env(join_process_group=False) as run:  # hpcflow: Lightning makes the group
        x = torch.randn(4096, 16, generator=torch.Generator().manual_seed(0))
        loader = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(x, x.sum(dim=1, keepdim=True)), batch_size=32,
            shuffle=True)
        trainer = pl.Trainer(
            devices=args.devices, num_nodes=args.nodes, max_steps=args.steps, logger=False,
            enable_checkpointing=False, enable_progress_bar=False,
            plugins=[SLURMEnvironment(auto_requeue=False)] if SLURMEnvironment.detect() else [],
            callbacks=[HpcflowCallback(run)],  # hpcflow
        )
        trainer.fit(Regressor(), loader,
                    ckpt_path=latest_checkpoint(run.config.checkpoint_dir))  # hpcflow


if __name__ == "__main__":
    main()
