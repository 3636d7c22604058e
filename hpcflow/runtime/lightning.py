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

SIGTERM is a warning like USR1 (Slurm's own preemption, a SageMaker stop or spot interruption,
which sends it 120 s before the end). Lightning 2.x installs a SIGTERM handler of its own when
fit starts (``trainer/connectors/signal_connector.py``): it broadcasts from inside the handler
and ends the fit with ``SIGTERMException`` at the next batch, without a checkpoint. The callback
puts hpcflow's handler back at ``on_train_start`` (Lightning restores the handlers it found when
fit ends), so TERM is acted on at the next step boundary like USR1.

With a checkpoint folder per host (a SageMaker job of several instances, where each container
syncs its own folder with the one S3 prefix), the first rank of every host removes the
checkpoints rank 0 pruned, so that SageMaker's sync removes them from S3 too.

:func:`latest_checkpoint` gives ``trainer.fit(..., ckpt_path=...)`` the newest complete one.
Lightning's checkpoint holds the model, the optimizer, the loops' progress and the state of a
stateful train loader (one with ``state_dict``/``load_state_dict``), written by rank 0 alone: a
resumed run repeats the uninterrupted one exactly when nothing else (a plain loader's order,
dropout's random streams) depends on state it does not save.
Needs the ``lightning`` extra.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

try:  # the unified package, else the standalone one (same API)
    from lightning.pytorch.callbacks import Callback
    from lightning.pytorch.plugins.environments import SLURMEnvironment
except ImportError:  # pragma: no cover - depends on what is installed
    from pytorch_lightning.callbacks import Callback
    from pytorch_lightning.plugins.environments import SLURMEnvironment

from hpcflow.errors import CheckpointError
from hpcflow.protocol import LIGHTNING_CHECKPOINT_RE, TAG_CHECKPOINT
from hpcflow.runtime import adapter_files as files
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
        take_back_sigterm(self.run.monitor, trainer)
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
        if hdist.broadcast_object(final.exists()):  # rank 0's folder decides for every host
            return final
        tmp = final.with_name(final.name + ".tmp")
        self.dirpath.mkdir(parents=True, exist_ok=True)
        trainer.save_checkpoint(str(tmp))  # every rank calls it; rank 0 writes under DDP
        hdist.barrier()
        oldest, error = None, None
        if self.run.env.is_rank0:
            from hpcflow.fsutil import commit_file

            try:
                commit_file(tmp, final)
                oldest = files.oldest_kept((s for s, _ in files.steps_in(self.dirpath, _CKPT_RE)),
                                           self.run.config.checkpoint_keep)
            except OSError as exc:
                error = f"commit of {final} failed: {exc}"
        oldest, error = hdist.broadcast_object((oldest, error))
        env = self.run.env
        if error is None and oldest is not None and files.is_keeper(
                env.rank, env.local_rank, self.run.config.checkpoint_host_local):
            try:
                for old_step, path in files.steps_in(self.dirpath, _CKPT_RE):
                    if old_step < oldest:
                        path.unlink(missing_ok=True)
            except OSError as exc:
                error = f"removing checkpoints older than step {oldest} failed: {exc}"
        first = next((e for e in files.all_gather(error) if e), None)
        if first is not None:
            raise CheckpointError(first)
        return final


def take_back_sigterm(monitor: Any, trainer: Any) -> bool:
    """Put hpcflow's SIGTERM handler back in place of the one Lightning installed when fit
    started (see the module docstring), and forget a TERM Lightning noted already (Lightning's
    handler called hpcflow's too, so the monitor has it). Main thread only (Python ``signal``).

    Args:
        monitor: the run's :class:`~hpcflow.runtime.preemption.PreemptionMonitor`.
        trainer: the Lightning trainer.

    Returns:
        True when hpcflow's handler had been replaced and is back.
    """
    ours = getattr(monitor, "_on_signal", None)
    if (ours is None or not monitor.installed
            or threading.current_thread() is not threading.main_thread()):
        return False
    replaced = signal.getsignal(signal.SIGTERM) != ours
    if replaced:
        signal.signal(signal.SIGTERM, ours)
    connector = getattr(trainer, "_signal_connector", None)
    if getattr(connector, "received_sigterm", False):
        connector.received_sigterm = False
    return replaced


def latest_checkpoint(dirpath: str | os.PathLike[str] | None) -> str | None:
    """The newest complete ``step_<N>.ckpt`` under ``dirpath``, or ``None``; ``*.tmp`` files
    (a save cut short) are never used and are removed. Reads this host's folder only: safe
    before Lightning has made its process group. In a SageMaker job every host's folder holds
    the union SageMaker synced back, so every host finds the same one."""
    if dirpath is None or not Path(dirpath).is_dir():
        return None
    for path in Path(dirpath).glob("step_*.ckpt.tmp"):
        path.unlink(missing_ok=True)
    found = files.steps_in(Path(dirpath), _CKPT_RE)
    return str(found[-1][1]) if found else None
