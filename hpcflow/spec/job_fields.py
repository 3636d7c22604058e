"""Field types, bounds and the base model of the job spec (:mod:`hpcflow.spec.job`).

Every value that reaches a shell, an ``#SBATCH`` line or a Slurm filename pattern is checked by
these types, so the renderer can trust the model. The names here are the spec modules' shared
vocabulary (``job``, ``job_parts``, ``job_layout``, ``job_resilience``, ``envvalues``); none of
them reaches into another's private names.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from hpcflow.spec.envnames import env_name_problem
from hpcflow.spec.timefmt import format_time_limit, parse_time_limit  # noqa: F401 - re-exported

#: Slurm checks ``--signal`` times on a timer, so the signal may come up to 60 s away from the
#: requested lead (sbatch(1), ``--signal``: "the signal may be sent up to 60 seconds earlier than
#: specified"). The lead must cover that jitter plus time for the ranks to reach a step boundary
#: and save; 30 s is the least that is sane for any real model.
SIGNAL_JITTER_S = 60
MIN_SIGNAL_LEAD_S = SIGNAL_JITTER_S + 30
#: The warning lead a spec gets when it names none (and its time limit is longer than this).
DEFAULT_SIGNAL_LEAD_S = 120
#: The least run a job with a warning gets before the earliest moment Slurm may send it
#: (``time_limit - signal_lead_s - SIGNAL_JITTER_S``), in seconds: a minute to start and train.
MIN_RUN_BEFORE_WARNING_S = 60
#: The least ``time_limit - signal_lead_s``, in seconds: Slurm's jitter plus that run. A lead 1 s
#: below the limit (or one that leaves less than the jitter) puts the warning at the start of
#: every attempt, and a job that joins the protocol saves and requeues at once, never training.
#: The default lead obeys the same rule (:mod:`hpcflow.spec.job_lead`).
MIN_TIME_BEFORE_WARNING_S = SIGNAL_JITTER_S + MIN_RUN_BEFORE_WARNING_S
#: sbatch(1), ``--signal``: "sig_time must be an integer value between 0 and 65535".
MAX_SIGNAL_LEAD_S = 65535

NAME_RE = re.compile(r"[A-Za-z0-9._-]{1,64}")
SLURM_NAME_RE = re.compile(r"[A-Za-z0-9._-]+")
PARTITION_RE = re.compile(r"[A-Za-z0-9._-]+(,[A-Za-z0-9._-]+)*")
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
INSTANCE_TYPE_RE = re.compile(r"[a-z][a-z0-9-]*\.[a-z0-9]+")
VERSION_RE = re.compile(r"v?[0-9]+(\.[0-9]+)*([-+][A-Za-z0-9.]+)?")
#: A node's interfaces as EC2 shows them, for checking NCCL_SOCKET_IFNAME before the job runs.
TYPICAL_INTERFACES = ("lo", "docker0", "ens5", "eth0")
MODULE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
# sbatch(1), "filename pattern": '%' starts a replacement symbol and a backslash anywhere turns
# all replacement off; '"' would end the quoted #SBATCH value. Control characters (newline) would
# end the #SBATCH line.
RUN_DIR_FORBIDDEN = {'"': "a double quote", "%": "'%'", "\\": "a backslash"}

StrictInt = Annotated[int, Field(strict=True)]
#: A number field: an int or a float, finite; YAML's ``true`` is not ``1.0`` and ``"3"`` is not a
#: number (strict), so a typo is refused with the field's name rather than taken.
StrictFloat = Annotated[float, Field(strict=True, allow_inf_nan=False)]

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
#: Far above any real bound of ``preemption.max_requeues`` (the supervisor counts requeues
#: against it, hpcflow.supervisor.budgets).
MAX_REQUEUES = 1000
#: ``preemption.max_preemptions`` by default: a bound that stops a job that is preempted at
#: every start (a spot pool with no capacity) within a day or so of 1-hour attempts, and that a
#: job preempted a few times a day never reaches (submitit bounds only time-outs, not
#: preemptions; a bound of some size keeps a job from coming back forever).
DEFAULT_MAX_PREEMPTIONS = 20
MAX_CHECKPOINT_KEEP = 10_000
MAX_INTERVAL_STEPS = 10**12
#: execve(2): one argument or environment string may hold at most 128 KiB (MAX_ARG_STRLEN).
MAX_TEXT_CHARS = 32 * 1024
#: Linux NAME_MAX (one path component) and PATH_MAX (a whole path), in bytes (limits.h).
NAME_MAX_BYTES = 255
PATH_MAX_BYTES = 4095


# --------------------------------------------------------------------------------------------
# Field types


def scalar_to_str(value: Any) -> Any:
    """Numbers become their text (``10`` -> ``"10"``); booleans are refused as ambiguous."""
    if isinstance(value, bool):
        raise ValueError('a boolean is ambiguous here; quote it, e.g. "true"')
    if isinstance(value, int | float):
        return str(value)
    return value


def no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain a NUL character (it cannot be passed to a program)")
    if len(value) > MAX_TEXT_CHARS:
        raise ValueError(f"must be at most {MAX_TEXT_CHARS} characters (Linux refuses one argument "
                         "or environment string over 128 KiB: execve(2), MAX_ARG_STRLEN)")
    return value


#: A program argument or environment value: any text but NUL; numbers are taken as text.
Text = Annotated[str, BeforeValidator(scalar_to_str), AfterValidator(no_nul)]


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


def path_text(value: Any) -> str:
    if isinstance(value, PurePath):
        value = str(value)
    if not isinstance(value, str) or not value:
        raise ValueError("must be a non-empty path string")
    if CONTROL_RE.search(value):
        raise ValueError("must not contain control characters such as a newline")
    encoded = value.encode("utf-8", "surrogatepass")
    if len(encoded) > PATH_MAX_BYTES or any(len(part) > NAME_MAX_BYTES for part in encoded.split(b"/")):
        raise ValueError(f"is too long: Linux allows {NAME_MAX_BYTES} bytes per path component "
                         f"and {PATH_MAX_BYTES} bytes per path (NAME_MAX, PATH_MAX)")
    return value


def program_name(value: str) -> str:
    """An executable as srun and torchrun take it, never one of their options. Whether a
    relative path is allowed depends on program.workdir (:meth:`ProgramSpec._relative_paths`)."""
    value = path_text(value)
    if value.startswith("-"):
        raise ValueError("must not start with '-': srun would read it as one of its own options")
    return value


def time_limit_text(value: Any) -> str:
    return format_time_limit(parse_time_limit(value))


# --------------------------------------------------------------------------------------------
# Models


class SpecModel(BaseModel):
    """Base of every job spec block: immutable, and an unknown key is an error."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def raise_problems(problems: list[tuple[str, Any, str]]) -> None:
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
