"""A job's goodput ledger: where its wall time went, attempt by attempt.

Sources: the submission record, the ledger the batch script appends (attempt start, signal,
step end, requeue, job end; docs/protocol.md) and the machine-readable lines rank 0 prints
(``hpcflow-step`` with ``step_time_s``, ``hpcflow-checkpoint`` with ``save_s``,
``hpcflow-resume``). Pure: the caller reads the files.

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
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from hpcflow.protocol import REASON_REQUEUED_NO_CHECKPOINT, TAG_CHECKPOINT, TAG_RESUME, TAG_STEP

_BANNER = re.compile(r"^hpcflow: \S+ job (?P<job>\S+) attempt (?P<attempt>\d+) on ")
_TAGGED = re.compile(r"^(hpcflow-[a-z]+) (\{.*\})\s*$")


@dataclass
class AttemptLedger:
    """One attempt (one run of the batch script).

    Attributes:
        restart: ``SLURM_RESTART_COUNT`` of the attempt (0 for the first).
        start: Unix time the attempt started.
        end: Unix time it ended (step end), or None while running.
        pending_s, startup_s, training_s, checkpointing_s, lost_s: see the module docstring.
        first_step: the first step trained, or None.
        last_step: the last step trained, or None.
        resumed_from: the committed step it resumed from, or None.
        outcome: ``requeue`` (after a committed hpcflow checkpoint), ``requeued_no_checkpoint``
            (a program that did not join the protocol, stopped before the deadline),
            ``completed``, ``failed``, ... or ``running``.
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
    step_times: dict[int, float] = field(default_factory=dict, repr=False)


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
    """

    job_id: str
    wall_s: float
    totals: dict[str, float]
    goodput: float | None
    attempts: list[AttemptLedger]
    submitted_at: float

    def goodput_holding_nodes(self) -> float | None:
        """training / (wall - pending), 0..1: goodput with the time spent queued left out; None
        when the job never held nodes."""
        held = self.wall_s - self.totals["pending"]
        return self.totals["training"] / held if held > 0 and self.attempts else None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for a in out["attempts"]:
            a.pop("step_times", None)
        return out


def split_log(log_text: str, job_id: str) -> dict[int, list[tuple[str, dict[str, Any]]]]:
    """The tagged lines of each attempt of ``job_id``, keyed by restart count.

    The batch script prints a banner at each attempt start; tagged lines up to the next banner
    belong to that attempt. Lines of other jobs sharing the log are skipped.
    """
    attempts: dict[int, list[tuple[str, dict[str, Any]]]] = {}
    current: int | None = None
    for line in log_text.splitlines():
        if m := _BANNER.match(line):
            current = int(m["attempt"]) if m["job"] == job_id else None
            if current is not None:
                attempts.setdefault(current, [])
            continue
        if current is None:
            continue
        if m := _TAGGED.match(line):
            try:
                payload = json.loads(m[2])
            except ValueError:
                continue
            if isinstance(payload, dict):
                attempts[current].append((m[1], payload))
    return attempts


def build_report(job_id: str, *, submitted_at: float, events: Sequence[Mapping[str, Any]],
                 log_text: str, now_s: float) -> GoodputReport:
    """Combine ledger events and log lines into a :class:`GoodputReport`."""
    tagged = split_log(log_text, job_id)
    attempts: list[AttemptLedger] = []
    ready_since = submitted_at  # when the job last became ready to run (submit or requeue)
    for ev in events:
        kind, t = ev.get("event"), float(ev.get("time", 0))
        if kind == "attempt_start":
            if attempts and attempts[-1].outcome == "running":
                attempts[-1].outcome = "interrupted"  # no end record: node failure, kill -9
            att = AttemptLedger(restart=int(ev.get("restart", 0)), start=t, end=None,
                                pending_s=max(0.0, t - ready_since))
            attempts.append(att)
        elif attempts and kind == "step_end":
            attempts[-1].end = t
            ready_since = t
        elif attempts and kind in ("requeue", "job_end"):
            att = attempts[-1]
            att.end = att.end or t
            att.outcome = _outcome(ev)
            ready_since = t
    for att in attempts:
        _fill_from_log(att, tagged.get(att.restart, []))
    _mark_lost(attempts)
    requeued = ("requeue", REASON_REQUEUED_NO_CHECKPOINT)
    end = attempts[-1].end if attempts and attempts[-1].outcome not in requeued and attempts[-1].end \
        else now_s
    for att in attempts:
        run = (att.end or now_s) - att.start
        att.startup_s = max(0.0, run - att.training_s - att.lost_s - att.checkpointing_s)
    totals = {k: round(sum(getattr(a, f"{k}_s") for a in attempts), 3)
              for k in ("pending", "startup", "training", "checkpointing", "lost")}
    wall = max(0.0, end - submitted_at)
    goodput = (totals["training"] / wall) if wall > 0 and attempts else None
    return GoodputReport(job_id, round(wall, 3), totals, goodput, attempts, submitted_at)


def _outcome(event: Mapping[str, Any]) -> str:
    """An attempt's outcome from its last ledger event (``requeue`` or ``job_end``)."""
    if event.get("event") == "requeue":
        return REASON_REQUEUED_NO_CHECKPOINT if event.get("checkpoint") is False else "requeue"
    return str(event.get("reason", "ended"))


def _fill_from_log(att: AttemptLedger, lines: list[tuple[str, dict[str, Any]]]) -> None:
    for tag, payload in lines:
        if tag == TAG_STEP and "step" in payload:
            att.step_times[int(payload["step"])] = float(payload.get("step_time_s", 0.0))
        elif tag == TAG_CHECKPOINT:
            att.checkpointing_s += float(payload.get("save_s", 0.0))
        elif tag == TAG_RESUME and "step" in payload:
            att.resumed_from = int(payload["step"])
    if att.step_times:
        att.first_step, att.last_step = min(att.step_times), max(att.step_times)


def _mark_lost(attempts: list[AttemptLedger]) -> None:
    """A step trained in one attempt and trained again by a later one was lost with its attempt."""
    for i, att in enumerate(attempts):
        later = {s for b in attempts[i + 1:] for s in b.step_times}
        lost = {s: t for s, t in att.step_times.items() if s in later}
        att.lost_s = sum(lost.values())
        att.training_s = sum(t for s, t in att.step_times.items() if s not in lost)


def load_report(job_id: str, *, now_s: float | None = None) -> tuple[GoodputReport, list[dict[str, Any]]]:
    """Read a job's records from its run directory and build its report.

    Returns:
        The report and the job's ledger ``signal`` events (for the timeline).

    Raises:
        SlurmQueryError: the job was not submitted with hpcflow by this user (no run directory
            is known to read the ledger from).
    """
    from pathlib import Path

    from hpcflow.errors import SlurmQueryError
    from hpcflow.jobs import records

    rec = records.find_job(job_id)
    if rec is None:
        raise SlurmQueryError(f"job {job_id}: no hpcflow record for it in {records.hpcflow_home()}; "
                              "a report needs the run directory of a job submitted with hpcflow")
    subs = [s for s in records.read_jsonl(Path(rec.run_dir) / records.SUBMISSIONS_FILE)
            if str(s.get("job_id")) == job_id]
    submitted_at = min((float(s["submitted_at"]) for s in subs if "submitted_at" in s),
                       default=rec.submitted_at)
    events = records.job_events(rec.run_dir, job_id)
    try:
        log_text = rec.log_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        log_text = ""
    report = build_report(job_id, submitted_at=submitted_at, events=events, log_text=log_text,
                          now_s=records.now() if now_s is None else now_s)
    return report, [e for e in events if e.get("event") == "signal"]
