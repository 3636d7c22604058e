"""Executor parameters -> a :class:`~hpcflow.spec.job.JobSpec` for one Python submission.

Pure: no submitit, no Slurm, no file access. The executor takes the job spec's own field names
(``nodes``, ``tasks_per_node``, ``time_limit``, ``preemption``...; docs/job-spec.md) and, so
that code written for submitit's ``AutoExecutor`` runs unchanged, submitit's common names
(``timeout_min``, ``slurm_partition``...; submitit ``auto/auto.py``, ``slurm/slurm.py``).
Every value is checked by the JobSpec model itself, so a bad value gets the same message as in a
YAML spec, naming the field.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpcflow.errors import SpecError
from hpcflow.spec.job import JobSpec
from hpcflow.spec.loading import validate_model

#: Job spec fields an executor takes. ``program`` and ``run_dir`` are hpcflow's own per
#: submission (the function runs through submitit's payload runner, in a run directory of its
#: own); ``launcher`` is always srun (one payload runner per rank).
SPEC_FIELDS = ("name", "nodes", "tasks_per_node", "gpus_per_node", "cpus_per_task", "time_limit",
               "partition", "account", "env", "container", "preemption", "checkpoint",
               "network", "parallelism")

#: submitit's names -> the job spec's (submitit 1.5: AutoExecutor._typed_parameters and the
#: ``slurm_`` prefixed SlurmExecutor parameters). ``timeout_min`` is in minutes.
SUBMITIT_ALIASES = {
    "timeout_min": "time_limit",
    "slurm_time": "time_limit",
    "slurm_partition": "partition",
    "slurm_account": "account",
    "slurm_job_name": "name",
    "slurm_ntasks_per_node": "tasks_per_node",
    "slurm_gpus_per_node": "gpus_per_node",
    "slurm_cpus_per_task": "cpus_per_task",
    "slurm_nodes": "nodes",
}

#: Not a job spec field: how many array elements may run at once (sbatch ``--array=0-N%P``).
ARRAY_PARALLELISM_NAMES = ("array_parallelism", "slurm_array_parallelism")

DEFAULT_TIME_LIMIT = "00:05:00"  # submitit's default timeout_min is 5


def _minutes(value: Any) -> Any:
    """submitit's ``timeout_min`` (an int of minutes) as a Slurm time string."""
    if type(value) is int and value > 0:
        return f"{value // 60:02d}:{value % 60:02d}:00"
    return value  # the model refuses it with its own message


def normalize(params: Mapping[str, Any]) -> tuple[dict[str, Any], int | None]:
    """Map executor keyword arguments onto job spec fields.

    Args:
        params: keyword arguments of ``Executor(...)`` or ``update_parameters(...)``.

    Returns:
        ``(fields, array_parallelism)``: the job spec fields given, and the array concurrency
        limit when one was given.

    Raises:
        SpecError: a name that is neither a job spec field nor a known submitit alias (the
            message lists the allowed names), or an array parallelism that is not an int >= 1.
    """
    fields: dict[str, Any] = {}
    parallelism = None
    unknown = []
    for key, value in params.items():
        if value is None:
            continue
        if key in ARRAY_PARALLELISM_NAMES:
            if type(value) is not int or value < 1:
                raise SpecError(f"{key}: {value!r} is not allowed; give an int >= 1 (how many "
                                "array elements run at once, sbatch --array=...%N)")
            parallelism = value
            continue
        field = SUBMITIT_ALIASES.get(key, key)
        if field not in SPEC_FIELDS:
            unknown.append(key)
            continue
        if key in ("timeout_min", "slurm_time") and not isinstance(value, str):
            value = _minutes(value)
        fields[field] = value
    if unknown:
        allowed = ", ".join(SPEC_FIELDS + tuple(SUBMITIT_ALIASES) + ARRAY_PARALLELISM_NAMES)
        raise SpecError(f"executor parameters: {', '.join(map(repr, sorted(unknown)))} not "
                        f"allowed; allowed: {allowed} (the job spec's fields, docs/job-spec.md, "
                        "and submitit's names for them)")
    return fields, parallelism


def fields_of_spec(spec: JobSpec) -> dict[str, Any]:
    """The executor fields of a loaded spec: its ``program`` and ``run_dir`` are left out, and a
    checkpoint folder inside its run directory becomes relative (each submission has its own)."""
    data = spec.model_dump(mode="json", exclude_none=True)
    ckpt = dict(data.get("checkpoint", {}))
    given = ckpt.get("dir")
    if given is not None:
        rel = os.path.relpath(given, spec.run_dir)
        if not rel.startswith(".."):
            ckpt["dir"] = rel
    data["checkpoint"] = ckpt
    return {k: v for k, v in data.items() if k in SPEC_FIELDS}


_NAME_CHARS = re.compile(r"[^A-Za-z0-9._-]+")


def default_name(fn: Any) -> str:
    """A job name from a callable: its ``__name__`` (or its class's) made of [A-Za-z0-9._-]."""
    raw = getattr(fn, "__name__", None) or type(fn).__name__
    name = _NAME_CHARS.sub("_", raw).strip("_.")[:64]
    return name or "job"


def build_spec(fields: Mapping[str, Any], *, run_dir: Path, argv: list[str],
               env: Mapping[str, str]) -> JobSpec:
    """The job spec of one submission.

    Args:
        fields: job spec fields from :func:`normalize` (``name`` must be there).
        run_dir: the submission's run directory (absolute).
        argv: the program every rank runs (submitit's payload runner).
        env: variables the payload runner needs, added to the spec's ``env`` (the spec's value
            wins for a name both set).

    Raises:
        SpecError: any field is invalid (the message names every field path and value).
    """
    data = {"time_limit": DEFAULT_TIME_LIMIT, **fields}
    data["env"] = {**env, **dict(fields.get("env") or {})}
    data["run_dir"] = str(run_dir)
    data["program"] = {"argv": list(argv)}
    return validate_model(JobSpec, data, "executor parameters")
