"""Hugging Face ``transformers.Trainer`` under hpcflow's protocol: a ``TrainerCallback``.

The Trainer keeps its own checkpoints (``<output_dir>/checkpoint-<step>/``, written by
``Trainer._save_checkpoint``: model, optimizer, scheduler, each process's RNG, trainer state)
and its own resume (``trainer.train(resume_from_checkpoint=...)``). hpcflow adds what the
Trainer lacks:

- the agreement: at each step end the ranks all-reduce their stop bit (USR1 or the flag file);
  on a stop the callback asks the Trainer to save and to stop;
- the commit: once every rank has written its part (a barrier in ``on_save``), rank 0 writes
  ``hpcflow-commit.json`` into the checkpoint folder. :func:`latest_checkpoint` returns only
  folders that hold it, so a checkpoint is either complete or ignored, and removes the others;
- the leave: after the preemption checkpoint is committed, the commit file for the batch script
  and :class:`~hpcflow.runtime.run.Preempted` (exit 75 on every rank);
- the interval (``HPCFLOW_CHECKPOINT_INTERVAL``) and the retention (``HPCFLOW_CHECKPOINT_KEEP``)
  of the job spec.

Use::

    with Run.from_env(torch_env=True) as run:          # accelerate reads RANK, WORLD_SIZE, ...
        args = TrainingArguments(output_dir=str(run.config.checkpoint_dir), ...)
        trainer = Trainer(model, args, ..., callbacks=[HpcflowCallback(run)])
        trainer.train(resume_from_checkpoint=latest_checkpoint(args.output_dir))

Needs the ``hf`` extra (transformers, accelerate).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from hpcflow.protocol import HF_CHECKPOINT_RE, TAG_CHECKPOINT
from hpcflow.runtime import dist as hdist
from hpcflow.runtime.lines import emit
from hpcflow.runtime.run import Run

#: The Trainer's checkpoint folders (transformers ``PREFIX_CHECKPOINT_DIR``).
_CHECKPOINT_RE = HF_CHECKPOINT_RE
COMMIT_MARKER = "hpcflow-commit.json"


class HpcflowCallback(TrainerCallback):
    """Joins a ``transformers.Trainer`` to the protocol (see the module docstring).

    Args:
        run: the rank's :class:`~hpcflow.runtime.run.Run` (``Run.from_env(torch_env=True)``).
    """

    def __init__(self, run: Run) -> None:
        self.run = run
        self.stop_step: int | None = None
        self._save_started: float | None = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if state.global_step > 0:  # resumed: the Trainer loaded its state already
            self.run.report_resume(int(state.global_step))
        return control

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        step = int(state.global_step)
        self.run.report_step(step)
        interval = self.run.config.checkpoint_interval
        if interval and step % interval == 0:
            control.should_save = True
        if self.run.should_stop():  # collective: every rank ends the same step
            self.stop_step = step
            control.should_save = True
            control.should_training_stop = True
        if control.should_save:  # the Trainer saves right after this call
            self._save_started = time.monotonic()
        return control

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        step = int(state.global_step)
        folder = Path(args.output_dir) / f"checkpoint-{step}"
        hdist.barrier()  # every process has written its part (rank 0 the model, each its RNG)
        if self.run.env.is_rank0:
            from hpcflow.fsutil import write_json_atomic

            write_json_atomic(folder / COMMIT_MARKER,  # temp file, fsync, rename, fsync dir
                              {"step": step, "world_size": self.run.env.world_size}, sort_keys=True)
            _prune(Path(args.output_dir), self.run.config.checkpoint_keep)
        hdist.barrier()
        started = self._save_started or time.monotonic()
        emit(self.run.env, TAG_CHECKPOINT, {
            "step": step, "reason": "preempt" if self.stop_step == step else "interval",
            "save_s": time.monotonic() - started, "async": False})
        self._save_started = None
        if self.stop_step == step:
            self.run.leave_preempted(step)
        return control


def latest_checkpoint(output_dir: str | Path) -> str | None:
    """The newest committed ``checkpoint-<step>`` folder under ``output_dir``, or ``None``.

    Collective when a process group is active: rank 0 removes folders without the commit
    marker (partial writes of an attempt that died) and decides; every rank gets its answer.
    """
    root = Path(output_dir)
    answer = None
    if hdist.get_rank() == 0 and root.is_dir():
        committed = []
        for folder in root.iterdir():
            match = _CHECKPOINT_RE.fullmatch(folder.name)
            if not match or not folder.is_dir():
                continue
            if (folder / COMMIT_MARKER).is_file():
                committed.append((int(match[1]), folder))
            else:
                shutil.rmtree(folder, ignore_errors=True)
        answer = str(max(committed)[1]) if committed else None
    return hdist.broadcast_object(answer)


def _prune(root: Path, keep: int) -> None:
    """Keep the newest ``keep`` committed checkpoint folders (rank 0)."""
    committed = sorted(
        (int(m[1]), p) for p in root.iterdir()
        if (m := _CHECKPOINT_RE.fullmatch(p.name)) and (p / COMMIT_MARKER).is_file()
    )
    for _, folder in committed[:-keep]:
        shutil.rmtree(folder, ignore_errors=True)
