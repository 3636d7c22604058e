"""A job spec with ``platform: sagemaker`` as a ``CreateTrainingJob`` request. Pure, apart from
botocore's offline parameter validation (no client, no credentials).

What goes where (SageMaker API Reference, ``CreateTrainingJob``; botocore's ``sagemaker`` model
is the exact shape, checked by :func:`hpcflow.aws.requests.request_problems`):

- ``ResourceConfig``: ``nodes`` instances of ``sagemaker.instance_type``, ``volume_gb`` each.
- ``AlgorithmSpecification``: the image, ``File`` input mode, and as ``ContainerEntrypoint`` /
  ``ContainerArguments`` hpcflow's container launcher (:mod:`hpcflow.sagemaker.launch`), which
  starts one torchrun per instance as SageMaker's training toolkit does, then the program.
- ``Environment``: the spec's ``env``, then hpcflow's own settings (they win): the checkpoint
  folder (``CheckpointConfig.LocalPath``), interval, keep, parallelism.
- ``StoppingCondition``: ``MaxRuntimeInSeconds`` = ``time_limit``; with managed spot
  ``MaxWaitTimeInSeconds`` = ``sagemaker.max_wait`` when given, else ``time_limit x (1 + k)``
  with ``k`` = ``sagemaker.expected_interruptions`` when given, else the planner's 95th
  percentile of spot interruptions for ``nodes`` and ``time_limit``
  (:func:`hpcflow.plan.spot_wait.spot_max_wait`).
- ``EnableManagedSpotTraining`` = ``sagemaker.spot``; ``CheckpointConfig`` = ``{S3Uri:
  checkpoint.s3_uri, LocalPath: sagemaker.checkpoint_local_path}``.
"""

from __future__ import annotations

import time
from typing import Any

from hpcflow import protocol
from hpcflow.errors import SpecError
from hpcflow.spec.job import JobSpec

#: The module the container runs first (hpcflow must be installed in the image).
LAUNCH_MODULE = "hpcflow.sagemaker.launch"
SERVICE = "sagemaker"
OPERATION = "CreateTrainingJob"


def training_job_name(spec: JobSpec, now_s: float | None = None) -> str:
    """``<name>-YYYYMMDD-HHMMSS`` (UTC): unique per submission second, within SageMaker's 63
    characters (the spec refuses a longer name)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(time.time() if now_s is None else now_s))
    return f"{spec.name}-{stamp}"


def container_command(spec: JobSpec) -> tuple[list[str], list[str]]:
    """``(ContainerEntrypoint, ContainerArguments)``: the launcher, then the program's words.

    The launcher starts ``torchrun --nproc-per-node <tasks_per_node>`` on every instance with
    the node rank and rendezvous host from the resource config (:mod:`hpcflow.sagemaker.launch`).
    """
    sm = spec.sagemaker
    assert sm is not None  # noqa: S101 - the spec refuses platform: sagemaker without the block
    entry = [sm.python, "-m", LAUNCH_MODULE]
    args = ["--nproc-per-node", str(spec.tasks_per_node), "--"]
    program = spec.program
    if program.module is not None:
        args += [sm.python, "-m", program.module, *program.args]
    else:
        args += list(program.argv or [])
    return entry, args


def container_env(spec: JobSpec) -> dict[str, str]:
    """The container's ``Environment``: the spec's ``env``, then hpcflow's settings (which win).

    ``HPCFLOW_CHECKPOINT_DIR`` is ``CheckpointConfig.LocalPath``, the folder SageMaker syncs.
    """
    from hpcflow.slurm.render import spec_env

    sm = spec.sagemaker
    assert sm is not None  # noqa: S101 - the spec refuses platform: sagemaker without the block
    env = {name: str(value) for name, value in spec.env.items()}
    env.update(spec_env(spec).variables())
    env[protocol.ENV_CHECKPOINT_DIR] = sm.checkpoint_local_path
    return dict(sorted(env.items()))


def build_request(spec: JobSpec, *, job_name: str | None = None) -> dict[str, Any]:
    """The ``CreateTrainingJob`` request for ``spec`` (keyword arguments of boto3's
    ``create_training_job``), checked against botocore's model.

    Raises:
        SpecError: ``spec`` is not ``platform: sagemaker``, or botocore's validation finds a
            problem the spec model did not (the message carries botocore's lines).
    """
    if spec.platform != "sagemaker" or spec.sagemaker is None:
        raise SpecError("platform: the spec is for Slurm (platform: slurm); set platform: "
                        "sagemaker and a sagemaker block to render a SageMaker training job")
    sm = spec.sagemaker
    check_instance_type(sm.instance_type)
    entry, args = container_command(spec)
    stopping = {"MaxRuntimeInSeconds": spec.time_limit_s}
    if sm.spot:
        stopping["MaxWaitTimeInSeconds"] = sm.max_wait_s(spec.time_limit_s, spec.nodes)
    request: dict[str, Any] = {
        "TrainingJobName": job_name or training_job_name(spec),
        "RoleArn": sm.role_arn,
        "AlgorithmSpecification": {
            "TrainingImage": sm.image,
            "TrainingInputMode": "File",
            "ContainerEntrypoint": entry,
            "ContainerArguments": args,
        },
        "ResourceConfig": {
            "InstanceType": sm.instance_type,
            "InstanceCount": spec.nodes,
            "VolumeSizeInGB": sm.volume_gb,
        },
        "OutputDataConfig": {"S3OutputPath": sm.output_s3_uri},
        "StoppingCondition": stopping,
        "EnableManagedSpotTraining": sm.spot,
        "CheckpointConfig": {"S3Uri": spec.checkpoint.s3_uri,
                             "LocalPath": sm.checkpoint_local_path},
        "Environment": container_env(spec),
        "Tags": [{"Key": "hpcflow:job-name", "Value": spec.name}],
    }
    check_request(request)
    return request


def check_instance_type(name: str) -> None:
    """Raise :class:`SpecError` naming ``sagemaker.instance_type`` unless ``name`` is one of the
    ``TrainingInstanceType`` values of botocore's sagemaker model, with the closest one."""
    import difflib

    from hpcflow.aws.requests import enum_values

    allowed = enum_values(SERVICE, "TrainingInstanceType")
    if name in allowed:
        return
    close = difflib.get_close_matches(name, allowed, n=1)
    hint = (f"did you mean {close[0]!r}?" if close else "allowed: the TrainingInstanceType "
            "values of botocore's sagemaker model, e.g. ml.p5.48xlarge, ml.g5.12xlarge")
    message = f"sagemaker.instance_type: {name!r} is not a SageMaker training instance type; {hint}"
    raise SpecError(message, [message])


def check_request(request: dict[str, Any]) -> None:
    """Raise :class:`SpecError` unless botocore's parameter validation accepts ``request``."""
    from hpcflow.aws.requests import request_problems

    problems = request_problems(SERVICE, OPERATION, request)
    if problems:
        raise SpecError("the CreateTrainingJob request does not pass botocore's validation:\n  "
                        + "\n  ".join(problems))
