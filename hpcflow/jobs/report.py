"""A job's goodput ledger: where its wall time went, attempt by attempt.

Sources: the submission record, the ledger the batch script appends (attempt start, signal,
step end, requeue, job end; docs/protocol.md) and the machine-readable lines rank 0 prints
(``hpcflow-step`` with ``step_time_s``, ``hpcflow-checkpoint`` with ``save_s``,
``hpcflow-resume``, ``hpcflow-startup``). Pure: :mod:`hpcflow.jobs.report_load` reads the files.

Categories, in seconds:
    pending: waiting in the queue (first submission to first start; requeue to next start).
    startup: an attempt's time that is neither training nor checkpointing (imports,
        rendezvous, loading the checkpoint, teardown).
    training: the step times of steps that survived (were committed or finished the run).
    checkpointing: time spent saving checkpoints.
    lost: step times of steps redone after a restart (trained, then lost with their attempt).
Goodput = training / wall, wall = first submission to the end (or now). Goodput while holding
nodes = training / (wall - pending): the queue (and the requeue delay Slurm imposes) left out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from hpcflow import ending_kinds as K
from hpcflow import protocol as P
from hpcflow.jobs.hangs import suspected_hangs
from hpcflow.jobs.intervals import interval_choice
from hpcflow.jobs.joblog import SRUN_TASK, TIME, split_log, split_log_counted
from hpcflow.jobs.startup import startup_phases
from hpcflow.protocol import (
    REASON_REQUEUED_NO_CHECKPOINT,
    TAG_CHECKPOINT,
    TAG_RESUME,
    TAG_START,
    TAG_STARTUP,
    TAG_STEP,
)

__all__ = ["AttemptLedger", "Failure", "GoodputReport", "build_report", "split_log"]
_PRIVATE = ("step_times", "segments", "segment_lost", "events", "times", "trained_s",
            "first_task", "save_times")


@dataclass
class AttemptLedger:
    """One attempt (one run of the batch script).

    Attributes:
        restart: ``SLURM_RESTART_COUNT`` of the attempt (0 for the first).
        start: Unix time the attempt started.
        end: Unix time it ended (step end or end record; for an attempt that left no end
            record, the last time it is known to have been alive), or None while running.
        pending_s, startup_s, training_s, checkpointing_s, lost_s: see the module docstring.
        first_step: the first step trained, or None.
        last_step: the last step trained, or None.
        resumed_from: the committed step it resumed from, or None.
        outcome: ``requeue`` (after a committed hpcflow checkpoint), ``requeued_no_checkpoint``
            (a program that did not join the protocol, stopped before the deadline),
            ``completed``, ``failed``, ... the batch script's reason; ``interrupted`` (no end
            record) or ``running``.
        ending: the kind of ending (:data:`hpcflow.ending_kinds.ENDING_KINDS`), ``""`` while
            running.
        detail: what the ledger says about it (first failing rank, status...).
        lost_steps: steps trained in this attempt and trained again later (lost with it).
        network: what NCCL ran over (the attempt's ``network`` event: ``NCCL over EFA
            (aws-ofi-nccl 1.9.1, 32 NICs)``), or ``""`` when it recorded none.
        intervals: each checkpoint interval ``checkpoint.interval: auto`` chose in the attempt
            (its ``interval_chosen`` events, oldest first): ``step`` (chosen at), ``reason``
            (``warmup`` or ``restart``), ``interval_steps``, ``interval_s``, the inputs
            ``save_s``, ``step_time_s``, ``restart_s``, ``mtbf_s`` (seconds), ``formula``, and
            ``expected_goodput`` (0..1); empty for a fixed interval.
        suspected_hangs: each hang the watchdog suspected in the attempt (its stacks written,
            the step going on) and what became of it (:func:`hpcflow.jobs.hangs.suspected_hangs`).
        startup_phases: seconds of each start-up phase of the attempt's first program start,
            from rank 0's ``hpcflow-startup`` line (:mod:`hpcflow.jobs.startup`); empty when the
            program does not use hpcflow's ``Run``.
    """

    restart: int
    start: float
    end: float | None
    pending_s: float = 0.0
    startup_s: float = 0.0
    training_s: float = 0.0
    checkpointing_s: float = 0.0
    lost_s: float = 0.0
    first_step: int | None = None
    last_step: int | None = None
    resumed_from: int | None = None
    outcome: str = "running"
    ending: str = ""
    detail: str = ""
    lost_steps: int = 0
    network: str = ""
    intervals: list[dict[str, Any]] = field(default_factory=list)
    suspected_hangs: list[dict[str, Any]] = field(default_factory=list)
    startup_phases: dict[str, float] = field(default_factory=dict)
    # From the log and the ledger, for the computation; not part of the report's JSON.
    step_times: dict[int, float] = field(default_factory=dict, repr=False)
    segments: list[dict[int, float]] = field(default_factory=list, repr=False)
    segment_lost: list[set[int]] = field(default_factory=list, repr=False)
    events: list[Mapping[str, Any]] = field(default_factory=list, repr=False)
    times: list[float] = field(default_factory=list, repr=False)
    first_task: str = field(default="", repr=False)  # srun's first "task N: ..." error line
    trained_s: float = field(default=0.0, repr=False)
    save_times: list[float] = field(default_factory=list, repr=False)  # each save's blocking s


@dataclass
class Failure:
    """One unwarned ending and what it cost.

    Attributes:
        attempt: the attempt it ended (1 for the first).
        kind: a kind of :data:`hpcflow.ending_kinds.ENDING_KINDS` (``node_failure``, ``hang``...).
        time: Unix time of the ending (the last known time when there is no record), or None.
        lost_steps: steps trained before it and trained again after it.
        lost_s: their step times, in seconds.
        steps: the lost steps as ``first-last`` (``""`` when none).
        detail: what the ledger says about it.
        error: the exception of the step's first failing rank (traceback bounded), when a
            rank raised and recorded it (:mod:`hpcflow.jobs.tracebacks`), else None.
    """

    attempt: int
    kind: str
    time: float | None
    lost_steps: int
    lost_s: float
    steps: str
    detail: str
    error: dict[str, Any] | None = None


@dataclass
class GoodputReport:
    """The whole job.

    Attributes:
        job_id: the job.
        wall_s: first submission to the end (or now), in seconds.
        totals: seconds per category (pending, startup, training, checkpointing, lost).
        goodput: training / wall (0..1), or None when nothing ran yet.
        attempts: per-attempt ledgers, oldest first.
        submitted_at: Unix time of the first submission.
        failures: every failure, oldest first, with the steps it lost.
        skipped: lines left out because they do not decode, per file: ``ledger`` (not an
            event, or a member of the wrong kind: :mod:`hpcflow.contract`) and ``log`` (a
            tagged line of the program's that is not JSON of the right kinds).
        notes: figures that cannot be right (goodput over 100%: the log claims more step time
            than the wall time), each a sentence; empty when none.
    """

    job_id: str
    wall_s: float
    totals: dict[str, float]
    goodput: float | None
    attempts: list[AttemptLedger]
    submitted_at: float
    failures: list[Failure] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def goodput_holding_nodes(self) -> float | None:
        """training / (wall - pending), 0..1: goodput with the time spent queued left out; None
        when the job never held nodes."""
        held = self.wall_s - self.totals["pending"]
        return self.totals["training"] / held if held > 0 and self.attempts else None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for a in out["attempts"]:
            for private in _PRIVATE:
                a.pop(private, None)
        return out


def build_report(job_id: str, *, submitted_at: float, events: Sequence[Mapping[str, Any]],
                 log_text: str, now_s: float, alive: bool = True,
                 later_steps: Iterable[int] = (), last_ending: str = "",
                 errors: Mapping[tuple[int, int], Any] | None = None,
                 ledger_skipped: int = 0) -> GoodputReport:
    """Combine ledger events and log lines into a :class:`GoodputReport`.

    Args:
        job_id: the job.
        submitted_at: Unix time of its first submission.
        events: its ledger events, oldest first.
        log_text: its log (every attempt).
        now_s: the current Unix time.
        alive: whether Slurm may still run the job; False ends an attempt without end record
            at its last known time (a node failure, a kill) instead of now.
        later_steps: steps trained by later jobs in the same run directory (a resubmission):
            a step of this job trained again there was lost here.
        last_ending: the kind Slurm's state gives the job (``cancelled``...), for a last
            attempt that left no end record.
        errors: the recorded exceptions, ``(restart, try) -> RankError``
            (:func:`hpcflow.jobs.tracebacks.step_errors`); each failure of that step shows its.
        ledger_skipped: ledger lines the reader skipped (:func:`hpcflow.ledger.read_ledger`).

    Time: linear in the number of events and log lines.
    """
    tagged, log_skipped = split_log_counted(log_text, job_id)
    attempts: list[AttemptLedger] = []
    for ev in events:
        if ev.get("event") == P.EVENT_ATTEMPT_START:
            attempts.append(AttemptLedger(restart=int(ev.get("restart", 0)),
                                          start=float(ev.get("time", 0)), end=None))
        if attempts:
            attempts[-1].events.append(ev)
    for i, att in enumerate(attempts):
        _fill_from_log(att, tagged.get(att.restart, []))
        last = i == len(attempts) - 1
        _close(att, attempts[i + 1].start if not last else None, running=last and alive)
    if attempts and last_ending and not attempts[-1].ending and not alive:
        attempts[-1].ending = last_ending
    _mark_lost(attempts, set(later_steps))
    ready = submitted_at  # when the job last became ready to run (submit or requeue)
    for att in attempts:
        att.pending_s = max(0.0, att.start - ready)
        ready = att.end if att.end is not None else now_s
        run = (att.end if att.end is not None else now_s) - att.start
        att.startup_s = max(0.0, run - att.training_s - att.lost_s - att.checkpointing_s)
    requeued = (P.REASON_REQUEUE, REASON_REQUEUED_NO_CHECKPOINT, P.REASON_PROGRAM_REQUEUED)
    last = attempts[-1] if attempts else None
    end = last.end if last and last.end is not None and (last.outcome not in requeued or
                                                         not alive) else now_s
    totals = {k: round(sum(getattr(a, f"{k}_s") for a in attempts), 3)
              for k in ("pending", "startup", "training", "checkpointing", "lost")}
    wall = max(0.0, end - submitted_at)
    goodput = (totals["training"] / wall) if wall > 0 and attempts else None
    notes = []
    if goodput is not None and goodput > 1.0:
        notes.append(f"goodput {100 * goodput:.0f}% is impossible: the log claims "
                     f"{totals['training']:.0f} s of training in {wall:.0f} s of wall time; "
                     "its step times (hpcflow-step step_time_s) are not to be trusted")
    return GoodputReport(job_id, round(wall, 3), totals, goodput, attempts, submitted_at,
                         _failures(attempts, errors or {}),
                         {"ledger": ledger_skipped, "log": log_skipped}, notes)


def _close(att: AttemptLedger, next_start: float | None, *, running: bool) -> None:
    """Set the attempt's end, outcome, ending, detail and network from its ledger events."""
    from hpcflow.jobs.endings import ledger_ending, network_summary

    att.network = network_summary(att.events)
    att.intervals = [c for c in map(interval_choice, att.events) if c is not None]
    att.suspected_hangs = suspected_hangs(att.events)

    ends = [e for e in att.events if e.get("event") in (P.EVENT_REQUEUE, P.EVENT_JOB_END)]
    step_ends = [e for e in att.events if e.get("event") == P.EVENT_STEP_END]
    if step_ends:
        att.end = float(step_ends[-1]["time"])
        if not ends and not running:
            att.outcome = "interrupted"
            if next_start is not None:
                att.ending = K.ENDING_NODE_FAILURE
                att.detail = "no end record after the step; Slurm ran the job again"
    if ends:
        att.end = att.end or float(ends[-1]["time"])
        att.outcome = _outcome(ends[-1])
        att.ending, att.detail = ledger_ending(att.events) or ("", "")
        if att.first_task and att.ending not in (K.ENDING_COMPLETED, *K.PREEMPTED_KINDS):
            att.detail = "; ".join(d for d in (att.detail, f"srun: {att.first_task}") if d)
        return
    if step_ends or running:
        return  # the step's end is recorded; or still running: it ends now, for the totals
    # No record at all after its start: the batch script died with its node (or was killed).
    # Its end is the last moment it is known to have been alive (a ledger event, a line of the
    # batch script, the steps it trained), never later than the next attempt's start.
    known = [float(e.get("time", att.start)) for e in att.events]
    known += [t for t in att.times if t >= att.start] + [att.start + att.trained_s]
    att.end = max(known) if next_start is None else min(max(known), next_start)
    att.outcome = "interrupted"
    if next_start is not None:
        att.ending, att.detail = K.ENDING_NODE_FAILURE, "no end record; Slurm ran the job again"
    else:
        att.detail = "no end record"


def _outcome(event: Mapping[str, Any]) -> str:
    """An attempt's outcome from its last ledger event (``requeue`` or ``job_end``)."""
    if event.get("event") == P.EVENT_REQUEUE:
        if event.get("by") == P.REQUEUED_BY_PROGRAM:
            return P.REASON_PROGRAM_REQUEUED
        return (REASON_REQUEUED_NO_CHECKPOINT if event.get("checkpoint") is False
                else P.REASON_REQUEUE)
    return str(event.get("reason", "ended"))


def _fill_from_log(att: AttemptLedger, lines: list[tuple[str, dict[str, Any]]]) -> None:
    """Steps (per program start: an in-job restart starts a new segment), checkpoint time,
    the resume step and the batch script's timestamps of one attempt."""
    segment: dict[int, float] = {}
    for tag, payload in lines:
        if tag == TAG_STEP and "step" in payload:
            segment[int(payload["step"])] = float(payload.get("step_time_s", 0.0))
        elif tag == TAG_START and segment:
            att.segments.append(segment)
            segment = {}
        elif tag == TAG_CHECKPOINT:
            att.checkpointing_s += float(payload.get("save_s", 0.0))
            if "save_s" in payload and not payload.get("failed"):
                att.save_times.append(float(payload["save_s"]))
        elif tag == TAG_STARTUP and not att.startup_phases:
            att.startup_phases = startup_phases(payload)
        elif tag == TAG_RESUME and "step" in payload and att.resumed_from is None:
            att.resumed_from = int(payload["step"])
        elif tag == TIME:
            att.times.append(float(payload["time"]))
        elif tag == SRUN_TASK and not att.first_task:
            att.first_task = f"task {payload['task']} on {payload['node']}: {payload['what']}"
    att.segments.append(segment)
    for seg in att.segments:
        att.step_times.update(seg)
    att.trained_s = sum(t for seg in att.segments for t in seg.values()) + att.checkpointing_s
    if att.step_times:
        att.first_step, att.last_step = min(att.step_times), max(att.step_times)


def _mark_lost(attempts: list[AttemptLedger], later_jobs: set[int]) -> None:
    """A step trained in one segment (one program start) and trained again by a later one, in
    this attempt, a later attempt or a later job of the run directory, was lost."""
    later = set(later_jobs)  # every step trained after the segment at hand: walk backwards
    lost_of: list[set[int]] = []
    for att in reversed(attempts):
        for seg in reversed(att.segments):
            lost_of.append({s for s in seg if s in later})
            later.update(seg)
    lost_of.reverse()
    position = 0
    for att in attempts:  # then forwards, so the sums add up in the order they always did
        for seg in att.segments:
            lost = lost_of[position]
            position += 1
            att.lost_s += sum(seg[s] for s in lost)
            att.training_s += sum(t for s, t in seg.items() if s not in lost)
            att.segment_lost.append(lost)
    for att in attempts:
        att.lost_steps = len(set().union(*att.segment_lost))


def _failures(attempts: list[AttemptLedger],
              errors: Mapping[tuple[int, int], Any]) -> list[Failure]:
    """Every unwarned ending, oldest first: the in-job failures (each ended one program start
    of its attempt), then the attempt's own ending unless it completed or was a warned
    preemption that lost nothing."""
    out = []
    for att in attempts:
        in_job = [e for e in att.events if e.get("event") in K.FAILURE_EVENT_KIND]
        last = len(att.segments) - 1
        # The try of the attempt's last step: one step_end per try.
        last_try = max(0, sum(e.get("event") == P.EVENT_STEP_END for e in att.events) - 1)
        for j, (seg, lost) in enumerate(zip(att.segments, att.segment_lost, strict=True)):
            error = errors.get((att.restart, j if j < last else last_try))
            if j < last and j < len(in_job):
                e = in_job[j]
                out.append(_failure(att, K.FAILURE_EVENT_KIND[str(e["event"])],
                                    float(e.get("time", 0)), seg, lost, _event_detail(e), error))
            elif j < last:
                out.append(_failure(att, K.ENDING_RANK_RESTARTED, None, seg, lost,
                                    "the program started again in the job", error))
            elif att.outcome != "running" and (
                    att.ending not in (K.ENDING_COMPLETED, *K.PREEMPTED_KINDS) or lost):
                out.append(_failure(att, att.ending or att.outcome, att.end, seg, lost,
                                    att.detail, error))
    return out


def _failure(att: AttemptLedger, kind: str, t: float | None, seg: dict[int, float],
             lost: set[int], detail: str, error: Any = None) -> Failure:
    steps = f"{min(lost)}-{max(lost)}" if lost else ""
    return Failure(att.restart + 1, kind, t, len(lost), round(sum(seg[s] for s in lost), 3),
                   steps, detail, error.to_dict() if error is not None else None)


def _event_detail(event: Mapping[str, Any]) -> str:
    """The fields of an in-job failure event other than the common ones, as ``k=v`` words; an
    in-job restart without a committed checkpoint (``step_restart`` with ``"step": null``,
    docs/protocol.md) says ``from the start`` instead of ``step=null``."""
    common = {"event", "time", "job_id", "restart"}
    words = []
    for k, v in sorted(event.items()):
        if k in common:
            continue
        if k == "step" and v is None and event.get("event") == P.EVENT_STEP_RESTART:
            words.append("from the start (no committed checkpoint)")
        else:
            words.append(f"{k}={json.dumps(v)}")
    return " ".join(words)

