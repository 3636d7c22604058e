"""The ``sagemaker`` block of a job spec: the same job run as a SageMaker training job
(``platform: sagemaker``), rendered into a ``CreateTrainingJob`` request by
:mod:`hpcflow.sagemaker.request`.

Facts the fields respect (botocore's ``sagemaker`` service model, seen with botocore 1.44, is the
request's exact shape; the SageMaker API Reference says the rest):

- ``TrainingJobName``: 1-63 characters matching ``[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}``.
- ``RoleArn``: ``arn:aws[a-z-]*:iam::<12 digits>:role/<name>``.
- ``TrainingImage``: at most 255 characters.
- ``StoppingCondition``: ``MaxRuntimeInSeconds`` at most 28 days (2,419,200 s; API Reference,
  ``StoppingCondition``); with managed spot ``MaxWaitTimeInSeconds`` must be at least it, and
  SageMaker refuses it without managed spot ("Invalid MaxWaitTimeInSeconds. It is only supported
  when EnableManagedSpotTraining is set to true"). hpcflow derives it from the time limit and
  the spot interruptions the planner expects (:mod:`hpcflow.plan.spot_wait`) unless
  ``max_wait`` or ``expected_interruptions`` is given.
- ``CheckpointConfig.LocalPath``: default ``/opt/ml/checkpoints``, synced both ways with
  ``S3Uri`` (API Reference, ``CheckpointConfig``; developer guide, "Checkpoints in Amazon
  SageMaker AI", https://docs.aws.amazon.com/sagemaker/latest/dg/model-checkpoints.html).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BeforeValidator, Field, field_validator

from hpcflow.spec.job_fields import (
    CONTROL_RE,
    INSTANCE_TYPE_RE,
    SpecModel,
    StrictInt,
    path_text,
)
from hpcflow.spec.s3uri import parse_s3_uri
from hpcflow.spec.timefmt import format_time_limit, parse_time_limit

if TYPE_CHECKING:
    from hpcflow.spec.job import JobSpec

#: botocore's pattern for ``RoleArn`` (sagemaker model, ``RoleArn`` shape).
ROLE_ARN_RE = re.compile(r"arn:aws[a-z\-]*:iam::\d{12}:role/?[a-zA-Z_0-9+=,.@\-_/]+")
#: botocore's pattern for ``TrainingJobName``, and its length bound.
TRAINING_JOB_NAME_RE = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")
TRAINING_JOB_NAME_MAX = 63
#: hpcflow adds ``-YYYYMMDD-HHMMSS`` to the spec's name to make each submission's name unique.
NAME_SUFFIX_CHARS = 16
#: StoppingCondition.MaxRuntimeInSeconds: at most 28 days (SageMaker API Reference).
MAX_RUNTIME_S = 28 * 24 * 3600
#: CheckpointConfig.LocalPath's default (SageMaker API Reference, CheckpointConfig).
DEFAULT_CHECKPOINT_LOCAL_PATH = "/opt/ml/checkpoints"
#: ContainerEntrypoint/ContainerArguments items and Environment values: at most these many
#: characters (botocore's sagemaker model).
MAX_ARG_CHARS = 256
MAX_ENV_VALUE_CHARS = 512
MAX_ENV_ENTRIES = 100
MAX_EXPECTED_INTERRUPTIONS = 100
#: SageMaker's instance type names are EC2's with this prefix (hpcflow.aws.requests).
ML_PREFIX = "ml."


def _duration_text(value: Any) -> str | None:
    """``max_wait`` kept as ``[D-]HH:MM:SS``, or None (ValueError says what is allowed).

    A bare number is refused: it is seconds to the SageMaker SDK (the estimator's ``max_wait``)
    and minutes in Slurm's time format, and either reading of the other's would be wrong by a
    factor of 60."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str) or value.strip().isdigit():
        hint = ""
        if not isinstance(value, bool) and str(value).strip().isdigit():
            hint = f'; {int(str(value).strip())} s is "{format_time_limit(int(str(value).strip()))}"'
        raise ValueError('give it as "HH:MM:SS" or "D-HH:MM:SS": a bare number is seconds to '
                         "the SageMaker SDK and minutes in Slurm's time format" + hint)
    return format_time_limit(parse_time_limit(value))


class SageMakerSpec(SpecModel):
    """How the job runs as a SageMaker training job (``platform: sagemaker``)."""

    image: str = Field(
        json_schema_extra={"limits": "1-255 characters, no spaces"},
        description="Training image URI (AlgorithmSpecification.TrainingImage); hpcflow and "
                    "torch must be installed in it.",
    )
    role_arn: str = Field(
        json_schema_extra={"limits": "arn:aws:iam::<12 digits>:role/NAME"},
        description="IAM role SageMaker runs the job as (RoleArn).",
    )
    instance_type: str = Field(
        json_schema_extra={"limits": "a SageMaker training instance type (botocore's "
                                     "TrainingInstanceType); the ml. prefix may be left out"},
        description="Instance type of the nodes, e.g. ml.p5.48xlarge (ResourceConfig.InstanceType).",
    )
    output_s3_uri: str = Field(
        json_schema_extra={"limits": "s3://BUCKET or s3://BUCKET/PREFIX"},
        description="Where SageMaker writes the job's output (OutputDataConfig.S3OutputPath).",
    )
    volume_gb: StrictInt = Field(
        default=100, ge=1, le=16384,
        description="Storage volume per instance in GB (ResourceConfig.VolumeSizeInGB).",
    )
    spot: bool = Field(
        default=True,
        description="Managed spot training (EnableManagedSpotTraining); false: on-demand.",
    )
    expected_interruptions: StrictInt | None = Field(
        default=None, ge=0, le=MAX_EXPECTED_INTERRUPTIONS,
        description="Spot interruptions the job should survive: MaxWaitTimeInSeconds = "
                    "time_limit x (1 + this), time to wait for capacity and rerun. Default: "
                    "the planner's 95th percentile for the nodes and time limit (at least 1; "
                    "docs/sagemaker.md).",
    )
    max_wait: Annotated[str | None, BeforeValidator(_duration_text)] = Field(
        default=None,
        json_schema_extra={"limits": "at least time_limit, at most 365 days; managed spot only"},
        description='MaxWaitTimeInSeconds itself, as "HH:MM:SS" or "D-HH:MM:SS" (the time_limit '
                    "forms; a bare number is refused: seconds to the SageMaker SDK, minutes to "
                    "Slurm); overrides the derived wait. Leave out expected_interruptions with it.",
    )
    checkpoint_local_path: str = Field(
        default=DEFAULT_CHECKPOINT_LOCAL_PATH,
        json_schema_extra={"limits": "an absolute path"},
        description="The container's checkpoint folder that SageMaker syncs with "
                    "checkpoint.s3_uri (CheckpointConfig.LocalPath).",
    )
    python: str = Field(
        default="python3",
        description="Python interpreter inside the image that runs the launcher and the program.",
    )

    @field_validator("image")
    @classmethod
    def _image(cls, value: str) -> str:
        if not value or len(value) > 255 or re.search(r"\s", value) or CONTROL_RE.search(value):
            raise ValueError("must be an image URI of 1-255 characters without spaces, e.g. "
                             "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1")
        return value

    @field_validator("role_arn")
    @classmethod
    def _role(cls, value: str) -> str:
        if not ROLE_ARN_RE.fullmatch(value) or len(value) > 2048:
            raise ValueError("must be an IAM role ARN such as "
                             "arn:aws:iam::123456789012:role/SageMakerTraining")
        return value

    @field_validator("instance_type")
    @classmethod
    def _instance_type(cls, value: str) -> str:
        """The ``ml.`` name; whether SageMaker knows it is checked against botocore's
        ``TrainingInstanceType`` enum when the request is built (:mod:`hpcflow.sagemaker.request`)."""
        name = value if value.startswith(ML_PREFIX) else ML_PREFIX + value
        if not INSTANCE_TYPE_RE.fullmatch(name[len(ML_PREFIX):]):
            raise ValueError("must be a SageMaker training instance type such as "
                             "ml.p5.48xlarge (the ml. prefix may be left out)")
        return name

    @field_validator("output_s3_uri")
    @classmethod
    def _output(cls, value: str) -> str:
        parse_s3_uri(value)  # ValueError says what is allowed
        return value

    @field_validator("checkpoint_local_path")
    @classmethod
    def _local_path(cls, value: Any) -> str:
        text = path_text(value)
        if not text.startswith("/"):
            raise ValueError("must be an absolute path inside the container, e.g. "
                             "/opt/ml/checkpoints")
        return text

    @field_validator("python")
    @classmethod
    def _python(cls, value: str) -> str:
        if not value or re.search(r"\s", value) or CONTROL_RE.search(value) or value.startswith("-"):
            raise ValueError("must be an interpreter name or absolute path, e.g. python3")
        return value

    @property
    def max_wait_given_s(self) -> int | None:
        """``max_wait`` in seconds, or None when not given."""
        return None if self.max_wait is None else parse_time_limit(self.max_wait)

    def max_wait_s(self, time_limit_s: int, nodes: int) -> int:
        """MaxWaitTimeInSeconds for a job of ``nodes`` instances whose MaxRuntimeInSeconds is
        ``time_limit_s``: ``max_wait`` when given; else the run time plus one more run time's
        wait per interruption, ``expected_interruptions`` of them when given, else the
        planner's (:func:`hpcflow.plan.spot_wait.spot_max_wait`, with its bounds)."""
        from hpcflow.plan.spot_wait import MAX_WAIT_S, spot_max_wait

        if (given := self.max_wait_given_s) is not None:
            return given
        if self.expected_interruptions is not None:
            return min(time_limit_s * (1 + self.expected_interruptions), MAX_WAIT_S)
        return spot_max_wait(time_limit_s, nodes).max_wait_s


def sagemaker_problems(spec: JobSpec) -> list[tuple[str, Any, str]]:
    """The cross-field rules of ``platform: sagemaker``, as (field, value, what is allowed) rows
    for :func:`hpcflow.spec.job_fields.raise_problems`.

    Slurm's own settings (``partition``, ``account``, ``launcher``, ``preemption``'s signal and
    requeues) are not used on SageMaker and not refused, so one spec file runs on both platforms
    with ``platform`` changed; a pyxis ``container`` or a ``program.workdir`` on the Slurm nodes
    is refused, as it would not be what runs."""
    if spec.platform == "slurm":
        return []  # a sagemaker block is kept for platform: sagemaker and unused on Slurm
    problems: list[tuple[str, Any, str]] = []
    if spec.sagemaker is None:
        problems.append(("sagemaker", None, "platform: sagemaker needs a sagemaker block with "
                         "image, role_arn, instance_type and output_s3_uri"))
    if spec.checkpoint.s3_uri is None:
        problems.append(("checkpoint.s3_uri", None, "platform: sagemaker needs it: SageMaker "
                         "syncs the checkpoint folder with it (CheckpointConfig.S3Uri) and "
                         "brings the checkpoints back after an interruption"))
    longest = TRAINING_JOB_NAME_MAX - NAME_SUFFIX_CHARS
    if not TRAINING_JOB_NAME_RE.fullmatch(spec.name) or len(spec.name) > longest:
        problems.append(("name", spec.name, f"with platform: sagemaker it must be 1-{longest} "
                         "letters, digits and hyphens, starting and ending with a letter or "
                         "digit (SageMaker's TrainingJobName; hpcflow adds -YYYYMMDD-HHMMSS)"))
    if spec.time_limit_s > MAX_RUNTIME_S:
        problems.append(("time_limit", spec.time_limit, "with platform: sagemaker it must be "
                         f"at most 28 days ({MAX_RUNTIME_S} s, MaxRuntimeInSeconds)"))
    problems.extend(_max_wait_problems(spec))
    if spec.container is not None:
        problems.append(("container", "{...}", "is a pyxis image for Slurm; with platform: "
                         "sagemaker leave it out (the image is sagemaker.image)"))
    problems.extend(_env_problems(spec))
    program = spec.program
    words = [*(program.argv or []), *program.args]
    for i, word in enumerate(words):
        if len(word) > MAX_ARG_CHARS:
            where = "program.argv" if program.argv else "program.args"
            problems.append((where, f"{word[:40]}...", f"item {i}: at most {MAX_ARG_CHARS} "
                             "characters on SageMaker (ContainerArguments)"))
    if program.workdir is not None:
        problems.append(("program.workdir", str(program.workdir), "is a path on the Slurm "
                         "nodes; with platform: sagemaker leave it out (the image's working "
                         "folder is used)"))
    return problems


def _max_wait_problems(spec: JobSpec) -> list[tuple[str, Any, str]]:
    sm = spec.sagemaker
    if sm is None or sm.max_wait is None:
        return []
    if not sm.spot:
        return [("sagemaker.max_wait", sm.max_wait, "is for managed spot only (SageMaker refuses "
                 "MaxWaitTimeInSeconds without it); leave it out with spot: false")]
    if sm.expected_interruptions is not None:
        return [("sagemaker.max_wait", sm.max_wait, "and sagemaker.expected_interruptions both "
                 "set the wait; give one of them")]
    if (wait := sm.max_wait_given_s or 0) < spec.time_limit_s:
        return [("sagemaker.max_wait", sm.max_wait, f"must be at least time_limit "
                 f"({spec.time_limit} = {spec.time_limit_s} s; SageMaker's "
                 f"MaxWaitTimeInSeconds >= MaxRuntimeInSeconds), not {wait} s")]
    return []


def _env_problems(spec: JobSpec) -> list[tuple[str, Any, str]]:
    from hpcflow.spec.envvalues import EnvFromFile

    problems: list[tuple[str, Any, str]] = []
    if len(spec.env) > MAX_ENV_ENTRIES - 10:
        problems.append(("env", f"{len(spec.env)} entries", f"at most {MAX_ENV_ENTRIES - 10} "
                         f"on SageMaker (Environment holds {MAX_ENV_ENTRIES}; hpcflow adds its "
                         "own)"))
    for name, value in spec.env.items():
        if isinstance(value, EnvFromFile):
            problems.append((f"env.{name}", "{from_file: ...}", "a value read from a file on "
                             "the Slurm node cannot reach a SageMaker container; give the value, "
                             "or put it in the image or a secret the program reads"))
        elif len(value) > MAX_ENV_VALUE_CHARS:
            problems.append((f"env.{name}", f"{value[:40]}...", f"at most {MAX_ENV_VALUE_CHARS} "
                             "characters on SageMaker (Environment values)"))
    return problems
