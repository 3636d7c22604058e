"""Hugging Face ``transformers.Trainer`` under hpcflow's protocol: a ``TrainerCallback``.

The Trainer keeps its own checkpoints (``<output_dir>/checkpoint-<step>/``, written by
``Trainer._save_checkpoint``: model, optimizer, scheduler, each process's RNG, trainer state)
and its own resume (``trainer.train(resume_from_checkpoint=...)``). hpcflow adds what the
Trainer lacks:

- the agreement: at each step end the ranks all-reduce their stop bit (USR1 or the flag file);
  on a stop the callback asks the Trainer to save and to stop;
- the commit: once every rank has written its part (a barrier in ``on_save``), rank 0 writes
  ``hpcflow-commit.json`` into the checkpoint folder, listing every file with its size.
  :func:`latest_checkpoint` returns only folders that hold it and every file it lists, so a
  checkpoint is either complete or ignored, and removes the others;
- a checkpoint folder per host (a SageMaker job of several instances, where each container
  syncs its own folder with the one S3 prefix): the first rank of every host lists its host's
  files for the record, removes the partial and pruned checkpoints on its host, and the
  resume takes the newest checkpoint complete on every host (:mod:`hpcflow.runtime.adapter_files`);
- SIGTERM is a warning like USR1 (a SageMaker stop or spot interruption sends it, 120 s
  before the end): the Trainer's own SIGTERM checkpointing (``enable_jit_checkpoint``), which
  would take the signal from hpcflow, is refused;
- the leave: after the preemption checkpoint is committed, the commit file for the batch script
  and :class:`~hpcflow.runtime.run.Preempted` (exit 75 on every rank);
- the interval (``HPCFLOW_CHECKPOINT_INTERVAL``) and the retention (``HPCFLOW_CHECKPOINT_KEEP``)
  of the job spec.

Use::

    with Run.from_env(torch_env=True) as run:          # accelerate reads RANK, WORLD_SIZE, ...
        args = TrainingArguments(output_dir=str(run.config.checkpoint_dir), ...)
        trainer = Trainer(model, args, ..., callbacks=[HpcflowCallback(run)])
        trainer.train(resume_from_checkpoint=latest_checkpoint(args.output_dir, run))

``run.config.checkpoint_dir`` is the job's checkpoint folder: on Slurm under the run directory,
in a SageMaker container the folder SageMaker syncs (``CheckpointConfig.LocalPath``,
:func:`hpcflow.runtime.sagemaker_env.default_checkpoint_dir`).

Needs the ``hf`` extra (transformers, accelerate).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from hpcflow.errors import CheckpointError
from hpcflow.protocol import HF_CHECKPOINT_RE, TAG_CHECKPOINT
from hpcflow.runtime import adapter_files as files
from hpcflow.runtime import dist as hdist
from hpcflow.runtime.lines import emit, log
from hpcflow.runtime.run import Run
from hpcflow.runtime.sagemaker_env import host_local_checkpoints

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
        if getattr(args, "enable_jit_checkpoint", False):
            # transformers' JIT checkpointing replaces the SIGTERM handler (trainer_jit_checkpoint)
            raise ValueError(
                "TrainingArguments.enable_jit_checkpoint=True: the Trainer would take SIGTERM "
                "and save by itself, against hpcflow, which saves and commits at the next step "
                "on SIGTERM already. Allowed with HpcflowCallback: enable_jit_checkpoint=False")
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
        hdist.barrier()  # every process has written its part (rank 0 the model, each its RNG)
        commit(Path(args.output_dir), step, self.run)
        started = self._save_started or time.monotonic()
        emit(self.run.env, TAG_CHECKPOINT, {
            "step": step, "reason": "preempt" if self.stop_step == step else "interval",
            "save_s": time.monotonic() - started, "async": False})
        self._save_started = None
        if self.stop_step == step:
            self.run.leave_preempted(step)
        return control


def commit(root: Path, step: int, run: Run) -> None:
    """Commit ``checkpoint-<step>`` under ``root`` once every rank has written its part
    (collective): each keeper lists its host's files, rank 0 writes the marker naming them all
    (temp file, fsync, rename), names the oldest checkpoint kept (``HPCFLOW_CHECKPOINT_KEEP``),
    and every keeper removes the older ones.

    Raises:
        CheckpointError: the listing, the marker or the removal failed (on every rank).
    """
    env = run.env
    keeper = files.is_keeper(env.rank, env.local_rank, run.config.checkpoint_host_local)
    folder = root / f"checkpoint-{step}"
    mine, error = None, None
    if keeper:
        try:
            mine = files.listing(folder, COMMIT_MARKER)
        except OSError as exc:
            error = f"listing {folder} failed: {exc}"
    gathered = files.all_gather((mine, error))
    oldest, error = None, next((e for _, e in gathered if e), None)
    if error is None and hdist.get_rank() == 0:
        from hpcflow.fsutil import write_json_atomic

        try:
            write_json_atomic(folder / COMMIT_MARKER, {
                "step": step, "world_size": env.world_size,
                "files": files.merge_listings(m for m, _ in gathered)}, sort_keys=True)
            committed = [s for s, p in files.steps_in(root, _CHECKPOINT_RE)
                         if (p / COMMIT_MARKER).is_file()]
            oldest = files.oldest_kept(committed, run.config.checkpoint_keep)
        except OSError as exc:
            error = f"commit of {folder} failed: {exc}"
    oldest, error = hdist.broadcast_object((oldest, error))
    if error is None and keeper and oldest is not None:
        try:
            for old_step, path in files.steps_in(root, _CHECKPOINT_RE):
                if old_step < oldest:
                    files.remove(path, COMMIT_MARKER)
        except OSError as exc:
            error = f"removing checkpoints older than step {oldest} under {root} failed: {exc}"
    errors = files.all_gather(error)
    first = next((e for e in errors if e), None)
    if first is not None:
        raise CheckpointError(first)


def latest_checkpoint(output_dir: str | os.PathLike[str], run: Run | None = None) -> str | None:
    """The newest ``checkpoint-<step>`` folder under ``output_dir`` that is complete on every
    host, or ``None``. Collective when a process group is active.

    Each keeper (rank 0; with a checkpoint folder per host, the first rank of every host)
    removes the folders that are partial on its host (no marker, or a listed file missing or
    of another size: an attempt that died while saving, or a file SageMaker never synced) and
    reports the complete ones; every rank gets the newest step complete everywhere.

    Args:
        output_dir: ``TrainingArguments.output_dir``.
        run: the rank's :class:`Run`; without it the rank's place comes from the environment
            (``LOCAL_RANK``, SageMaker's host list).
    """
    root = Path(output_dir)
    if run is not None:
        keeper = files.is_keeper(run.env.rank, run.env.local_rank,
                                 run.config.checkpoint_host_local)
    else:
        keeper = files.is_keeper(hdist.get_rank(), int(os.environ.get("LOCAL_RANK", "0") or 0),
                                 host_local_checkpoints(os.environ))
    complete: list[int] | None = None
    if keeper:
        complete = []
        for step, folder in files.steps_in(root, _CHECKPOINT_RE):
            if not folder.is_dir():
                continue
            why = files.problem(folder, COMMIT_MARKER)
            if why is None:
                complete.append(step)
                continue
            if run is not None:
                log(run.env, f"removed partial checkpoint {folder} ({why})")
            shutil.rmtree(folder, ignore_errors=True)
    step = files.agree(files.all_gather(complete))
    return None if step is None else str(root / f"checkpoint-{step}")

