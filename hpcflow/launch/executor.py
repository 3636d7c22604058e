"""The front door: ``Executor(folder, ...)``, used like submitit's ``AutoExecutor``.

Slurm when ``sbatch`` is on PATH (:class:`~hpcflow.launch.slurm.SlurmBackend`: hpcflow's batch
script around submitit's payload runner), submitit's ``LocalExecutor`` otherwise (no batch
script, no requeue: a laptop smoke test of the same code). Parameters are the job spec's fields
or submitit's names for them (:mod:`hpcflow.launch.params`); every submission is checked by the
JobSpec model and for pickling before anything is written or submitted.

The folder holds the pickled calls (their arguments) and the pickled results, which
``job.result()`` unpickles: it gets ``hpcflow submit``'s checks for a run directory
(:mod:`hpcflow.jobs.trust`) before anything is written or read there, is made 0700 one level
at a time, and every submission runs under umask 077, so the pickles, the submission files and
the job's own files (Slurm gives the job the submitting umask) are the user's alone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from submitit.core import core, utils

from hpcflow.errors import SpecError
from hpcflow.jobs import trust
from hpcflow.launch.params import default_name, fields_of_spec, normalize
from hpcflow.launch.pickling import check_picklable
from hpcflow.launch.task import TaskCall
from hpcflow.protocol import (
    ENV_CHECKPOINT_DIR,
    ENV_CHECKPOINT_INTERVAL,
    ENV_CHECKPOINT_KEEP,
    ENV_PREEMPT_SIGNAL,
)
from hpcflow.spec.job import JobSpec


class Executor(core.Executor):
    """Submit Python callables as hpcflow jobs.

    Args:
        folder: where submitit keeps the pickled calls and their results; each Slurm submission
            also gets its run directory ``<folder>/<name>-<8 hex>`` (job log, ledger,
            ``checkpoints/``), listed by ``hpcflow list``.
        spec: a job spec (:func:`hpcflow.spec.job.load_job_spec`) whose fields are the defaults;
            its ``program`` and ``run_dir`` are not used.
        cluster: ``"slurm"`` or ``"local"``; default: ``"slurm"`` when ``sbatch`` is on PATH.
        **params: job spec fields or submitit names, as for :meth:`update_parameters`.

    Raises:
        SpecError: an unknown parameter or an invalid value (field, value, what is allowed).
        SubmitError: ``folder``, or an existing folder above it, is owned by another user or
            writable by others (:func:`hpcflow.jobs.trust.check_trusted_dir`), or cannot be
            made.
        ValueError: an unknown ``cluster``.
        RuntimeError: ``cluster="slurm"`` where ``srun`` is not on PATH (submitit's check).
    """

    def __init__(self, folder: str | Path, spec: JobSpec | None = None,
                 cluster: str | None = None, **params: Any) -> None:
        self.cluster = cluster or ("slurm" if shutil.which("sbatch") else "local")
        folder = private_folder(folder)
        self.fields: dict[str, Any] = fields_of_spec(spec) if spec is not None else {}
        if self.cluster == "slurm":
            from hpcflow.launch.slurm import SlurmBackend

            self._executor: core.PicklingExecutor = SlurmBackend(folder, self.fields)
        elif self.cluster == "local":
            from submitit.local.local import LocalExecutor

            self._executor = LocalExecutor(folder)
        else:
            raise ValueError(f"cluster: {self.cluster!r} is not known; use 'slurm' or 'local'")
        super().__init__(self._executor.folder, {})
        self.update_parameters(**params)

    def _internal_update_parameters(self, **kwargs: Any) -> None:
        fields, array_parallelism = normalize(kwargs)
        merged = {**self.fields, **fields}
        _check_fields(merged)
        self.fields.clear()
        self.fields.update(merged)
        self.parameters = dict(self.fields)
        if array_parallelism is not None:
            self.parameters["array_parallelism"] = array_parallelism
            if self.cluster == "slurm":
                self._executor.array_parallelism = array_parallelism  # type: ignore[attr-defined]
        if self.cluster == "local":
            self._executor.update_parameters(**_local_parameters(self.fields))

    def _internal_process_submissions(
        self, delayed_submissions: list[utils.DelayedSubmission]
    ) -> list[core.Job[Any]]:
        fn = delayed_submissions[0].function
        name_given = "name" in self.fields
        if not name_given:
            self.fields["name"] = default_name(fn)
        try:
            env = _local_env(self.fields) if self.cluster == "local" else {}
            wrapped = []
            for d in delayed_submissions:
                call = utils.DelayedSubmission(TaskCall(d.function, env), *d.args, **d.kwargs)
                check_picklable(call, d.function)
                wrapped.append(call)
            private_folder(self.folder)  # again: it may have changed since the last one
            with private_umask():
                return self._executor._internal_process_submissions(wrapped)
        finally:
            if not name_given:
                del self.fields["name"]


def private_folder(folder: str | Path) -> Path:
    """``folder`` as an absolute path, checked and made as ``hpcflow submit`` does a run
    directory (:func:`hpcflow.jobs.trust.check_trusted_dir`, then
    :func:`hpcflow.jobs.trust.make_private_dirs`: 0700). A folder of submitit's ``%j`` form is
    checked and made up to its first ``%`` part (submitit makes the rest, under umask 077).

    Raises:
        SubmitError: the folder, or one above it, is not safe or cannot be made.
    """
    path = Path(folder).expanduser().absolute()
    fixed = Path(*(path.parts[:next((i for i, part in enumerate(path.parts) if "%" in part),
                                     len(path.parts))]))
    trust.check_trusted_dir("folder", fixed, override=None)
    trust.make_private_dirs("folder", fixed, state=False)
    return path


@contextlib.contextmanager
def private_umask() -> Iterator[None]:
    """umask 077 while submitit writes the call's pickles and submission files and runs sbatch
    (the job takes the submitting umask, sbatch(1) ``SLURM_UMASK``). The umask is the process's:
    a file another thread creates meanwhile is private too, never more open."""
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


def _check_fields(fields: dict[str, Any]) -> None:
    """Validate the fields as a whole job spec now, so a bad value fails at update_parameters."""
    from hpcflow.launch.params import build_spec

    data = {"name": "check", **fields}
    build_spec(data, run_dir=Path("/hpcflow-check"), argv=["true"], env={})


def _local_parameters(fields: dict[str, Any]) -> dict[str, Any]:
    """The local executor's parameters from the job spec fields (submitit LocalExecutor:
    timeout_min, gpus_per_node, tasks_per_node; one node)."""
    from hpcflow.spec.timefmt import parse_time_limit

    out: dict[str, Any] = {}
    if "time_limit" in fields:
        out["timeout_min"] = max(1, parse_time_limit(fields["time_limit"]) // 60)
    if fields.get("nodes", 1) != 1:
        raise SpecError(f"nodes: {fields['nodes']} is not allowed with the local executor "
                        "(one machine); use 1, or submit to Slurm")
    for key in ("tasks_per_node", "gpus_per_node", "cpus_per_task"):
        if key in fields:
            out[key] = fields[key]
    return out


def _local_env(fields: dict[str, Any]) -> dict[str, str]:
    """What hpcflow.runtime.Run reads, for a task of the local executor (no batch script): the
    checkpoint folder (absolute, or under the executor's folder) and settings."""
    ckpt = dict(fields.get("checkpoint") or {})
    env = {ENV_CHECKPOINT_INTERVAL: str(ckpt.get("interval_steps", 0)),
           ENV_CHECKPOINT_KEEP: str(ckpt.get("keep", 3)),
           ENV_PREEMPT_SIGNAL: str((fields.get("preemption") or {}).get("signal", "USR1"))}
    if ckpt.get("dir"):
        env[ENV_CHECKPOINT_DIR] = str(ckpt["dir"])
    return env
