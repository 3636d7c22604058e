"""The typed record of a ``DescribeTrainingJob`` response: what ``hpcflow sagemaker status`` and
``report`` read, each member of its type, or left out and counted. Pure.

Members read (SageMaker API Reference, ``DescribeTrainingJob``,
https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DescribeTrainingJob.html; the
enums are botocore's ``TrainingJobStatus`` and ``SecondaryStatus``):

- ``TrainingJobName``, ``TrainingJobStatus`` (``InProgress``, ``Completed``, ``Failed``,
  ``Stopping``, ``Stopped``), ``SecondaryStatus``, ``FailureReason``;
- ``SecondaryStatusTransitions`` (``Status``, ``StartTime``, ``EndTime``, ``StatusMessage``),
  oldest first: a managed spot job that lost its instances goes ``Training`` -> ``Interrupted``
  -> ``Restarting`` -> ... -> ``Training``; ``MaxWaitTimeExceeded`` ends a spot job that did not
  finish within ``MaxWaitTimeInSeconds``;
- ``CreationTime``, ``TrainingStartTime``, ``TrainingEndTime``, ``LastModifiedTime``;
- ``TrainingTimeInSeconds`` and ``BillableTimeInSeconds`` (per instance: "Multiply
  BillableTimeInSeconds by the number of instances (InstanceCount)"; the managed spot saving is
  ``1 - billable / training``);
- ``EnableManagedSpotTraining``, ``ResourceConfig.InstanceType``, ``ResourceConfig.InstanceCount``.

The response is input like any other: a member of another type (a number where a string
belongs, a boolean where a number belongs, a time that is not a time) is left out and counted in
``skipped``; text is bounded and its control characters replaced, so nothing printed from it
can drive a terminal.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from hpcflow.contract import MAX_MAGNITUDE

#: TrainingJobStatus values after which nothing changes.
FINAL = ("Completed", "Failed", "Stopped")
TRAINING = "Training"
INTERRUPTED = "Interrupted"
RESTARTING = "Restarting"
MAX_WAIT_EXCEEDED = "MaxWaitTimeExceeded"
#: The longest text kept from one member (a FailureReason is a sentence or two).
MAX_TEXT = 1024
#: The most transitions read: a job that was interrupted a hundred times has about 600.
MAX_TRANSITIONS = 2000
#: The latest time taken (9999-12-31T23:59:59Z, the last one ``datetime`` can show).
MAX_UNIX_S = 253402300799
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@dataclass(frozen=True)
class Transition:
    """One ``SecondaryStatusTransitions`` entry.

    Attributes:
        status: ``Status`` (a ``SecondaryStatus`` value).
        start: ``StartTime``, Unix seconds.
        end: ``EndTime``, Unix seconds, or None (the current status has none).
        message: ``StatusMessage``, or ``""``.
    """

    status: str
    start: float
    end: float | None
    message: str


@dataclass(frozen=True)
class TrainingJobRecord:
    """What hpcflow reads of a ``DescribeTrainingJob`` response (see the module docstring).

    Attributes:
        name, status, secondary, failure_reason: the texts, ``""`` when absent.
        created, training_start, training_end, last_modified: Unix seconds, or None.
        training_s, billable_s: ``TrainingTimeInSeconds``, ``BillableTimeInSeconds``, or None.
        spot: ``EnableManagedSpotTraining``.
        instance_type: ``ResourceConfig.InstanceType`` (``ml.p5.48xlarge``), or ``""``.
        instance_count: ``ResourceConfig.InstanceCount``, or None.
        transitions: the secondary status transitions, oldest first.
        skipped: members (and transitions) left out because they were not of their type.
    """

    name: str = ""
    status: str = ""
    secondary: str = ""
    failure_reason: str = ""
    created: float | None = None
    training_start: float | None = None
    training_end: float | None = None
    last_modified: float | None = None
    training_s: int | None = None
    billable_s: int | None = None
    spot: bool = False
    instance_type: str = ""
    instance_count: int | None = None
    transitions: tuple[Transition, ...] = ()
    skipped: int = 0

    @property
    def finished(self) -> bool:
        """The status is final: nothing changes any more."""
        return self.status in FINAL

    def count(self, status: str) -> int:
        """How many transitions went to ``status``."""
        return sum(t.status == status for t in self.transitions)

    @property
    def max_wait_exceeded(self) -> bool:
        """SageMaker ended the job at ``MaxWaitTimeInSeconds``."""
        return self.secondary == MAX_WAIT_EXCEEDED or self.count(MAX_WAIT_EXCEEDED) > 0

    @property
    def spot_saving(self) -> float | None:
        """``1 - billable / training`` (0..1) for a managed spot job, or None."""
        if not (self.spot and self.training_s and self.billable_s is not None):
            return None
        return round(1 - self.billable_s / self.training_s, 4)


class _Reader:
    """Reads members of one mapping, counting those of the wrong type."""

    def __init__(self) -> None:
        self.skipped = 0

    def miss(self) -> None:
        self.skipped += 1

    def text(self, src: Mapping[str, Any], key: str) -> str:
        value = src.get(key)
        if value is None:
            return ""
        if not isinstance(value, str):
            self.miss()
            return ""
        return clean_text(value)

    def time(self, src: Mapping[str, Any], key: str) -> float | None:
        value = src.get(key)
        if value is None:
            return None
        seconds = unix_seconds(value)
        if seconds is None:
            self.miss()
        return seconds

    def count(self, src: Mapping[str, Any], key: str) -> int | None:
        value = src.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_MAGNITUDE:
            self.miss()
            return None
        return value

    def mapping(self, src: Mapping[str, Any], key: str) -> Mapping[str, Any]:
        value = src.get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.miss()
            return {}
        return value


def clean_text(value: str, limit: int = MAX_TEXT) -> str:
    """``value`` cut to ``limit`` characters, control characters (but tab) as ``?``."""
    return _CONTROL.sub("?", value[:limit])


def unix_seconds(value: Any) -> float | None:
    """A time as botocore gives it (``datetime``; one without a zone is taken as UTC), as Unix
    seconds (a number), or as ISO 8601 text; None for anything else or out of range."""
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        try:
            seconds = moment.timestamp()
        except (OverflowError, OSError, ValueError):
            return None
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and len(value) <= 64:
        try:
            return unix_seconds(datetime.fromisoformat(value))
        except ValueError:
            return None
    else:
        return None
    return seconds if math.isfinite(seconds) and 0 <= seconds <= MAX_UNIX_S else None


def decode_describe(response: Any) -> TrainingJobRecord:
    """The :class:`TrainingJobRecord` of a ``DescribeTrainingJob`` response (any value: what is
    not a mapping gives an empty record with ``skipped`` 1). Never raises."""
    if not isinstance(response, Mapping):
        return TrainingJobRecord(skipped=1)
    r = _Reader()
    resources = r.mapping(response, "ResourceConfig")
    spot = response.get("EnableManagedSpotTraining")
    if spot is not None and not isinstance(spot, bool):
        r.miss()
    record = TrainingJobRecord(
        name=r.text(response, "TrainingJobName"), status=r.text(response, "TrainingJobStatus"),
        secondary=r.text(response, "SecondaryStatus"),
        failure_reason=r.text(response, "FailureReason"),
        created=r.time(response, "CreationTime"),
        training_start=r.time(response, "TrainingStartTime"),
        training_end=r.time(response, "TrainingEndTime"),
        last_modified=r.time(response, "LastModifiedTime"),
        training_s=r.count(response, "TrainingTimeInSeconds"),
        billable_s=r.count(response, "BillableTimeInSeconds"),
        spot=spot is True, instance_type=r.text(resources, "InstanceType"),
        instance_count=r.count(resources, "InstanceCount"),
        transitions=_transitions(r, response.get("SecondaryStatusTransitions")))
    return replace(record, skipped=r.skipped)


def _transitions(r: _Reader, value: Any) -> tuple[Transition, ...]:
    """The transitions, oldest first; one whose ``Status`` or ``StartTime`` does not decode is
    left out (counted once)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        r.miss()
        return ()
    if len(value) > MAX_TRANSITIONS:
        r.skipped += len(value) - MAX_TRANSITIONS
        value = value[-MAX_TRANSITIONS:]
    out = []
    for item in value:
        status = item.get("Status") if isinstance(item, Mapping) else None
        start = unix_seconds(item.get("StartTime")) if isinstance(item, Mapping) else None
        if not isinstance(status, str) or not status or start is None:
            r.miss()
            continue
        out.append(Transition(clean_text(status, 64), start, r.time(item, "EndTime"),
                              r.text(item, "StatusMessage")))
    return tuple(sorted(out, key=lambda t: t.start))
