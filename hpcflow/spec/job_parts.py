"""The nested blocks of a job spec: program, container, preemption, checkpoint, parallelism and
network (:mod:`hpcflow.spec.job` assembles them into ``JobSpec``)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from hpcflow.protocol import DEFAULT_FAILURES_PER_NODE_HOUR
from hpcflow.spec.job_fields import (
    CONTROL_RE,
    DEFAULT_MAX_PREEMPTIONS,
    DEFAULT_SIGNAL_LEAD_S,
    MAX_CHECKPOINT_KEEP,
    MAX_INTERVAL_STEPS,
    MAX_REQUEUES,
    MAX_SIGNAL_LEAD_S,
    MAX_TEXT_CHARS,
    MIN_SIGNAL_LEAD_S,
    MIN_TIME_BEFORE_WARNING_S,
    MODULE_RE,
    SIGNAL_JITTER_S,
    SpecModel,
    StrictInt,
    Text,
    path_text,
    program_name,
    raise_problems,
)
from hpcflow.spec.numbers import bounded_float
from hpcflow.spec.s3uri import parse_s3_uri
from hpcflow.spec.timefmt import format_time_limit, parse_time_limit  # noqa: F401 - re-exported


class ProgramSpec(SpecModel):
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
            "Folder the ranks start in (srun --chdir); relative to the spec file's folder (with "
            "--set: to the current folder); "
            "default: the run directory."
        ),
    )
    protocol: Literal["auto", "requeue", "handles_signal"] = Field(
        default="auto",
        description=(
            "auto: ranks that join hpcflow's protocol (hpcflow.runtime) get the preemption signal "
            "and checkpoint; so does a program whose every process catches the signal itself "
            "(Lightning's default under Slurm, submitit, a signal.signal handler); any other "
            "program is never signalled, and is stopped and requeued shortly before the deadline. "
            "handles_signal: as auto, said by the user (the job log says the program was expected "
            "to catch it). requeue: never signalled, always stopped and requeued."
        ),
    )

    @field_validator("module")
    @classmethod
    def _module_name(cls, value: str | None) -> str | None:
        if value is not None and not MODULE_RE.fullmatch(value):
            raise ValueError("must be a dotted Python module name such as 'pkg.train'")
        return value

    @field_validator("argv")
    @classmethod
    def _argv_shape(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and (not value or not value[0]):
            raise ValueError("must be a non-empty list whose first item is the program to run")
        if value is not None:
            try:
                program_name(value[0])
            except ValueError as exc:
                raise ValueError(f"its first item, the program, {exc}") from None
        return value

    @field_validator("python")
    @classmethod
    def _python_path(cls, value: str | None) -> str | None:
        return None if value is None else program_name(value)

    @field_validator("workdir", mode="before")
    @classmethod
    def _workdir_path(cls, value: Any) -> Any:
        if value is None:
            return None
        text = path_text(value)
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
        raise_problems(problems)
        return self

    @model_validator(mode="after")
    def _module_or_argv(self) -> ProgramSpec:
        problems = []
        if (self.module is None) == (self.argv is None):
            problems.append(("module", self.module, "give exactly one of module (+ args) or argv"))
        if self.argv is not None and self.args:
            problems.append(("args", self.args, "args go with module; with argv put them in argv"))
        raise_problems(problems)
        return self


class ContainerSpec(SpecModel):
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
        if not value or re.search(r"[\s,]", value) or CONTROL_RE.search(value):
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
                and not CONTROL_RE.search(item)
            )
            if not ok:
                raise ValueError(
                    f"mount {item!r} must be SRC:DST or SRC:DST:ro|rw with absolute paths and "
                    "no commas or spaces (pyxis --container-mounts)"
                )
        return value


#: The shortest time limit that gets the default lead (:mod:`hpcflow.spec.job_lead`).
SHORTEST_DEFAULT_LIMIT_S = DEFAULT_SIGNAL_LEAD_S + MIN_TIME_BEFORE_WARNING_S


class PreemptionSpec(SpecModel):
    """How the job is warned before its time limit and how often it may requeue itself."""

    signal_lead_s: StrictInt = Field(
        json_schema_extra={"limits": f"0 (no warning), or {MIN_SIGNAL_LEAD_S} to {MAX_SIGNAL_LEAD_S:,}"
                                     f", at least {MIN_TIME_BEFORE_WARNING_S} s below time_limit"},
        default=DEFAULT_SIGNAL_LEAD_S,
        description=(
            "Seconds before the time limit that Slurm sends USR1 (step + save + 60 s jitter). "
            f"0: no warning. Left out with a time_limit under {SHORTEST_DEFAULT_LIMIT_S} s: 0."
        ),
    )
    max_requeues: StrictInt = Field(
        default=3, ge=0, le=MAX_REQUEUES,
        description=(
            "Requeues after a time-limit warning (Slurm's --signal, or one sent by hand): the "
            "job requeues itself while it has used fewer than this."
        ),
    )
    max_preemptions: StrictInt = Field(
        default=DEFAULT_MAX_PREEMPTIONS, ge=0, le=MAX_REQUEUES,
        description=(
            "Requeues after a preemption (a spot interruption notice, Slurm's own preemption), "
            "counted apart from max_requeues: a spot job preempted often has failed at nothing."
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
    spot_watch: bool = Field(
        default=False,
        description=(
            "true: the job's supervisor starts hpcflow spot-watch on every node of the job, for "
            "this job only (for spot nodes without the bootstrap service; docs/spot.md)."
        ),
    )

    @field_validator("signal_lead_s")
    @classmethod
    def _lead_range(cls, value: int) -> int:
        if value == 0:
            return value  # no warning (sbatch without --signal)
        if value < MIN_SIGNAL_LEAD_S:
            raise ValueError(
                f"must be 0 (no warning) or at least {MIN_SIGNAL_LEAD_S} s: Slurm sends the signal up to "
                f"{SIGNAL_JITTER_S} s off its mark (sbatch --signal), and the ranks need time "
                "on top of that to finish a step and save a checkpoint"
            )
        if value > MAX_SIGNAL_LEAD_S:
            raise ValueError(f"must be at most {MAX_SIGNAL_LEAD_S} s (sbatch --signal)")
        return value


class CheckpointSpec(SpecModel):
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
        description=(
            "Save every N steps; 0 saves only when preempted. Giving it (0 included) turns "
            "the default interval: auto off."
        ),
    )
    interval: Literal["auto"] | None = Field(
        default="auto", json_schema_extra={"limits": "auto, or null"},
        description=(
            "auto (the default unless interval_steps is given): programs on the runtime API save "
            "after a warm-up of 10 steps, then every availability-optimal interval from the "
            "measured save cost, step time and failure rate, chosen again at each restart "
            "(docs/plan.md); null: interval_steps alone decides."
        ),
    )
    failures_per_node_hour: bounded_float(0, 1000) = Field(  # type: ignore[valid-type]
        default=DEFAULT_FAILURES_PER_NODE_HOUR,
        description=(
            "Unwarned failures per node-hour that interval: auto plans with; default Llama 3's "
            "(419 in 54 days on 2,048 nodes, arXiv:2407.21783)."
        ),
    )
    s3_uri: Text | None = Field(
        default=None,
        json_schema_extra={"limits": "s3://BUCKET or s3://BUCKET/PREFIX (S3 naming rules)"},
        description=(
            "Mirror each committed checkpoint to this S3 prefix in the background and pull the "
            "newest complete one when the checkpoint folder has none; credentials come from "
            "boto3's standard chain (docs/checkpoints.md)."
        ),
    )

    @model_validator(mode="before")
    @classmethod
    def _fixed_interval_turns_auto_off(cls, data: Any) -> Any:
        """``interval_steps`` given (0 included) and no ``interval``: the fixed interval (or
        saves only when preempted) that the spec asks for, not the default ``auto``."""
        if isinstance(data, Mapping) and "interval_steps" in data and "interval" not in data:
            return {**data, "interval": None}
        return data

    @field_validator("dir", mode="before")
    @classmethod
    def _dir_text(cls, value: Any) -> Any:
        return None if value is None else path_text(value)

    @model_validator(mode="after")
    def _one_interval(self) -> CheckpointSpec:
        if self.interval == "auto" and self.interval_steps:
            raise_problems([("interval_steps", self.interval_steps,
                              "must be 0 with interval: auto (the runtime chooses the interval); "
                              "give one of them")])
        return self

    @field_validator("s3_uri")
    @classmethod
    def _s3_uri(cls, value: str | None) -> str | None:
        if value is not None:
            parse_s3_uri(value)  # ValueError says what is allowed
        return value
