"""PyTorch Lightning under hpcflow's protocol: a ``Callback`` that agrees, saves, commits, leaves.

Lightning makes the process group itself (its ``SLURMEnvironment`` reads ``SLURM_PROCID``,
``SLURM_NTASKS``, ...). Its own SLURM auto-requeue must be off: with ``auto_requeue=True`` (its
default under Slurm) it installs a USR1 handler that saves and runs ``scontrol requeue`` itself,
and then it and hpcflow fight over the signal and the requeue (Lightning docs, "Run on an
on-prem cluster (advanced)", "Wall time auto-resubmit"). :meth:`HpcflowCallback.setup` refuses a
trainer that has it on; pass ``plugins=[SLURMEnvironment(auto_requeue=False)]``.

What the callback does at the end of every training batch (collective):

- reports the step (``hpcflow-step``);
- all-reduces the stop bit (USR1 or the flag file);
- saves on the job spec's interval, and on a stop: ``trainer.save_checkpoint`` into
  ``step_<N>.ckpt.tmp`` (rank 0 writes under DDP), then after a barrier rank 0 renames it to
  ``step_<N>.ckpt`` (atomic, POSIX ``rename(2)``) and keeps the newest ``HPCFLOW_CHECKPOINT_KEEP``;
- on a stop, the commit file for the batch script and
  :class:`~hpcflow.runtime.run.Preempted` (exit 75 on every rank).

:func:`latest_checkpoint` gives ``trainer.fit(..., ckpt_path=...)`` the newest complete one.
Needs the ``lightning`` extra.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

try:  # the unified package, else the standalone one (same API)
    from lightning.pytorch.callbacks import Callback
    from lightning.pytorch.plugins.environments import SLURMEnvironment
except ImportError:  # pragma: no cover - depends on what is installed
    from pytorch_lightning.callbacks import Callback
    from pytorch_lightning.plugins.environments import SLURMEnvironment

from hpcflow.protocol import LIGHTNING_CHECKPOINT_RE, TAG_CHECKPOINT
from hpcflow.runtime import dist as hdist
from hpcflow.runtime.lines import emit
from hpcflow.runtime.run import Run

_CKPT_RE = LIGHTNING_CHECKPOINT_RE


class HpcflowCallback(Callback):
    """Joins a Lightning ``Trainer`` to the protocol (see the module docstring).

    Args:
        run: the rank's ``Run.from_env(join_process_group=False)``: Lightning makes the group.
        dirpath: where checkpoints go; default the job's ``HPCFLOW_CHECKPOINT_DIR``, else
            ``checkpoints`` in the current folder (a run outside an hpcflow job).
    """

    def __init__(self, run: Run, dirpath: str | os.PathLike[str] | None = None) -> None:
        root = dirpath or run.config.checkpoint_dir or "checkpoints"
        self.run = run
        self.dirpath = Path(root)

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        # The environment Lightning's own signal connector consults before it takes USR1
        # (lightning.pytorch.trainer.connectors.signal_connector); a single-device strategy
        # has none of its own.
        connector = getattr(trainer, "_accelerator_connector", None)
        env = getattr(connector, "cluster_environment", None) or getattr(
            trainer.strategy, "cluster_environment", None)
        if isinstance(env, SLURMEnvironment) and env.auto_requeue:
            raise ValueError(
                "Lightning's SLURM auto-requeue is on: it would take USR1 and requeue the job "
                "itself, against hpcflow. Build the Trainer with "
                "plugins=[SLURMEnvironment(auto_requeue=False)]"
            )

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        if trainer.ckpt_path:  # resumed: the loops are restored already
            self.run.report_resume(int(trainer.global_step))

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        step = int(trainer.global_step)
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        metrics = {"loss": float(loss)} if loss is not None and loss.numel() == 1 else {}
        self.run.report_step(step, metrics)
        stop = self.run.should_stop()
        interval = self.run.config.checkpoint_interval
        if stop or (interval and step % interval == 0):
            started = time.monotonic()
            self.save(trainer, step)
            emit(self.run.env, TAG_CHECKPOINT, {
                "step": step, "reason": "preempt" if stop else "interval",
                "save_s": time.monotonic() - started, "async": False})
        if stop:
            self.run.leave_preempted(step)

    def save(self, trainer: Any, step: int) -> Path:
        """Save ``step_<step>.ckpt`` so that it is complete or absent (collective)."""
        final = self.dirpath / f"step_{step}.ckpt"
        if final.exists():
            return final
        tmp = final.with_name(final.name + ".tmp")
        self.dirpath.mkdir(parents=True, exist_ok=True)
        trainer.save_checkpoint(str(tmp))  # every rank calls it; rank 0 writes under DDP
        hdist.barrier()
        if self.run.env.is_rank0:
            from hpcflow.fsutil import commit_file

            commit_file(tmp, final)
            for old in _committed(self.dirpath)[:-self.run.config.checkpoint_keep]:
                old.unlink(missing_ok=True)
        hdist.barrier()
        return final


def latest_checkpoint(dirpath: str | os.PathLike[str] | None) -> str | None:
    """The newest complete ``step_<N>.ckpt`` under ``dirpath`` (``*.tmp`` are never used), or
    ``None``. Reads the folder only: safe before Lightning has made its process group."""
    if dirpath is None or not Path(dirpath).is_dir():
        return None
    found = _committed(Path(dirpath))
    return str(found[-1]) if found else None


def _committed(root: Path) -> list[Path]:
    steps = sorted((int(m[1]), p) for p in root.iterdir() if (m := _CKPT_RE.fullmatch(p.name)))
    return [p for _, p in steps]
