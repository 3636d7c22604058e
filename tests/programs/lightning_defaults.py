"""A Lightning script as Lightning's Slurm guide teaches it, with no hpcflow code: a default
``Trainer`` (under Slurm, Lightning's ``SLURMEnvironment(auto_requeue=True)`` takes USR1, saves
``hpc_ckpt_<N>.ckpt`` in ``default_root_dir`` and runs ``scontrol requeue`` itself; on the next
start ``fit`` reloads the newest of them by itself). Rank 0 prints ``pl-step <n>`` at every step,
``pl-resumed <n>`` when it starts from a checkpoint, and ``pl-done <n>`` at the end."""

from __future__ import annotations

import argparse
import time

import lightning.pytorch as pl
import torch


class Regressor(pl.LightningModule):
    def __init__(self, step_time_s: float) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
        self.step_time_s = step_time_s

    def on_train_start(self) -> None:
        if self.global_step and self.trainer.is_global_zero:
            print(f"pl-resumed {self.global_step}", flush=True)

    def training_step(self, batch, batch_idx):  # noqa: ANN001, ANN201
        x, y = batch
        time.sleep(self.step_time_s)
        if self.trainer.is_global_zero:
            print(f"pl-step {self.global_step + 1}", flush=True)
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):  # noqa: ANN201
        return torch.optim.SGD(self.parameters(), lr=1e-2)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--step-time-s", type=float, default=0.2)
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--devices", type=int, default=1)
    args = parser.parse_args()
    pl.seed_everything(0)
    x = torch.randn(512, 8, generator=torch.Generator().manual_seed(3))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)),
                                         batch_size=8)
    trainer = pl.Trainer(accelerator="cpu", devices=args.devices, num_nodes=args.nodes,
                         max_steps=args.steps, logger=False, enable_progress_bar=False,
                         enable_model_summary=False, enable_checkpointing=False)
    trainer.fit(Regressor(args.step_time_s), loader)
    if trainer.is_global_zero:
        print(f"pl-done {trainer.global_step}", flush=True)


if __name__ == "__main__":
    main()
