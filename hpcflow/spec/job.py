"""The job spec: what ``hpcflow submit`` reads from ``job.yaml`` and renders into an sbatch script.

Every value that reaches a shell, an ``#SBATCH`` line or a Slurm filename pattern is checked
here, so the renderer can trust the model. Shape errors (unknown key, wrong type, value out of
range) come from pydantic; cross-field checks name the field path the same way. All problems are
reported together in one :class:`~hpcflow.errors.SpecError` before anything is written.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path, PurePath
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from hpcflow.spec.envnames import env_name_problem
from hpcflow.spec.loading import (
    apply_overrides,
    parse_yaml_bounded,
    read_spec_text,
    source_name,
    validate_model,
    yaml_mapping,
)
from hpcflow.spec.timefmt import format_time_limit, parse_time_limit  # noqa: F401 - re-exported

#: Slurm checks ``--signal`` times on a timer, so the signal may come up to 60 s away from the
#: requested lead (sbatch(1), ``--signal``: "the signal may be sent up to 60 seconds earlier than
#: specified"). The lead must cover that jitter plus time for the ranks to reach a step boundary
#: and save; 30 s is the least that is sane for any real model.
SIGNAL_JITTER_S = 60
MIN_SIGNAL_LEAD_S = SIGNAL_JITTER_S + 30
#: sbatch(1), ``--signal``: "sig_time must be an integer value between 0 and 65535".
MAX_SIGNAL_LEAD_S = 65535

_NAME_RE = re.compile(r"[A-Za-z0-9._-]{1,64}")
_SLURM_NAME_RE = re.compile(r"[A-Za-z0-9._-]+")
_PARTITION_RE = re.compile(r"[A-Za-z0-9._-]+(,[A-Za-z0-9._-]+)*")
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INSTANCE_TYPE_RE = re.compile(r"[a-z][a-z0-9-]*\.[a-z0-9]+")
_VERSION_RE = re.compile(r"v?[0-9]+(\.[0-9]+)*([-+][A-Za-z0-9.]+)?")
#: A node's interfaces as EC2 shows them, for checking NCCL_SOCKET_IFNAME before the job runs.
_TYPICAL_INTERFACES = ("lo", "docker0", "ens5", "eth0")
_MODULE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
# sbatch(1), "filename pattern": '%' starts a replacement symbol and a backslash anywhere turns
# all replacement off; '"' would end the quoted #SBATCH value. Control characters (newline) would
# end the #SBATCH line.
_RUN_DIR_FORBIDDEN = {'"': "a double quote", "%": "'%'", "\\": "a backslash"}

StrictInt = Annotated[int, Field(strict=True)]

# Upper bounds: far above any real job, low enough that no value wraps in bash arithmetic
# (64-bit) or reaches an #SBATCH line Slurm would misread.
#: More nodes than any Slurm cluster has (Frontier: 9,408).
MAX_NODES = 100_000
#: slurm.conf(5) MaxTasksPerNode: "The value may not exceed 65533".
MAX_TASKS_PER_NODE = 65533
#: No node has more GPUs (8 is common; 16 is the most sold in one chassis).
MAX_GPUS_PER_NODE = 64
#: More hardware threads than any node has.
MAX_CPUS_PER_TASK = 4096
#: The batch script compares SLURM_RESTART_COUNT with this in bash arithmetic.
MAX_REQUEUES = 1000
MAX_CHECKPOINT_KEEP = 10_000
MAX_INTERVAL_STEPS = 10**12
#: execve(2): one argument or environment string may hold at most 128 KiB (MAX_ARG_STRLEN).
MAX_TEXT_CHARS = 32 * 1024
#: Linux NAME_MAX (one path component) and PATH_MAX (a whole path), in bytes (limits.h).
NAME_MAX_BYTES = 255
PATH_MAX_BYTES = 4095


# --------------------------------------------------------------------------------------------
# Field types


def _scalar_to_str(value: Any) -> Any:
    """Numbers become their text (``10`` -> ``"10"``); booleans are refused as ambiguous."""
    if isinstance(value, bool):
        raise ValueError('a boolean is ambiguous here; quote it, e.g. "true"')
    if isinstance(value, int | float):
        return str(value)
    return value


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain a NUL character (it cannot be passed to a program)")
    if len(value) > MAX_TEXT_CHARS:
        raise ValueError(f"must be at most {MAX_TEXT_CHARS} characters (Linux refuses one argument "
                         "or environment string over 128 KiB: execve(2), MAX_ARG_STRLEN)")
    return value


#: A program argument or environment value: any text but NUL; numbers are taken as text.
Text = Annotated[str, BeforeValidator(_scalar_to_str), AfterValidator(_no_nul)]


def _env_name(value: str) -> str:
    if not _ENV_NAME_RE.fullmatch(value):
        raise ValueError(
            "an environment variable name must match [A-Za-z_][A-Za-z0-9_]* "
            "(letters, digits and '_', not starting with a digit)"
        )
    if problem := env_name_problem(value):
        raise ValueError(problem)
    return value


EnvName = Annotated[str, AfterValidator(_env_name)]


def _path_text(value: Any) -> str:
    if isinstance(value, PurePath):
        value = str(value)
    if not isinstance(value, str) or not value:
        raise ValueError("must be a non-empty path string")
    if _CONTROL_RE.search(value):
        raise ValueError("must not contain control characters such as a newline")
    encoded = value.encode("utf-8", "surrogatepass")
    if len(encoded) > PATH_MAX_BYTES or any(len(part) > NAME_MAX_BYTES for part in encoded.split(b"/")):
        raise ValueError(f"is too long: Linux allows {NAME_MAX_BYTES} bytes per path component "
                         f"and {PATH_MAX_BYTES} bytes per path (NAME_MAX, PATH_MAX)")
    return value


def _program_name(value: str) -> str:
    """An executable as srun and torchrun take it, never one of their options. Whether a
    relative path is allowed depends on program.workdir (:meth:`ProgramSpec._relative_paths`)."""
    value = _path_text(value)
    if value.startswith("-"):
        raise ValueError("must not start with '-': srun would read it as one of its own options")
    return value


def _time_limit(value: Any) -> str:
    return format_time_limit(parse_time_limit(value))


# --------------------------------------------------------------------------------------------
# Models


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ProgramSpec(_Model):
    """What each rank runs: ``python -m MODULE ARGS...`` or an explicit ``argv``."""

    module: str | None = Field(
        default=None,
        description="Python module to run as ``python -m MODULE`` on every rank (give this or argv).",
    )
    args: list[Text] = Field(
        json_schema_extra={"limits": f"each at most {MAX_TEXT_CHARS} characters, no NUL"},
        default=[],
        description="Arguments after the module; passed literally (no shell expansion).",
    )
    argv: list[Text] | None = Field(
        json_schema_extra={"limits": "a program first: an absolute path, a command name, or a path "
                                     "relative to workdir; each item as for args"},
        default=None,
        description=(
            "Full command line to run on every rank instead of a module, e.g. [/opt/bin/train, "
            "--lr, 1e-3]; the program is an absolute path or a command on PATH."
        ),
    )
    python: str | None = Field(
        json_schema_extra={"limits": "an absolute path, a command name, or relative to workdir"},
        default=None,
        description=(
            "Python interpreter for module (and torchrun); default: the one that runs hpcflow submit."
        ),
    )
    workdir: Path | None = Field(
        default=None,
        description=(
            "Folder the ranks start in (srun --chdir); relative to the spec file's folder; "
            "default: the run directory."
        ),
    )
    protocol: Literal["auto", "requeue"] = Field(
        default="auto",
        description=(
            "auto: ranks that join hpcflow's protocol (hpcflow.runtime) get the preemption signal "
            "and checkpoint; a program that does not join is never signalled, and is stopped and "
            "requeued shortly before the deadline. requeue: always the latter."
        ),
    )

    @field_validator("module")
    @classmethod
    def _module_name(cls, value: str | None) -> str | None:
        if value is not None and not _MODULE_RE.fullmatch(value):
            raise ValueError("must be a dotted Python module name such as 'pkg.train'")
        return value

    @field_validator("argv")
    @classmethod
    def _argv_shape(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and (not value or not value[0]):
            raise ValueError("must be a non-empty list whose first item is the program to run")
        if value is not None:
            try:
                _program_name(value[0])
            except ValueError as exc:
                raise ValueError(f"its first item, the program, {exc}") from None
        return value

    @field_validator("python")
    @classmethod
    def _python_path(cls, value: str | None) -> str | None:
        return None if value is None else _program_name(value)

    @field_validator("workdir", mode="before")
    @classmethod
    def _workdir_path(cls, value: Any) -> Any:
        if value is None:
            return None
        text = _path_text(value)
        if not os.path.isabs(text):
            raise ValueError("must be absolute here (in a spec file it is relative to the file)")
        return Path(os.path.normpath(text))

    @model_validator(mode="after")
    def _relative_paths(self) -> ProgramSpec:
        """Without workdir the ranks start in run_dir: a relative program path would be looked up
        there, which is never what a spec file's relative path meant."""
        if self.workdir is not None:
            return self
        problems = []
        for path, value in (("argv", (self.argv or [None])[0]), ("python", self.python)):
            if value is not None and "/" in value and not os.path.isabs(value):
                problems.append((path, value, "must be an absolute path or a command name looked "
                                 "up on PATH; a relative path would be looked up in run_dir, where "
                                 "the ranks start (or set program.workdir)"))
        _raise_problems(problems)
        return self

    @model_validator(mode="after")
    def _module_or_argv(self) -> ProgramSpec:
        problems = []
        if (self.module is None) == (self.argv is None):
            problems.append(("module", self.module, "give exactly one of module (+ args) or argv"))
        if self.argv is not None and self.args:
            problems.append(("args", self.args, "args go with module; with argv put them in argv"))
        _raise_problems(problems)
        return self


class ContainerSpec(_Model):
    """A pyxis/enroot container for every rank (srun ``--container-image``)."""

    image: str = Field(
        description="Image for pyxis ``--container-image``, e.g. nvcr.io#nvidia/pytorch:24.05-py3.",
    )
    mounts: list[str] = Field(
        default=[],
        description='Bind mounts "SRC:DST" or "SRC:DST:ro" (absolute paths) for ``--container-mounts``.',
    )

    @field_validator("image")
    @classmethod
    def _image_text(cls, value: str) -> str:
        if not value or re.search(r"[\s,]", value) or _CONTROL_RE.search(value):
            raise ValueError("must be a non-empty image reference without spaces or commas")
        return value

    @field_validator("mounts")
    @classmethod
    def _mount_specs(cls, value: list[str]) -> list[str]:
        for item in value:
            parts = item.split(":")
            ok = (
                len(parts) in (2, 3)
                and all(p.startswith("/") for p in parts[:2])
                and (len(parts) == 2 or parts[2] in ("ro", "rw"))
                and not re.search(r"[,\s]", item)
                and not _CONTROL_RE.search(item)
            )
            if not ok:
                raise ValueError(
                    f"mount {item!r} must be SRC:DST or SRC:DST:ro|rw with absolute paths and "
                    "no commas or spaces (pyxis --container-mounts)"
                )
        return value


class PreemptionSpec(_Model):
    """How the job is warned before its time limit and how often it may requeue itself."""

    signal_lead_s: StrictInt = Field(
        json_schema_extra={"limits": f"{MIN_SIGNAL_LEAD_S} to {MAX_SIGNAL_LEAD_S:,}, below time_limit"},
        default=120,
        description="Seconds before the time limit that Slurm sends USR1 (step + save + 60 s jitter).",
    )
    max_requeues: StrictInt = Field(
        default=3, ge=0, le=MAX_REQUEUES,
        description=(
            "Requeue after a committed preemption checkpoint while SLURM_RESTART_COUNT is below this."
        ),
    )

    requeue: bool = Field(
        default=True,
        description=(
            "false: --no-requeue, so neither Slurm (after a node failure) nor hpcflow requeues "
            "the job; a preemption checkpoint is still saved and committed."
        ),
    )
    signal: Literal["USR1", "USR2"] = Field(
        default="USR1",
        description=(
            "The warning signal (--signal=B:SIG@lead, the trap, the ranks' handler); USR2 for "
            "programs whose libraries take USR1 for themselves."
        ),
    )
    requeue_margin_s: StrictInt = Field(
        json_schema_extra={"limits": "15 or more, below signal_lead_s"},
        default=30, ge=15,
        description=(
            "A program that has not joined the protocol is stopped (TERM) this many seconds "
            "before the deadline, and the job is requeued."
        ),
    )

    @field_validator("signal_lead_s")
    @classmethod
    def _lead_range(cls, value: int) -> int:
        if value < MIN_SIGNAL_LEAD_S:
            raise ValueError(
                f"must be at least {MIN_SIGNAL_LEAD_S} s: Slurm sends the signal up to "
                f"{SIGNAL_JITTER_S} s off its mark (sbatch --signal), and the ranks need time "
                "on top of that to finish a step and save a checkpoint"
            )
        if value > MAX_SIGNAL_LEAD_S:
            raise ValueError(f"must be at most {MAX_SIGNAL_LEAD_S} s (sbatch --signal)")
        return value


class CheckpointSpec(_Model):
    """Where and how often the runtime saves checkpoints."""

    dir: Path | None = Field(
        json_schema_extra={"limits": "inside run_dir when relative, not run_dir itself; as run_dir"},
        default=None,
        description=(
            "Checkpoint folder; default <run_dir>/checkpoints; a relative path is under run_dir "
            "and must stay inside it; never run_dir itself."
        ),
    )
    keep: StrictInt = Field(
        default=3, ge=1, le=MAX_CHECKPOINT_KEEP, description='Keep the last N committed checkpoints.')
    interval_steps: StrictInt = Field(
        default=0, ge=0, le=MAX_INTERVAL_STEPS,
        description="Save every N steps; 0 saves only when preempted.",
    )

    @field_validator("dir", mode="before")
    @classmethod
    def _dir_text(cls, value: Any) -> Any:
        return None if value is None else _path_text(value)


class ParallelismSpec(_Model):
    """The parallel layout the program is asked to use: world size = dp x pp x tp."""

    dp: StrictInt = Field(default=-1, description="Data-parallel degree; -1 = the remaining ranks.")
    pp: StrictInt = Field(default=1, ge=1, description="Pipeline-parallel degree (stages).")
    tp: StrictInt = Field(
        default=1, ge=1, description="Tensor-parallel degree; must divide tasks_per_node.",
    )


class NetworkSpec(_Model):
    """The nodes' network, for the NCCL/EFA environment preset (hpcflow.nccl.presets)."""

    instance_type: str = Field(
        description="EC2 instance type of the nodes, e.g. p5.48xlarge; picks the preset.",
    )
    ofi_nccl_version: str | None = Field(
        default=None,
        description=(
            "Installed aws-ofi-nccl version, e.g. 1.7.4; legacy values are set only for "
            "versions that need them."
        ),
    )
    preset: bool = Field(
        default=True,
        description="Export the preset's variables (a value set in env always wins).",
    )

    @field_validator("instance_type")
    @classmethod
    def _instance_type(cls, value: str) -> str:
        if not _INSTANCE_TYPE_RE.fullmatch(value):
            raise ValueError("must be an EC2 instance type such as 'p5.48xlarge'")
        return value

    @field_validator("ofi_nccl_version")
    @classmethod
    def _version(cls, value: str | None) -> str | None:
        if value is not None and not _VERSION_RE.fullmatch(value):
            raise ValueError("must be a version such as '1.7.4' or '1.7.4-aws'")
        return value


class JobSpec(_Model):
    """One training job: resources, program, environment and preemption settings."""

    name: str = Field(
        description="Job name (--job-name, and %x in the log file name): 1-64 of [A-Za-z0-9._-].",
    )
    nodes: StrictInt = Field(
        default=1, ge=1, le=MAX_NODES, description='Number of nodes (--nodes).')
    tasks_per_node: StrictInt = Field(
        default=1, ge=1, le=MAX_TASKS_PER_NODE,
        description=(
            "Ranks per node (--ntasks-per-node); with GPUs it defaults to, and must equal, "
            "gpus_per_node."
        ),
    )
    gpus_per_node: StrictInt = Field(
        default=0, ge=0, le=MAX_GPUS_PER_NODE,
        description="GPUs per node (--gpus-per-node); 0 on CPU-only nodes.",
    )
    cpus_per_task: StrictInt = Field(
        default=1, ge=1, le=MAX_CPUS_PER_TASK, description='CPU cores per rank (--cpus-per-task).')
    time_limit: Annotated[str, BeforeValidator(_time_limit)] = Field(
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
        description="Run directory for logs, ledger and checkpoints; relative to the spec file's folder.",
    )
    program: ProgramSpec = Field(description='The program every rank runs.')
    env: dict[EnvName, Text] = Field(
        json_schema_extra={"limits": (
            "names: [A-Za-z_][A-Za-z0-9_]*, not Slurm's own (SLURM_JOB_*, SLURM_ARRAY_*, "
            "SLURM_RESTART_COUNT, SBATCH_*, ...), bash's read-only or special ones (UID, IFS, ...), "
            f"nor HPCFLOW_*/hpcflow_*; values: at most {MAX_TEXT_CHARS} characters, no NUL"
        )},
        default={},
        description="Extra environment variables for the program; values are passed literally.",
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
        if not _NAME_RE.fullmatch(value):
            raise ValueError("must be 1-64 characters from [A-Za-z0-9._-] (used in file names)")
        return value

    @field_validator("partition", "account")
    @classmethod
    def _slurm_names(cls, value: str | None, info: ValidationInfo) -> str | None:
        pattern = _PARTITION_RE if info.field_name == "partition" else _SLURM_NAME_RE
        if value is not None and not pattern.fullmatch(value):
            allowed = "comma-separated names of" if info.field_name == "partition" else "a name of"
            raise ValueError(f"must be {allowed} [A-Za-z0-9._-]")
        return value

    @field_validator("run_dir", mode="before")
    @classmethod
    def _run_dir_text(cls, value: Any) -> Any:
        text = _path_text(value)
        bad = [label for ch, label in _RUN_DIR_FORBIDDEN.items() if ch in text]
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
    def _place_checkpoint_dir(cls, data: Any) -> Any:
        """Fill checkpoint.dir from run_dir (default ``checkpoints``; relative = under run_dir)."""
        if not isinstance(data, dict):
            return data
        run_dir, ckpt = data.get("run_dir"), data.get("checkpoint", {})
        if isinstance(ckpt, CheckpointSpec):
            ckpt = ckpt.model_dump()
        if not isinstance(run_dir, str | PurePath) or not os.path.isabs(run_dir):
            return data
        if _CONTROL_RE.search(str(run_dir)):  # reported once, on run_dir
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
            _raise_problems([("tasks_per_node", tasks,
                              f"must equal gpus_per_node ({gpus}): {how}, one per GPU, so "
                              f"{tasks} rank(s) would leave GPUs idle or share them; leave "
                              "tasks_per_node out to get one rank per GPU")])
        return self

    @model_validator(mode="after")
    def _checkpoint_dir_placed(self) -> JobSpec:
        """checkpoint.dir is a folder of its own: not run_dir, and a relative one stays in it."""
        given = self.checkpoint.dir
        if given is not None and not given.is_absolute():
            _raise_problems([("checkpoint.dir", str(given),
                              f"a relative path is a folder under run_dir ({str(self.run_dir)!r}) "
                              "and must stay inside it; give an absolute path for a folder "
                              "elsewhere")])
        if given is not None and given == self.run_dir:
            _raise_problems([("checkpoint.dir", str(given),
                              "must not be run_dir itself: the checkpoint manager prunes and "
                              "cleans up folders in it; use a sub-folder such as checkpoints")])
        return self

    @model_validator(mode="after")
    def _cross_field(self) -> JobSpec:
        problems = []
        lead = self.preemption.signal_lead_s
        if lead >= self.time_limit_s:
            problems.append((
                "preemption.signal_lead_s",
                lead,
                f"must be less than time_limit ({self.time_limit} = {self.time_limit_s} s); Slurm "
                f"sends the signal up to {SIGNAL_JITTER_S} s off its mark (sbatch --signal), so "
                "the lead must cover that plus a step and a checkpoint save",
            ))
        margin = self.preemption.requeue_margin_s
        if margin >= lead:
            problems.append((
                "preemption.requeue_margin_s",
                margin,
                f"must be less than preemption.signal_lead_s ({lead} s): the program is stopped "
                "this long before the deadline, after the warning",
            ))
        if self.parallelism is not None:
            problems.extend(_layout_problems(self, self.parallelism))
        if "NCCL_SOCKET_IFNAME" in self.env:
            from hpcflow.nccl.checks import check_socket_ifname

            check = check_socket_ifname(self.env, _TYPICAL_INTERFACES)
            if check.level == "fail" and "lets NCCL use" in check.message:
                problems.append(("env.NCCL_SOCKET_IFNAME", self.env["NCCL_SOCKET_IFNAME"],
                                 f"{check.message}; {check.fix}"))
        _raise_problems(problems)
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


def _layout_problems(spec: JobSpec, layout: ParallelismSpec) -> list[tuple[str, Any, str]]:
    """The rules ``ParallelDims`` applies in the job, checked before the job waits in the queue."""
    from hpcflow.runtime.parallel_dims import ParallelDims

    try:
        ParallelDims(
            dp=layout.dp, pp=layout.pp, tp=layout.tp,
            world_size=spec.ntasks, ranks_per_node=spec.tasks_per_node,
        )
    except ValueError as exc:
        return [("parallelism", layout.model_dump(), f"{exc} (nodes x tasks_per_node = "
                 f"{spec.nodes} x {spec.tasks_per_node})")]
    return []


def _raise_problems(problems: list[tuple[str, Any, str]]) -> None:
    """Raise a pydantic ValidationError whose entries carry their own field paths."""
    if not problems:
        return
    details = [
        InitErrorDetails(
            type=PydanticCustomError("hpcflow_spec", "{msg}", {"msg": msg}),
            loc=tuple(path.split(".")),
            input=value,
        )
        for path, value, msg in problems
    ]
    raise ValidationError.from_exception_data("JobSpec", details)


# --------------------------------------------------------------------------------------------
# Loading


def load_job_spec(path: str | Path, overrides: Iterable[str] = ()) -> JobSpec:
    """Read, override and validate a job spec file. Writes nothing.

    A relative ``run_dir`` in the file is relative to the file's folder; one given with ``--set``
    is relative to the current directory. Unquoted YAML scalars that YAML would turn into numbers
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
    data = yaml_mapping(parse_yaml_bounded(text, source), source)
    data = _literal_scalars(data, text)
    base = p.absolute().parent
    run_dir = data.get("run_dir")
    if isinstance(run_dir, str) and run_dir and not _CONTROL_RE.search(run_dir):
        data["run_dir"] = os.path.normpath(base / Path(run_dir).expanduser())
    program = data.get("program")
    workdir = program.get("workdir") if isinstance(program, dict) else None
    if isinstance(workdir, str) and workdir and not _CONTROL_RE.search(workdir):
        program["workdir"] = os.path.normpath(base / Path(workdir).expanduser())
    overrides = list(overrides)
    data = apply_overrides(data, overrides)
    for item in overrides:
        key, _, raw = item.partition("=")
        key = key.strip()
        if key == "run_dir" and isinstance(data.get("run_dir"), str) and data["run_dir"]:
            data["run_dir"] = os.path.abspath(os.path.expanduser(data["run_dir"]))
        elif key == "time_limit" or key.startswith("env."):
            _keep_override_text(data, key.split("."), raw.strip())
    return validate_model(JobSpec, data, source)


_NUMERIC_TAGS = {"tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:bool"}


def _literal_scalars(data: dict[str, Any], text: str) -> dict[str, Any]:
    """Put back the written text of unquoted scalars YAML turned into numbers or booleans."""
    try:
        root = yaml.compose(text)
    except yaml.YAMLError:  # pragma: no cover - parse_yaml_bounded already parsed it
        return data
    if not isinstance(root, yaml.MappingNode):
        return data

    def raw(node: Any) -> str | None:
        return node.value if isinstance(node, yaml.ScalarNode) and node.tag in _NUMERIC_TAGS else None

    def children(node: Any) -> dict[str, Any]:
        if not isinstance(node, yaml.MappingNode):
            return {}
        return {k.value: v for k, v in node.value if isinstance(k, yaml.ScalarNode)}

    top = children(root)
    if "time_limit" in top and (value := raw(top["time_limit"])) is not None:
        data["time_limit"] = value
    env = data.get("env")
    if isinstance(env, dict):
        for name, node in children(top.get("env")).items():
            if name in env and (value := raw(node)) is not None:
                env[name] = value
    program = data.get("program")
    if isinstance(program, dict):
        for key, node in children(top.get("program")).items():
            items = program.get(key)
            if (
                key in ("args", "argv")
                and isinstance(node, yaml.SequenceNode)
                and isinstance(items, list)
                and len(items) == len(node.value)
            ):
                for i, item_node in enumerate(node.value):
                    if (value := raw(item_node)) is not None:
                        items[i] = value
    return data


def _keep_override_text(data: dict[str, Any], parts: list[str], raw: str) -> None:
    """After ``--set time_limit=1:30:00`` keep the text when YAML made it a number or bool."""
    node: Any = data
    for part in parts[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict) and isinstance(node.get(parts[-1]), int | float | bool):
        node[parts[-1]] = raw
