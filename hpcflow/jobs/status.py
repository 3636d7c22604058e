"""One job's status, composed from every source that may know it.

Sources, most current first: ``squeue`` (pending and running jobs), ``scontrol show job``
(also finished ones, until ``MinJobAge``), ``sacct`` (where accounting is enabled), and the
ledger the batch script writes (always, see docs/protocol.md). Pure: the caller queries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from hpcflow import ending_kinds as K
from hpcflow import protocol as P

# Job states after which Slurm will not run the job again by itself (squeue(1), JOB STATE
# CODES). PREEMPTED, REQUEUED, REQUEUE_HOLD, NODE_FAIL (with --requeue) and SUSPENDED are not
# final: the job comes back.
FINAL_STATES = frozenset({
    "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE",
})


@dataclass(frozen=True)
class JobStatus:
    """What ``hpcflow status`` reports about one job.

    Attributes:
        job_id: Slurm job id.
        name: job name.
        state: Slurm's state word (``PENDING``, ``RUNNING``, ``COMPLETED``...), or ``UNKNOWN``.
        finished: the job will not run again (a requeued or preempted job is not finished).
        attempts: how many times the batch script started (first run + restarts).
        restarts: ``SLURM_RESTART_COUNT`` of the latest attempt.
        elapsed_s: seconds from the first start to the end (or now), or None if never started.
        reason: why it is pending, why it ended, or what hpcflow decided (requeue, limit).
        exit_code: the job's exit code once finished, else None.
        run_dir: the run directory, when known.
        source: which source gave the state (``squeue``, ``scontrol``, ``sacct``, ``ledger``).
        ending: how the job ended, or how its last attempt ended while it is not finished
            (a kind of :data:`hpcflow.ending_kinds.ENDING_KINDS`: ``completed``, ``preempted``,
            ``node_failure``, ``program_error``, ``held``...); ``""`` while nothing ended.
        network: what NCCL ran over in the last attempt that recorded it (the ledger's
            ``network`` event: ``NCCL over EFA (aws-ofi-nccl 1.9.1, 32 NICs)``), or ``""``.
        budgets: per budget (``time_limit_requeues``, ``preemptions``, and with resilience
            ``failures``), ``[used, bound]`` as the supervisor counts them
            (:func:`budgets_used`); empty when the ledger has no bounds (protocol 4).
        ledger_skipped: lines of the ledger left out because they do not decode (not JSON, not
            an event, a member of the wrong type: :mod:`hpcflow.contract`); the status is
            composed from the rest.
    """

    job_id: str
    name: str
    state: str
    finished: bool
    attempts: int
    restarts: int
    elapsed_s: float | None
    reason: str
    exit_code: int | None
    run_dir: str | None
    source: str
    ending: str = ""
    network: str = ""
    budgets: dict[str, list[int]] = field(default_factory=dict)
    ledger_skipped: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _exit_code(text: str | None) -> int | None:
    """Slurm writes exit codes as ``code:signal``; a signal death is 128 + signal."""
    if not text:
        return None
    code, _, sig = text.partition(":")
    try:
        c, s = int(code), int(sig or 0)
    except ValueError:
        return None
    return c if s == 0 else 128 + s


def _ledger_summary(events: Sequence[Mapping[str, Any]], now_s: float) -> dict[str, Any]:
    starts = [e for e in events if e.get("event") == P.EVENT_ATTEMPT_START]
    last = events[-1] if events else None
    summary: dict[str, Any] = {
        "attempts": len(starts),
        "restarts": int(starts[-1].get("restart", 0)) if starts else 0,
        "elapsed_s": None,
        "state": None,
        "reason": "",
        "exit_code": None,
    }
    if starts:
        end = float(last["time"]) if last and last.get("event") == P.EVENT_JOB_END else now_s
        summary["elapsed_s"] = max(0.0, end - float(starts[0]["time"]))
        # If Slurm says the job has ended while the ledger has no end (the supervisor was
        # killed with the job), the time stops at the ledger's last record, not at now.
        summary["elapsed_to_last_s"] = max(0.0, float(last["time"]) - float(starts[0]["time"]))
    if last is None:
        return summary
    kind = last.get("event")
    if kind == P.EVENT_JOB_END:
        rc = int(last.get("rc", 1))
        summary["exit_code"] = rc
        # Slurm's own word for a cancel and the time limit, whatever the status (budgets.exit_status)
        summary["state"] = {P.REASON_CANCELLED: "CANCELLED", P.REASON_TIME_LIMIT: "TIMEOUT"}.get(
            str(last.get("reason", "")), "COMPLETED" if rc == 0 else "FAILED")
        summary["reason"] = str(last.get("reason", ""))
    elif kind == P.EVENT_REQUEUE:
        summary["state"] = "REQUEUED"
        if last.get("by") == P.REQUEUED_BY_PROGRAM:
            summary["reason"] = ("the program caught the warning, saved its own checkpoint and "
                                 "requeued the job itself; it resumes from that checkpoint")
        elif last.get("checkpoint") is False:
            summary["reason"] = ("preempted; requeued without an hpcflow checkpoint (the program "
                                 "did not join the protocol; it resumes from its own checkpoints)")
        else:
            summary["reason"] = f"preempted; requeued after checkpoint at step {last.get('step', '?')}"
    else:
        summary["state"] = "RUNNING"
    return summary


def compose_status(
    job_id: str,
    *,
    name: str = "",
    run_dir: str | None = None,
    queue: Mapping[str, Any] | None = None,
    show: Mapping[str, str] | None = None,
    acct_state: str | None = None,
    acct_exit: str | None = None,
    events: Sequence[Mapping[str, Any]] = (),
    ledger_skipped: int = 0,
    now_s: float,
) -> JobStatus:
    """Combine the sources into one :class:`JobStatus`.

    Args:
        job_id: the job.
        name: its name, when known from hpcflow's index.
        run_dir: its run directory, when known.
        queue: its ``squeue`` row as a mapping (``state``, ``reason``, ``name``), if listed.
        show: its ``scontrol show job`` fields (``JobState``, ``Reason``, ``Restarts``,
            ``ExitCode``, ``JobName``, ``WorkDir``), if Slurm still knows it.
        acct_state: the job's ``sacct`` State (first word), where accounting works.
        acct_exit: the job's ``sacct`` ExitCode (``code:signal``).
        events: this job's ledger events, oldest first.
        ledger_skipped: ledger lines the reader skipped (:func:`hpcflow.ledger.read_ledger`).
        now_s: the current Unix time in seconds.
    """
    ledger = _ledger_summary(events, now_s)
    restarts = ledger["restarts"]
    attempts = ledger["attempts"]
    reason = ledger["reason"]
    exit_code = ledger["exit_code"]
    if show:
        name = name or show.get("JobName", "")
        try:
            restarts = max(restarts, int(show.get("Restarts", "0")))
        except ValueError:
            pass
    if queue:
        state, source = str(queue.get("state", "UNKNOWN")).upper(), "squeue"
        try:
            restarts = max(restarts, int(queue.get("restart_count") or 0))
        except (TypeError, ValueError):
            pass
        name = name or str(queue.get("name", ""))
        slurm_reason = str(queue.get("reason", ""))
        if slurm_reason and slurm_reason not in ("None", "(null)"):
            reason = slurm_reason if not reason else f"{slurm_reason}; {reason}"
    elif show and show.get("JobState"):
        state, source = show["JobState"].upper(), "scontrol"
        exit_code = _exit_code(show.get("ExitCode")) if state in FINAL_STATES else exit_code
        slurm_reason = show.get("Reason", "")
        if slurm_reason and slurm_reason != "None" and not reason:
            reason = slurm_reason
    elif acct_state:
        state, source = acct_state.split()[0].upper(), "sacct"
        if state in FINAL_STATES:
            exit_code = _exit_code(acct_exit)
    elif ledger["state"]:
        state, source = ledger["state"], "ledger"
        if state == "RUNNING":
            # The ledger says it runs, but Slurm no longer lists it: the attempt died without
            # the script writing its end (node failure, scancel, kill).
            state, reason = "UNKNOWN", "Slurm no longer knows the job; its last attempt left no end record"
    else:
        state, source = "UNKNOWN", "none"
        reason = reason or "no source knows this job (Slurm forgot it and hpcflow has no record)"
    finished = state in FINAL_STATES
    if finished and source == "squeue" and show and show.get("ExitCode"):
        exit_code = _exit_code(show.get("ExitCode"))
    ending, reason = _ending(state, finished, reason, events, restarts, queue, show)
    reason = reason.replace("scontrol release <id>", f"scontrol release {job_id}")
    if state == "PENDING" and restarts > 0:
        reason = reason or "requeued"
    # Slurm counts a restart when it requeues, so a pending job has run `restarts` times and a
    # running or ended one `restarts + 1` times.
    slurm_attempts = 0 if state == "UNKNOWN" else restarts + (0 if state == "PENDING" else 1)
    if state == "CANCELLED" and run_dir and not attempts and restarts == 0:
        # The batch script writes attempt_start first thing: with a known run directory and no
        # start in its ledger, the job was cancelled while it was still pending.
        slurm_attempts, reason = 0, "cancelled before it started"
    return JobStatus(
        job_id=job_id, name=name, state=state, finished=finished,
        attempts=max(attempts, slurm_attempts),
        restarts=restarts,
        elapsed_s=ledger.get("elapsed_to_last_s") if finished else ledger["elapsed_s"],
        reason=reason,
        exit_code=exit_code if finished else None, run_dir=run_dir, source=source,
        ending=ending, network=_network(events), budgets=budgets_used(events),
        ledger_skipped=ledger_skipped,
    )


def budgets_used(events: Sequence[Mapping[str, Any]]) -> dict[str, list[int]]:
    """``[used, bound]`` of each requeue budget, counted by the supervisor's own rules
    (:func:`hpcflow.supervisor.rules.requeues_used`, :func:`~hpcflow.supervisor.rules.failures`)
    from the ledger, with the bounds the last attempt recorded at its start."""
    from hpcflow.supervisor.rules import History, Limits, failures, requeues_used

    start = next((e for e in reversed(events) if e.get("event") == P.EVENT_ATTEMPT_START
                  and isinstance(e.get("budgets"), Mapping)), None)
    if start is None:
        return {}
    bounds = start["budgets"]
    try:
        limits = Limits(ntasks=0, step_nodes=0, max_requeues=int(bounds["max_requeues"]),
                        max_preemptions=int(bounds["max_preemptions"]),
                        max_failures=int(bounds["max_failures"]),
                        resilience=bounds.get("resilience") is True)
        restart = int(start.get("restart", 0))
    except (KeyError, TypeError, ValueError, OverflowError):
        return {}
    history = History.from_events(events, restart)
    out = {"time_limit_requeues": [requeues_used(history, limits, P.CAUSE_TIME_LIMIT),
                                   limits.max_requeues],
           "preemptions": [requeues_used(history, limits, P.CAUSE_PREEMPTION),
                           limits.max_preemptions]}
    if limits.resilience:
        out["failures"] = [failures(history), limits.max_failures]
    return out


def _network(events: Sequence[Mapping[str, Any]]) -> str:
    from hpcflow.jobs.endings import network_summary

    return network_summary(events)


def _ending(state: str, finished: bool, reason: str, events: Sequence[Mapping[str, Any]],
            restarts: int, queue: Mapping[str, Any] | None,
            show: Mapping[str, str] | None) -> tuple[str, str]:
    """The ending kind (docs/protocol.md, "Ending kinds") and the reason to show with it."""
    from hpcflow.jobs import endings

    slurm_reason = str((queue or {}).get("reason") or (show or {}).get("Reason") or "")
    held = endings.held_reason(state, slurm_reason, (show or {}).get("Priority"))
    if held and not finished:
        return K.ENDING_HELD, held if not reason or slurm_reason in reason else f"{held}; {reason}"
    from_ledger = endings.ledger_ending(events)
    starts = [e for e in events if e.get("event") == P.EVENT_ATTEMPT_START]
    last_restart = int(starts[-1].get("restart", 0)) if starts else -1
    if from_ledger is None and starts and restarts > last_restart:
        # The last attempt the ledger saw left no end record, and Slurm has run it again since.
        detail = endings.describe(K.ENDING_NODE_FAILURE)
        return K.ENDING_NODE_FAILURE, f"{reason}; {detail}" if reason else detail
    if state == "CANCELLED" and (from_ledger is None or from_ledger[0] != K.ENDING_COMPLETED):
        return K.ENDING_CANCELLED, reason or endings.describe(K.ENDING_CANCELLED)
    if from_ledger is not None:
        kind, detail = from_ledger
        parts = [p for p in reason.split("; ") if p]  # each part once: the ledger's reason word
        parts += [p for p in detail.split("; ") if p and p not in parts]  # may start the detail
        return kind, "; ".join(parts)
    if finished:
        return endings.slurm_kind(state) or "", reason
    return "", reason
