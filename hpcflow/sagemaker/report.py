"""A SageMaker training job's goodput: the Slurm report's ledger, built from
``DescribeTrainingJob`` and the program's tagged lines in its CloudWatch Logs. Pure.

Each ``Training`` secondary status transition starts an attempt (with none, as long as SageMaker
gives ``TrainingStartTime``, one attempt runs from it); the attempt ends at the next transition
that is not ``Training`` (the last one, once the job is final, at ``TrainingEndTime``), and is
ended by ``Interrupted`` when spot capacity was taken back before the next one. These windows are
written in the ledger's words (``attempt_start``, ``requeue``, ``job_end``: docs/protocol.md,
"The ledger") and rank 0's stream (host ``algo-1``, where the first torchrun node runs) as the
job log the Slurm report reads: each event goes to the attempt whose window began last before
it. :func:`hpcflow.jobs.report.build_report` then computes the same fields as for a Slurm job:
per attempt ``pending_s`` (CreationTime, or the previous attempt's end, to its start: instances,
image and data), ``startup_s``, ``training_s`` (step times of steps that survived),
``checkpointing_s`` and ``lost_s`` (step times of steps trained again after a restart), and the
goodput (training / wall, wall from CreationTime). A job whose last attempt was interrupted
waits for capacity: that wait counts as pending, until now or the job's end (a job that never
got capacity back ends ``MaxWaitTimeExceeded``).

Only the program's tagged lines (``hpcflow-<tag> {...}``, docs/protocol.md, "What the example
program prints") are taken from the streams, each line of a multi-line event on its own; a
tagged line that does not decode is skipped and counted.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from hpcflow import protocol as P
from hpcflow.jobs.report import build_report
from hpcflow.sagemaker.logs import LogLine
from hpcflow.sagemaker.record import (
    INTERRUPTED,
    RESTARTING,
    TRAINING,
    TrainingJobRecord,
)
from hpcflow.sagemaker.status import iso

#: The host whose stream holds rank 0's lines: SageMaker names its hosts ``algo-1`` ..
#: ``algo-N`` and hpcflow's launch runs torchrun's node 0 on the first.
RANK0_HOST = "algo-1"
RUNNING = "running"
#: The job id the ledger and the job log carry (the name SageMaker gives may be missing or be
#: any text; the report names the job by it, the ledger needs one word).
LEDGER_JOB = "sagemaker-job"
_TAGGED = re.compile(r"hpcflow-[a-z]+ \{")
_JOB_END_REASON = {"Completed": P.REASON_COMPLETED, "Stopped": P.REASON_CANCELLED}


@dataclass(frozen=True)
class Window:
    """One attempt's time on the instances.

    Attributes:
        start: Unix seconds.
        end: Unix seconds, or None while it runs.
        ended_by: the secondary status that ended it (``Interrupted``, ``Completed``,
            ``MaxWaitTimeExceeded``...), or ``running``.
    """

    start: float
    end: float | None
    ended_by: str


@dataclass
class SageMakerAttempt:
    """One attempt: the ledger's fields (:class:`hpcflow.jobs.report.AttemptLedger`, seconds)
    and its steps.

    Attributes:
        useful_steps: steps trained in it and never trained again.
        lost_steps: steps trained in it and trained again after it ended (redone).
    """

    attempt: int
    start: str
    end: str
    ended_by: str
    pending_s: float
    startup_s: float
    training_s: float
    checkpointing_s: float
    lost_s: float
    first_step: int | None
    last_step: int | None
    resumed_from: int | None
    useful_steps: int
    lost_steps: int


@dataclass
class SageMakerReport:
    """The whole job (``hpcflow sagemaker report``).

    Attributes:
        interruptions, restarts: ``Interrupted`` and ``Restarting`` transitions.
        wall_s, totals, goodput: as in :class:`hpcflow.jobs.report.GoodputReport`.
        training_time_s, billable_s, spot_saving: SageMaker's (per instance).
        gpus_per_instance: GPUs (or other accelerators) of the instance type, or None when
            hpcflow has no facts for it.
        hours: instance-hours and, with GPUs, GPU-hours: ``useful`` (surviving step time),
            ``training`` (TrainingTimeInSeconds) and ``billed`` (BillableTimeInSeconds), all
            times ``InstanceCount``; None where a figure is missing.
        billed_per_useful: billable seconds per useful second (per instance; the same ratio
            for GPU-hours): what one useful hour cost, in the hours SageMaker bills.
        skipped: ``api`` (response members of the wrong type) and ``log`` (events and tagged
            lines that do not decode).
        notes: figures that cannot be right, and reads that stopped at their bound.
    """

    job_name: str
    status: str
    secondary: str
    finished: bool
    reason: str
    interruptions: int
    restarts: int
    max_wait_exceeded: bool
    instance_type: str
    instance_count: int | None
    gpus_per_instance: int | None
    spot: bool
    training_time_s: int | None
    billable_s: int | None
    spot_saving: float | None
    wall_s: float
    totals: dict[str, float]
    goodput: float | None
    useful_steps: int
    lost_steps: int
    hours: dict[str, float | None]
    billed_per_useful: float | None
    attempts: list[SageMakerAttempt] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def attempt_windows(rec: TrainingJobRecord, first_line_s: float | None = None) -> list[Window]:
    """The attempts' windows, oldest first (see the module docstring). ``first_line_s``: when
    the program's first line was written, where a job that gives no training start at all
    is taken to have started (None: no lines)."""
    every = rec.transitions
    trans = [t for i, t in enumerate(every)
             if not (t.status == TRAINING and i and every[i - 1].status == TRAINING)]
    starts = [i for i, t in enumerate(trans) if t.status == TRAINING]
    out: list[Window] = []
    for k, i in enumerate(starts):
        between = trans[i + 1:starts[k + 1] if k + 1 < len(starts) else len(trans)]
        ended_by = INTERRUPTED if any(u.status == INTERRUPTED for u in between) else (
            between[-1].status if between else RUNNING)
        out.append(Window(trans[i].start, between[0].start if between else None, ended_by))
    if not out:
        start = rec.training_start if rec.training_start is not None else first_line_s
        if start is None:
            return []
        out.append(Window(start, None, RUNNING))
    last = out[-1]
    if last.ended_by == INTERRUPTED:
        return out  # ended by the interruption, whatever came after it
    if not rec.finished:
        out[-1] = Window(last.start, None, RUNNING)  # still on its instances
        return out
    end = rec.training_end if rec.training_end is not None else (
        last.end if last.end is not None else rec.last_modified)
    out[-1] = Window(last.start, None if end is None else max(end, last.start),
                     last.ended_by if last.ended_by != RUNNING else rec.secondary or rec.status)
    return out


def ledger_events(rec: TrainingJobRecord, windows: Sequence[Window]) -> list[dict[str, Any]]:
    """The windows in the ledger's words (docs/protocol.md, "The ledger")."""
    events: list[dict[str, Any]] = []
    for n, w in enumerate(windows):
        events.append({"event": P.EVENT_ATTEMPT_START, "time": w.start, "job_id": LEDGER_JOB,
                       "restart": n})
        if w.end is None:
            continue
        if n < len(windows) - 1 or not rec.finished:
            events.append({"event": P.EVENT_REQUEUE, "time": w.end, "job_id": LEDGER_JOB,
                           "restart": n})
        else:
            events.append({"event": P.EVENT_JOB_END, "time": w.end, "job_id": LEDGER_JOB,
                           "restart": n,
                           "reason": _JOB_END_REASON.get(rec.status, P.REASON_FAILED)})
    return events


def job_log(rec: TrainingJobRecord, windows: Sequence[Window], lines: Sequence[LogLine]) -> str:
    """Rank 0's tagged lines as the job log the Slurm report reads: the batch script's banner
    at each attempt's start (``hpcflow: <time> job <id> attempt <n> on <host>: ...``), then the
    attempt's tagged lines. Only tagged lines are kept, so no line of the program can pass for
    a banner."""
    starts = [w.start for w in windows]
    by_attempt: list[list[str]] = [[] for _ in windows]
    for line in lines:
        if not windows or line.host != RANK0_HOST:
            continue
        n = max(0, bisect.bisect_right(starts, line.time_ms / 1000) - 1)
        by_attempt[n].extend(x for x in line.message.splitlines() if _TAGGED.match(x))
    out = []
    for n, w in enumerate(windows):
        stamp = iso(w.start).replace("Z", "+0000")
        out.append(f"hpcflow: {stamp} job {LEDGER_JOB} attempt {n} on {RANK0_HOST}: sagemaker")
        out.extend(by_attempt[n])
    return "\n".join(out) + "\n"


def build_sagemaker_report(rec: TrainingJobRecord, lines: Sequence[LogLine], *, now_s: float,
                           gpus_per_instance: int | None, log_skipped: int = 0,
                           log_truncated: bool = False) -> SageMakerReport:
    """The :class:`SageMakerReport` of a decoded ``DescribeTrainingJob`` response and the
    job's log events (any order; rank 0's are read).

    Args:
        now_s: the current Unix time (the end of a job still running).
        gpus_per_instance: the instance type's GPUs (:func:`hpcflow.sagemaker.report_load.gpus_of`).
        log_skipped: events the log reader skipped; log_truncated: it stopped at its bound.

    Time: linear in the number of transitions and lines (and log-linear to sort them).
    """
    ordered = sorted((x for x in lines if x.host == RANK0_HOST), key=lambda x: x.time_ms)
    windows = attempt_windows(rec, ordered[0].time_ms / 1000 if ordered else None)
    created = rec.created if rec.created is not None else now_s
    submitted_at = min([created, *(w.start for w in windows)])
    ledger = build_report(LEDGER_JOB, submitted_at=submitted_at,
                          events=ledger_events(rec, windows),
                          log_text=job_log(rec, windows, ordered), now_s=now_s,
                          alive=not rec.finished)
    attempts = [_attempt(a, w) for a, w in zip(ledger.attempts, windows, strict=True)]
    totals, wall, goodput = dict(ledger.totals), ledger.wall_s, ledger.goodput
    if windows and windows[-1].ended_by == INTERRUPTED and windows[-1].end is not None:
        # Waiting for capacity after the last interruption: pending, up to the job's end.
        until = now_s if not rec.finished else next(
            (t for t in (rec.training_end, rec.last_modified) if t is not None), windows[-1].end)
        totals["pending"] = round(totals["pending"] + max(0.0, until - windows[-1].end), 3)
        wall = round(max(wall, until - submitted_at), 3)
        goodput = totals["training"] / wall if wall > 0 else None
    count = rec.instance_count
    useful_s = totals["training"]
    hours = _hours(useful_s, rec.training_s, rec.billable_s, count, gpus_per_instance)
    billed_per_useful = (round(rec.billable_s / useful_s, 4)
                         if rec.billable_s is not None and useful_s > 0 else None)
    notes = list(ledger.notes)
    if rec.training_s is not None and useful_s > rec.training_s * 1.01 + 1:
        notes.append(f"the log claims {useful_s:.0f} s of useful step time, more than the "
                     f"{rec.training_s} s SageMaker says the job trained; its step times "
                     "(hpcflow-step step_time_s) are not to be trusted")
    if log_truncated:
        notes.append("the log was read up to its bound; later lines are not counted")
    return SageMakerReport(
        job_name=rec.name, status=rec.status, secondary=rec.secondary, finished=rec.finished,
        reason=rec.failure_reason or (rec.transitions[-1].message if rec.transitions else ""),
        interruptions=rec.count(INTERRUPTED), restarts=rec.count(RESTARTING),
        max_wait_exceeded=rec.max_wait_exceeded, instance_type=rec.instance_type,
        instance_count=count, gpus_per_instance=gpus_per_instance, spot=rec.spot,
        training_time_s=rec.training_s, billable_s=rec.billable_s, spot_saving=rec.spot_saving,
        wall_s=wall, totals=totals, goodput=goodput,
        useful_steps=sum(a.useful_steps for a in attempts),
        lost_steps=sum(a.lost_steps for a in attempts), hours=hours,
        billed_per_useful=billed_per_useful, attempts=attempts,
        skipped={"api": rec.skipped, "log": log_skipped + ledger.skipped.get("log", 0)},
        notes=notes)


def _attempt(a: Any, w: Window) -> SageMakerAttempt:
    """One ledger attempt (:class:`hpcflow.jobs.report.AttemptLedger`) with its window."""
    useful = sum(len(seg) - len(lost) for seg, lost in zip(a.segments, a.segment_lost, strict=True))
    return SageMakerAttempt(
        attempt=a.restart + 1, start=iso(w.start), end=iso(w.end), ended_by=w.ended_by,
        pending_s=round(a.pending_s, 3), startup_s=round(a.startup_s, 3),
        training_s=round(a.training_s, 3), checkpointing_s=round(a.checkpointing_s, 3),
        lost_s=round(a.lost_s, 3), first_step=a.first_step, last_step=a.last_step,
        resumed_from=a.resumed_from, useful_steps=useful, lost_steps=a.lost_steps)


def _hours(useful_s: float, training_s: int | None, billable_s: int | None,
           count: int | None, gpus: int | None) -> dict[str, float | None]:
    """Instance-hours and GPU-hours: useful, training and billed (see
    :class:`SageMakerReport`)."""
    def hours(seconds: float | None, per_instance: int | None) -> float | None:
        if seconds is None or count is None or per_instance is None:
            return None
        return round(seconds * count * per_instance / 3600, 4)

    gpus = gpus if gpus else None
    return {"useful_instance": hours(useful_s, 1), "training_instance": hours(training_s, 1),
            "billed_instance": hours(billable_s, 1), "useful_gpu": hours(useful_s, gpus),
            "training_gpu": hours(training_s, gpus), "billed_gpu": hours(billable_s, gpus)}
