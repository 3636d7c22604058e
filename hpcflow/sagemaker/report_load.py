"""Ask SageMaker and CloudWatch Logs about a training job and build its report
(:func:`hpcflow.sagemaker.report.build_sagemaker_report`, which is pure): the I/O half of
``hpcflow sagemaker report``."""

from __future__ import annotations

import time
from typing import Any

from hpcflow.sagemaker.logs import JobLogs, make_logs_client
from hpcflow.sagemaker.record import decode_describe
from hpcflow.sagemaker.report import RANK0_HOST, SageMakerReport, build_sagemaker_report
from hpcflow.sagemaker.service import describe

__all__ = ["gpus_of", "load_report"]


def gpus_of(instance_type: str) -> int | None:
    """GPUs (or Trainium/Inferentia devices) of a SageMaker instance type (``ml.g5.12xlarge``
    -> 4), from hpcflow's shipped EC2 facts (:mod:`hpcflow.pcluster.catalog`); 0 for a type
    without accelerators, None for a type hpcflow has no facts for."""
    from hpcflow.aws.requests import to_ec2_instance_type
    from hpcflow.pcluster.catalog import OFFLINE, ec2_types

    ec2 = to_ec2_instance_type(instance_type)
    if ec2 in OFFLINE:
        return OFFLINE[ec2].accelerator_count
    row = ec2_types().get(ec2)
    return None if row is None else row.nvidia_gpus or row.aws_accelerators


def load_report(job_name: str, *, client: Any = None, logs_client: Any = None,
                now_s: float | None = None) -> SageMakerReport:
    """``DescribeTrainingJob`` and rank 0's log streams (host ``algo-1``) of ``job_name``, as a
    :class:`~hpcflow.sagemaker.report.SageMakerReport`.

    Raises:
        SubmitError: SageMaker could not be asked or does not know the job.
        Ec2Error: CloudWatch Logs could not be asked (a job that has written no log yet reads
            as one without lines).
    """
    rec = decode_describe(describe(job_name, client=client))
    logs = JobLogs(logs_client or make_logs_client(), job_name, host=RANK0_HOST)
    lines = logs.read()
    return build_sagemaker_report(rec, lines, now_s=time.time() if now_s is None else now_s,
                                  gpus_per_instance=gpus_of(rec.instance_type),
                                  log_skipped=logs.skipped, log_truncated=logs.truncated)
