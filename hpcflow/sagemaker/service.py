"""``hpcflow submit`` for a spec with ``platform: sagemaker``: render the ``CreateTrainingJob``
request, keep it in the run directory, call the API, and record the submission.

Records, as for a Slurm job (:mod:`hpcflow.jobs.records`): the resolved spec (``job.yaml``) and
the request (``sagemaker-request.json``, mode 0600) in the run directory (mode 0700), and one
line per submission in the run directory's ``sagemaker-jobs.jsonl`` with the training job's
name and ARN. The client comes from boto3's standard chain (credentials, region;
``AWS_ENDPOINT_URL_SAGEMAKER`` or ``AWS_ENDPOINT_URL`` picks another endpoint: boto3 >= 1.28.57,
"Service-specific endpoints") or is passed in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcflow.errors import SubmitError
from hpcflow.jobs import records, trust
from hpcflow.sagemaker.request import build_request
from hpcflow.spec.envvalues import shown_env
from hpcflow.spec.job import JobSpec

REQUEST_FILE = "sagemaker-request.json"
#: One line per SageMaker submission (kept apart from ``submissions.jsonl``, whose lines are
#: Slurm jobs).
JOBS_FILE = "sagemaker-jobs.jsonl"


@dataclass(frozen=True)
class SageMakerSubmit:
    """What a SageMaker submit did.

    Attributes:
        request: the ``CreateTrainingJob`` request (sent, or for a dry run, to be sent).
        run_dir: the run directory.
        job_name: the training job's name (``TrainingJobName``).
        job_arn: the ARN SageMaker returned, or None for a dry run.
        request_path: where the request was written, or None for a dry run.
        env: the spec's ``env`` as ``--json`` shows it.
    """

    request: dict[str, Any]
    run_dir: Path
    job_name: str
    job_arn: str | None = None
    request_path: Path | None = None
    env: dict[str, str] = field(default_factory=dict)


def make_client(region: str | None = None) -> Any:
    """A SageMaker client from boto3's standard chain (see the module docstring)."""
    import boto3

    return boto3.session.Session(region_name=region).client("sagemaker")


def submit(spec: JobSpec, *, dry_run: bool = False, client: Any = None,
           job_name: str | None = None, allow_shared_dir: bool = False) -> SageMakerSubmit:
    """Render, check and (unless ``dry_run``) create the training job.

    Args:
        spec: a validated spec with ``platform: sagemaker``.
        dry_run: render and check only; nothing is written or sent.
        client: a boto3 SageMaker client (default :func:`make_client`).
        job_name: the ``TrainingJobName`` (default ``<name>-YYYYMMDD-HHMMSS``, UTC).
        allow_shared_dir: as for a Slurm submit (:mod:`hpcflow.jobs.trust`).

    Raises:
        SpecError: the request does not pass botocore's validation.
        SubmitError: the run directory cannot be written, or SageMaker refused the request
            (the message carries its error code and message; nothing is recorded).
    """
    from hpcflow.jobs.run_dir import check_run_dir
    from hpcflow.jobs.service import spec_yaml

    request = build_request(spec, job_name=job_name)
    run_dir = Path(spec.run_dir)
    check_run_dir(run_dir)
    if not allow_shared_dir:
        trust.check_trusted_dir("run_dir", run_dir)
    trust.check_state_files(run_dir)
    result = SageMakerSubmit(request, run_dir, request["TrainingJobName"],
                             env=shown_env(spec.env))
    if dry_run:
        return result
    client = client or make_client()
    try:
        response = client.create_training_job(**request)
    except Exception as exc:  # noqa: BLE001 - botocore's errors, reported with their text
        raise SubmitError(f"SageMaker refused CreateTrainingJob {request['TrainingJobName']!r}: "
                          f"{type(exc).__name__}: {exc}\n(nothing was recorded; `hpcflow submit "
                          "--dry-run` prints the request)") from None
    arn = str(response.get("TrainingJobArn", ""))
    request_path = _record(run_dir, spec_yaml(spec), request, arn, allow_shared_dir)
    return SageMakerSubmit(request, run_dir, request["TrainingJobName"], arn, request_path,
                           result.env)


def _record(run_dir: Path, spec_text: str, request: dict[str, Any], arn: str,
            keep_mode: bool) -> Path:
    """Write the resolved spec and the request into the run directory, then append the
    submission line. A run directory that cannot be written is said, with the job's name: the
    job exists in SageMaker by then."""
    try:
        records.make_private_dirs(run_dir, keep_mode=keep_mode)
        records.write_atomic(run_dir / records.SPEC_FILE, spec_text, mode=records.SPEC_MODE)
        path = run_dir / REQUEST_FILE
        records.write_atomic(path, json.dumps(request, indent=2, sort_keys=True) + "\n",
                             mode=records.SPEC_MODE)
        records.append_jsonl(run_dir / JOBS_FILE, {
            "platform": "sagemaker", "job_name": request["TrainingJobName"],
            "job_arn": arn, "time": records.now()})
    except OSError as exc:
        raise SubmitError(f"run_dir: training job {request['TrainingJobName']!r} was created "
                          f"({arn}) but its records cannot be written into {str(run_dir)!r} "
                          f"({exc.strerror or exc})") from None
    return path


def describe(job_name: str, *, client: Any = None) -> dict[str, Any]:
    """``DescribeTrainingJob`` for ``job_name``: status, secondary status, billable and
    training seconds (SageMaker API Reference, ``DescribeTrainingJob``).

    Raises:
        SubmitError: SageMaker could not be asked or does not know the job.
    """
    client = client or make_client()
    try:
        return dict(client.describe_training_job(TrainingJobName=job_name))
    except Exception as exc:  # noqa: BLE001 - botocore's errors, reported with their text
        raise SubmitError(f"DescribeTrainingJob {job_name!r} failed: {type(exc).__name__}: "
                          f"{exc}") from None
