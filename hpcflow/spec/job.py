"""The job spec: what ``hpcflow submit`` reads from ``job.yaml`` and renders into an sbatch script.

Every value that reaches a shell, an ``#SBATCH`` line or a Slurm filename pattern is checked
here, so the renderer can trust the model. Shape errors (unknown key, wrong type, value out of
range) come from pydantic; cross-field checks name the field path the same way. All problems are
reported together in one :class:`~hpcflow.errors.SpecError` before anything is written.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path, PurePath
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from hpcflow.spec.envvalues import EnvFromFile, EnvValue  # noqa: F401 - EnvFromFile re-exported
from hpcflow.spec.job_fields import (  # noqa: F401 - MAX_REQUEUES, MIN_SIGNAL_LEAD_S re-exported
    CONTROL_RE,
    MAX_CPUS_PER_TASK,
    MAX_GPUS_PER_NODE,
    MAX_NODES,
    MAX_REQUEUES,
    MAX_TASKS_PER_NODE,
    MAX_TEXT_CHARS,
    MIN_SIGNAL_LEAD_S,
    NAME_MAX_BYTES,
    NAME_RE,
    PARTITION_RE,
    PATH_MAX_BYTES,
    RUN_DIR_FORBIDDEN,
    SIGNAL_JITTER_S,
    SLURM_NAME_RE,
    TYPICAL_INTERFACES,
    EnvName,
    SpecModel,
    StrictInt,
    Text,
    path_text,
    raise_problems,
    time_limit_text,
)
from hpcflow.spec.job_hyperpod import HyperPodJobSpec, hyperpod_problems
from hpcflow.spec.job_layout import (  # noqa: F401 - re-exported
    ModelShapeSpec,
    NetworkSpec,
    ParallelismSpec,
    layout_problems,
)
from hpcflow.spec.job_lead import lead_for_short_jobs, lead_problems
from hpcflow.spec.job_parts import (  # noqa: F401 - re-exported: the spec's public names
    CheckpointSpec,
    ContainerSpec,
    PreemptionSpec,
    ProgramSpec,
)
from hpcflow.spec.job_resilience import ResilienceSpec, ResilienceSwitch, warm_standby_problems
from hpcflow.spec.job_sagemaker import SageMakerSpec, sagemaker_problems
from hpcflow.spec.loading import (
    apply_overrides,
    keep_literal_scalars,
    keep_override_text,
    parse_yaml_nodes,
    read_spec_text,
    source_name,
    validate_model,
    yaml_mapping,
)
from hpcflow.spec.numbers import bounded_int
from hpcflow.spec.socket_ifname import judge_socket_ifname
from hpcflow.spec.timefmt import format_time_limit, parse_time_limit  # noqa: F401 - re-exported

# The counts of a job: strict (no booleans) and bounded, a too-long number named by its bound.
Nodes = bounded_int(1, MAX_NODES)
TasksPerNode = bounded_int(1, MAX_TASKS_PER_NODE)
GpusPerNode = bounded_int(0, MAX_GPUS_PER_NODE)
CpusPerTask = bounded_int(1, MAX_CPUS_PER_TASK)


class JobSpec(SpecModel):
    """One training job: resources, program, environment and preemption settings."""

    name: str = Field(
        description="Job name (--job-name, and %x in the log file name): 1-64 of [A-Za-z0-9._-].",
    )
    nodes: Nodes = Field(
        default=1, description='Number of nodes (--nodes).')
    tasks_per_node: TasksPerNode = Field(
        default=1,
        description=(
            "Ranks per node (--ntasks-per-node); with GPUs it defaults to, and must equal, "
            "gpus_per_node."
        ),
    )
    gpus_per_node: GpusPerNode = Field(
        default=0,
        description="GPUs per node (--gpus-per-node); 0 on CPU-only nodes.",
    )
    cpus_per_task: CpusPerTask = Field(
        default=1, description='CPU cores per rank (--cpus-per-task).')
    time_limit: Annotated[str, BeforeValidator(time_limit_text)] = Field(
        json_schema_extra={"limits": "more than 0, at most 365 days"},
        description='Wall-time limit (--time): "MM", "HH:MM:SS", "D-HH:MM:SS", ...; kept as [D-]HH:MM:SS.',
    )
    partition: str | None = Field(
        default=None,
        description="Slurm partition(s) (--partition), comma-separated; default: the cluster's default.",
    )
    account: str | None = Field(
        default=None,
        description="Slurm account to charge (--account); default: the user's default account.",
    )
    run_dir: Path = Field(
        json_schema_extra={"limits": (
            f"no double quote, % or backslash; {NAME_MAX_BYTES} bytes per path component, "
            f"{PATH_MAX_BYTES} in all"
        )},
        description=("Run directory for logs, ledger and checkpoints; relative to the spec file's "
                     "folder (with --set: to the current folder)."),
    )
    program: ProgramSpec = Field(description='The program every rank runs.')
    env: dict[EnvName, EnvValue] = Field(
        json_schema_extra={"limits": (
            "names: [A-Za-z_][A-Za-z0-9_]*, not Slurm's own (SLURM_JOB_*, SLURM_ARRAY_*, "
            "SLURM_RESTART_COUNT, SBATCH_*, ...), bash's read-only or special ones (UID, IFS, ...), "
            f"nor HPCFLOW_*/hpcflow_*; values: at most {MAX_TEXT_CHARS} characters, no NUL, or "
            "{from_file: PATH} with an absolute or ~/ path"
        )},
        default={},
        description=("Extra environment variables for the program; values are passed literally, "
                     "or read at run time from a file ({from_file: ~/.wandb_key}: never written "
                     "by hpcflow; see 'Where env values are written')."),
    )
    launcher: Literal["srun", "torchrun"] = Field(
        default="srun",
        description="srun: one task per rank (default); torchrun: one torchrun per node spawning the ranks.",
    )
    container: ContainerSpec | None = Field(
        default=None,
        description="Optional pyxis container for the ranks.",
    )
    preemption: PreemptionSpec = Field(
        default=PreemptionSpec(),
        description="Preemption signal lead and requeue bound.",
    )
    checkpoint: CheckpointSpec = Field(
        default=CheckpointSpec(),
        description="Checkpoint folder, retention and interval.",
    )
    network: NetworkSpec | None = Field(
        default=None,
        description="Instance type and aws-ofi-nccl version: the job exports the NCCL/EFA preset.",
    )
    resilience: ResilienceSwitch = Field(
        default_factory=ResilienceSpec,
        description="Hang watchdog and in-job restarts; on by default, false: neither "
                    "(null is refused).",
    )
    platform: Literal["slurm", "sagemaker"] = Field(
        default="slurm",
        description="slurm: sbatch on a Slurm cluster; sagemaker: a SageMaker training job "
                    "(the sagemaker block; docs/sagemaker.md).",
    )
    sagemaker: SageMakerSpec | None = Field(
        default=None, description="Image, role, instance type and spot settings of platform: sagemaker.")
    hyperpod: HyperPodJobSpec | None = Field(
        default=None, description="SageMaker HyperPod's own recovery for the step (docs/hyperpod.md).")
    parallelism: ParallelismSpec | None = Field(
        default=None,
        description=(
            "dp x pp x tp layout, checked against nodes x tasks_per_node at submit and passed to "
            "the ranks as HPCFLOW_PARALLELISM."
        ),
    )

    @field_validator("name")
    @classmethod
    def _name_chars(cls, value: str) -> str:
        if not NAME_RE.fullmatch(value):
            raise ValueError("must be 1-64 characters from [A-Za-z0-9._-] (used in file names)")
        return value

    @field_validator("partition", "account")
    @classmethod
    def _slurm_names(cls, value: str | None, info: ValidationInfo) -> str | None:
        pattern = PARTITION_RE if info.field_name == "partition" else SLURM_NAME_RE
        if value is not None and not pattern.fullmatch(value):
            allowed = "comma-separated names of" if info.field_name == "partition" else "a name of"
            raise ValueError(f"must be {allowed} [A-Za-z0-9._-]")
        return value

    @field_validator("run_dir", mode="before")
    @classmethod
    def _run_dir_text(cls, value: Any) -> Any:
        text = path_text(value)
        bad = [label for ch, label in RUN_DIR_FORBIDDEN.items() if ch in text]
        if bad:
            raise ValueError(
                f"must not contain {', '.join(bad)}: run_dir goes into #SBATCH lines and Slurm "
                "filename patterns; spaces, ' and $ are fine"
            )
        if not os.path.isabs(text):
            raise ValueError("must be absolute here (in a spec file it is relative to the file)")
        return Path(os.path.normpath(text))

    @model_validator(mode="before")
    @classmethod
    def _no_warning_for_short_jobs(cls, data: Any) -> Any:
        """A time limit too short for the default lead, and no lead given: no warning."""
        return lead_for_short_jobs(data)

    @model_validator(mode="before")
    @classmethod
    def _place_checkpoint_dir(cls, data: Any) -> Any:
        """Fill checkpoint.dir from run_dir (default ``checkpoints``; relative = under run_dir)."""
        if not isinstance(data, dict):
            return data
        run_dir, ckpt = data.get("run_dir"), data.get("checkpoint", {})
        if isinstance(ckpt, CheckpointSpec):
            ckpt = ckpt.model_dump()
        if not isinstance(run_dir, str | PurePath) or not os.path.isabs(run_dir):
            return data
        if CONTROL_RE.search(str(run_dir)):  # reported once, on run_dir
            return data
        if not isinstance(ckpt, dict):
            return data
        given = ckpt.get("dir")
        if given is None:
            given = "checkpoints"
        if isinstance(given, str | PurePath) and str(given) and not os.path.isabs(given):
            placed = os.path.normpath(os.path.join(run_dir, given))
            if _is_under(placed, os.path.normpath(run_dir)):
                ckpt = {**ckpt, "dir": placed}
            # else: left relative, and refused by _checkpoint_dir_placed with the reason
        return {**data, "checkpoint": ckpt}

    @model_validator(mode="before")
    @classmethod
    def _default_tasks_per_node(cls, data: Any) -> Any:
        """One rank per GPU: tasks_per_node defaults to gpus_per_node when GPUs are given."""
        if isinstance(data, dict) and "tasks_per_node" not in data:
            gpus = data.get("gpus_per_node")
            if type(gpus) is int and 0 < gpus <= MAX_GPUS_PER_NODE:
                return {**data, "tasks_per_node": gpus}
        return data

    @model_validator(mode="after")
    def _one_rank_per_gpu(self) -> JobSpec:
        """Every GPU gets a rank: srun starts tasks_per_node ranks per node, and torchrun starts
        tasks_per_node processes (--nproc-per-node) in its one task per node."""
        gpus, tasks = self.gpus_per_node, self.tasks_per_node
        if gpus and tasks != gpus:
            how = ("torchrun starts tasks_per_node processes per node (--nproc-per-node)"
                   if self.launcher == "torchrun" else "srun starts tasks_per_node ranks per node")
            raise_problems([("tasks_per_node", tasks,
                              f"must equal gpus_per_node ({gpus}): {how}, one per GPU, so "
                              f"{tasks} rank(s) would leave GPUs idle or share them; leave "
                              "tasks_per_node out to get one rank per GPU")])
        return self

    @model_validator(mode="after")
    def _checkpoint_dir_placed(self) -> JobSpec:
        """checkpoint.dir is a folder of its own: not run_dir, and a relative one stays in it."""
        given = self.checkpoint.dir
        if given is not None and not given.is_absolute():
            raise_problems([("checkpoint.dir", str(given),
                              f"a relative path is a folder under run_dir ({str(self.run_dir)!r}) "
                              "and must stay inside it; give an absolute path for a folder "
                              "elsewhere")])
        if given is not None and given == self.run_dir:
            raise_problems([("checkpoint.dir", str(given),
                              "must not be run_dir itself: the checkpoint manager prunes and "
                              "cleans up folders in it; use a sub-folder such as checkpoints")])
        return self

    @model_validator(mode="after")
    def _cross_field(self) -> JobSpec:
        problems = []
        lead = self.preemption.signal_lead_s
        problems.extend(lead_problems(lead, self.time_limit, self.time_limit_s))
        margin = self.preemption.requeue_margin_s
        if lead and margin >= lead:
            problems.append((
                "preemption.requeue_margin_s",
                margin,
                f"must be less than preemption.signal_lead_s ({lead} s): the program is stopped "
                "this long before the deadline, after the warning",
            ))
        if self.parallelism is not None:
            problems.extend(layout_problems(self.parallelism, self.nodes, self.tasks_per_node))
        spare = self.resilience.spare_nodes if self.resilience else 0
        if spare and self.launcher != "srun":
            problems.append((
                "resilience.spare_nodes", spare,
                f"needs launcher: srun (launcher is {self.launcher!r}): torchrun's rendezvous "
                "runs on the allocation's first node, which a step with spare nodes may exclude; "
                "use spare_nodes: 0 or launcher: srun",
            ))
        if self.resilience is not None and self.resilience.warm_standby:
            problems.extend(warm_standby_problems(
                launcher=self.launcher, container=self.container is not None,
                module=self.program.module, argv=self.program.argv,
                max_in_job_restarts=self.resilience.max_in_job_restarts))
        if spare and self.nodes + spare > MAX_NODES:
            problems.append(("resilience.spare_nodes", spare,
                             f"nodes + spare_nodes must be at most {MAX_NODES}"))
        ifname = self.env.get("NCCL_SOCKET_IFNAME")
        if isinstance(ifname, str):
            unreachable = judge_socket_ifname(ifname, TYPICAL_INTERFACES).unreachable_message()
            if unreachable is not None:
                problems.append(("env.NCCL_SOCKET_IFNAME", ifname, "; ".join(unreachable)))
        problems.extend(sagemaker_problems(self))
        problems.extend(hyperpod_problems(self))
        raise_problems(problems)
        return self

    @property
    def time_limit_s(self) -> int:
        """The time limit in seconds."""
        return parse_time_limit(self.time_limit)

    @property
    def checkpoint_dir(self) -> Path:
        """The absolute checkpoint folder (``checkpoint.dir``, filled in from run_dir)."""
        return self.checkpoint.dir or self.run_dir / "checkpoints"

    @property
    def ntasks(self) -> int:
        """Total ranks: nodes x tasks_per_node."""
        return self.nodes * self.tasks_per_node


def _is_under(path: str, folder: str) -> bool:
    """``path`` is ``folder`` or inside it (both normalised, absolute)."""
    return os.path.commonpath([path, folder]) == folder


# --------------------------------------------------------------------------------------------
# Loading


def load_job_spec(path: str | Path, overrides: Iterable[str] = ()) -> JobSpec:
    """Read, override and validate a job spec file. Writes nothing.

    A relative ``run_dir`` or ``program.workdir`` in the file is relative to the file's folder;
    one given with ``--set`` is relative to the current directory. Unquoted YAML scalars that
    YAML would turn into numbers
    (``time_limit: 1:30:00`` is the base-60 int 5400 in YAML 1.1; ``env: {MODE: 0755}`` is an
    octal int) are taken as the text that was written, for ``time_limit``, ``env`` values and
    program arguments.

    Args:
        path: the YAML file.
        overrides: ``key.sub=value`` strings (``--set``), applied after the file is read.

    Raises:
        SpecError: the file cannot be read or parsed, an override is malformed, or any field is
            invalid; the message lists every problem with its field path, value and what is allowed.
    """
    p = Path(path)
    text = read_spec_text(p)
    source = source_name(p)
    value, root = parse_yaml_nodes(text, source)
    data = keep_literal_scalars(yaml_mapping(value, source), root)
    base = p.absolute().parent
    run_dir = data.get("run_dir")
    if isinstance(run_dir, str) and run_dir and not CONTROL_RE.search(run_dir):
        data["run_dir"] = os.path.normpath(base / Path(run_dir).expanduser())
    program = data.get("program")
    workdir = program.get("workdir") if isinstance(program, dict) else None
    if isinstance(workdir, str) and workdir and not CONTROL_RE.search(workdir):
        program["workdir"] = os.path.normpath(base / Path(workdir).expanduser())
    overrides = list(overrides)
    data = apply_overrides(data, overrides)
    for item in overrides:
        key, _, raw = item.partition("=")
        key = key.strip()
        if key == "run_dir" and isinstance(data.get("run_dir"), str) and data["run_dir"]:
            data["run_dir"] = os.path.abspath(os.path.expanduser(data["run_dir"]))
        elif key == "program.workdir" and isinstance(data.get("program"), dict):
            workdir = data["program"].get("workdir")
            if isinstance(workdir, str) and workdir and not CONTROL_RE.search(workdir):
                data["program"]["workdir"] = os.path.abspath(os.path.expanduser(workdir))
        elif key == "time_limit" or key.startswith("env."):
            keep_override_text(data, key.split("."), raw.strip())
    return validate_model(JobSpec, data, source)
