"""The status of a SageMaker training job, from its ``DescribeTrainingJob`` response (decoded by
:func:`hpcflow.sagemaker.record.decode_describe`, whose docstring names the fields and their
source). Pure."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from hpcflow.sagemaker.record import FINAL, INTERRUPTED, TrainingJobRecord, decode_describe

__all__ = ["FINAL", "INTERRUPTED", "SageMakerStatus", "iso", "status_from_describe",
           "status_from_record"]


@dataclass(frozen=True)
class SageMakerStatus:
    """What ``hpcflow sagemaker status`` shows of a training job.

    Attributes:
        job_name: ``TrainingJobName``.
        status: ``TrainingJobStatus``.
        secondary: ``SecondaryStatus``.
        finished: the status is final.
        interruptions: ``Interrupted`` transitions (spot capacity taken back).
        training_s: ``TrainingTimeInSeconds``, or None until SageMaker reports it.
        billable_s: ``BillableTimeInSeconds``, or None.
        spot_saving: ``1 - billable / training`` for a managed spot job, or None.
        reason: ``FailureReason``, or the newest transition's message.
        transitions: ``[{"status", "start", "message"}]``, oldest first (``start`` in ISO 8601,
            UTC).
        skipped: members of the response left out because they were not of their type.
    """

    job_name: str
    status: str
    secondary: str
    finished: bool
    interruptions: int
    training_s: int | None
    billable_s: int | None
    spot_saving: float | None
    reason: str
    transitions: list[dict[str, str]] = field(default_factory=list)
    skipped: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def status_from_describe(described: Any) -> SageMakerStatus:
    """Turn a ``DescribeTrainingJob`` response (any value) into a :class:`SageMakerStatus`."""
    return status_from_record(decode_describe(described))


def status_from_record(rec: TrainingJobRecord) -> SageMakerStatus:
    """The :class:`SageMakerStatus` of a decoded response."""
    transitions = [{"status": t.status, "start": iso(t.start), "message": t.message}
                   for t in rec.transitions]
    reason = rec.failure_reason or (rec.transitions[-1].message if rec.transitions else "")
    return SageMakerStatus(
        job_name=rec.name, status=rec.status, secondary=rec.secondary, finished=rec.finished,
        interruptions=rec.count(INTERRUPTED), training_s=rec.training_s,
        billable_s=rec.billable_s, spot_saving=rec.spot_saving, reason=reason,
        transitions=transitions, skipped=rec.skipped)


def iso(seconds: float | None) -> str:
    """Unix seconds as ISO 8601 in UTC (``2027-01-15T08:00:00Z``), ``""`` for None."""
    if seconds is None:
        return ""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
