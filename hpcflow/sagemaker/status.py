"""The status of a SageMaker training job, from its ``DescribeTrainingJob`` response. Pure.

Fields used (SageMaker API Reference, ``DescribeTrainingJob``; the enums are botocore's
``TrainingJobStatus`` and ``SecondaryStatus``):

- ``TrainingJobStatus``: ``InProgress``, ``Completed``, ``Failed``, ``Stopping``, ``Stopped``.
- ``SecondaryStatus`` and ``SecondaryStatusTransitions`` (``Status``, ``StartTime``,
  ``StatusMessage``): a managed spot job that lost its instances goes through ``Interrupted``
  and ``Restarting`` before it trains again; ``MaxWaitTimeExceeded`` ends a spot job that did
  not finish within ``MaxWaitTimeInSeconds``.
- ``TrainingTimeInSeconds`` and ``BillableTimeInSeconds``: with managed spot the saving is
  ``1 - billable / training`` (developer guide, "Managed Spot Training in Amazon SageMaker AI").
- ``FailureReason``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

#: TrainingJobStatus values after which nothing changes.
FINAL = ("Completed", "Failed", "Stopped")
INTERRUPTED = "Interrupted"


@dataclass(frozen=True)
class SageMakerStatus:
    """What ``hpcflow status`` shows of a training job.

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
        transitions: ``[{"status", "start", "message"}]``, oldest first.
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

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def status_from_describe(described: dict[str, Any]) -> SageMakerStatus:
    """Turn a ``DescribeTrainingJob`` response into a :class:`SageMakerStatus`."""
    transitions = [
        {"status": str(t.get("Status", "")), "start": str(t.get("StartTime", "")),
         "message": str(t.get("StatusMessage", ""))}
        for t in described.get("SecondaryStatusTransitions") or []
    ]
    training = _seconds(described.get("TrainingTimeInSeconds"))
    billable = _seconds(described.get("BillableTimeInSeconds"))
    saving = None
    if described.get("EnableManagedSpotTraining") and training and billable is not None:
        saving = round(1 - billable / training, 4)
    status = str(described.get("TrainingJobStatus", ""))
    reason = str(described.get("FailureReason") or (transitions[-1]["message"] if transitions
                                                    else ""))
    return SageMakerStatus(
        job_name=str(described.get("TrainingJobName", "")), status=status,
        secondary=str(described.get("SecondaryStatus", "")), finished=status in FINAL,
        interruptions=sum(t["status"] == INTERRUPTED for t in transitions),
        training_s=training, billable_s=billable, spot_saving=saving, reason=reason,
        transitions=transitions)


def _seconds(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
