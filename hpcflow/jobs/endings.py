"""How a job or an attempt ended, told apart (docs/protocol.md, "Ending kinds").

The kinds and their words live in :mod:`hpcflow.ending_kinds` (``ENDING_KINDS``); this module reads
them off the ledger (the batch script's ``job_end`` reason and ``step_end`` rank exits, the
in-job failure events) and off Slurm's own state words (squeue(1), JOB STATE CODES and JOB
REASON CODES). Pure: the caller queries.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from hpcflow import ending_kinds as K
from hpcflow import protocol as P

#: Slurm's reasons for a held job: ``JobHeldUser`` / ``JobHeldAdmin`` (scontrol hold,
#: sbatch --hold), "job requeued in held state" (scontrol requeuehold; scontrol writes it with
#: underscores), "launch failed requeued held" (the batch launch failed; Slurm requeued and held
#: the job so that it does not fail again and again).
_HELD_RE = re.compile(r"JobHeld|requeued[ _]in[ _]held|launch[ _]failed[ _]requeued[ _]held",
                      re.IGNORECASE)
#: Slurm states after which the job will not run again, with the kind they mean when the ledger
#: has no better word.
_SLURM_FINAL_KIND = {
    "COMPLETED": K.ENDING_COMPLETED,
    "CANCELLED": K.ENDING_CANCELLED,
    "FAILED": K.ENDING_PROGRAM_ERROR,
    "OUT_OF_MEMORY": K.ENDING_PROGRAM_ERROR,
    "NODE_FAIL": K.ENDING_NODE_FAILURE,
    "BOOT_FAIL": K.ENDING_NODE_FAILURE,
    "TIMEOUT": K.ENDING_NOT_REQUEUED,
    "DEADLINE": K.ENDING_NOT_REQUEUED,
}


def held_reason(state: str, reason: str | None, priority: str | None = None) -> str | None:
    """Why Slurm holds the job, or ``None`` when it does not.

    Held: state ``REQUEUE_HOLD``, a reason in :data:`_HELD_RE`, or a pending job with priority 0
    (what ``scontrol hold`` sets).

    Returns:
        A sentence with Slurm's reason and the command that lets the job run again
        (``scontrol release <id>``; an administrator's hold needs an administrator).
    """
    state = (state or "").upper()
    why = (reason or "").strip()
    held = state == "REQUEUE_HOLD" or bool(_HELD_RE.search(why)) or (
        state == "PENDING" and (priority or "").strip() == "0")
    if not held:
        return None
    shown = why if why and why not in ("None", "(null)") else state
    who = " (an administrator's hold: ask an administrator)" if "Admin" in why else ""
    return f"held ({shown}): needs `scontrol release <id>`{who}"


def slurm_kind(state: str) -> str | None:
    """The ending kind a final Slurm state means by itself, or ``None`` (not final)."""
    return _SLURM_FINAL_KIND.get((state or "").upper())


def describe(kind: str) -> str:
    """The words of ``kind`` (:data:`hpcflow.ending_kinds.ENDING_KINDS`); an unknown kind (from a
    newer batch script) is shown as it is."""
    return K.ENDING_KINDS.get(kind, kind)


def rank_detail(step_end: Mapping[str, Any] | None, *, killed: bool = False) -> str:
    """What the ranks' own exit records say about a step (``step_end`` event), or ``""``.

    E.g. ``first failure: rank 1 exited with status 5 (<the error of that rank>)`` or
    ``rank(s) 2 left no exit record (killed by a signal); srun reported 137``. Ranks without a
    record are named when some rank has one, or when ``killed`` (the batch script found that
    ranks of a program that joined the protocol died of a signal).
    """
    if not step_end:
        return ""
    parts = []
    missing = step_end.get("missing")
    exited = int(step_end.get("ranks_exited") or 0)
    count = int(step_end.get("ranks_missing") or 0)
    if count and (exited or killed) and isinstance(missing, list):
        shown = ",".join(str(r) for r in missing) + ("..." if count > len(missing) else "")
        parts.append(f"rank(s) {shown} left no exit record (killed by a signal)")
    first = step_end.get("first_failure")
    if isinstance(first, Mapping):
        reason = str(first.get("reason", "")).strip()
        # After a kill, the others' errors (a closed connection) follow from it.
        what = "then" if killed else "first failure:"
        parts.append(f"{what} rank {first.get('rank')} exited with status {first.get('rc')}"
                     + (f" ({reason})" if reason else ""))
    if parts and "rc" in step_end:
        parts.append(f"srun reported {step_end['rc']}")
    return "; ".join(parts)


def warning_source(spot: Mapping[str, Any] | None, signal: Mapping[str, Any] | None) -> str:
    """Where an attempt's warning came from, told by the ledger alone (never by the time it
    came): a ``spot_notice`` event (``hpcflow spot-watch`` records it right after it signals the
    node's jobs) -> ``spot notice (terminate on n1)``; else the supervisor's ``signal`` event ->
    the signal without a spot notice: Slurm's time-limit warning (``--signal``). A signal sent
    by hand (``scancel --signal``) reaches the batch shell the same way, from slurmstepd
    (scancel(1)), and a bash trap is not told the sender, so it reads the same. ``""`` when
    neither is in the ledger."""
    if spot:
        return f"spot notice ({spot.get('action', '?')} on {spot.get('node', '?')})"
    if signal and signal.get("source") == P.SOURCE_SLURM_PREEMPT:
        return ("Slurm's own preemption: TERM to the steps at the start of GraceTime, the end "
                "time moved to its end")
    if signal:
        return (f"{signal.get('signal', 'the warning signal')} without a spot notice: Slurm's "
                "time-limit warning (or the same signal sent with scancel --signal)")
    return ""


def ledger_ending(events: Sequence[Mapping[str, Any]]) -> tuple[str, str] | None:
    """The ending of the last attempt in ``events`` (one job's ledger, oldest first), as
    ``(kind, detail)``; ``None`` while it has no ending record (running, or lost without one).

    An ending on the preemption path (:data:`hpcflow.ending_kinds.WARNED_REASONS`) names its
    warning's source (:func:`warning_source`); after a spot notice, ``preempted`` becomes
    ``preempted_spot`` (:data:`hpcflow.ending_kinds.SPOT_KIND`).
    """
    last_step_end: Mapping[str, Any] | None = None
    spot: Mapping[str, Any] | None = None
    signal: Mapping[str, Any] | None = None
    network: Mapping[str, Any] | None = None
    ending: tuple[str, str] | None = None
    for ev in events:
        kind = ev.get("event")
        if kind == P.EVENT_ATTEMPT_START:
            last_step_end, ending, spot, signal, network = None, None, None, None, None
        elif kind == P.EVENT_NETWORK:
            network = ev
        elif kind == P.EVENT_STEP_END:
            last_step_end = ev
        elif kind == P.EVENT_SPOT_NOTICE:
            spot = spot or ev
        elif kind == P.EVENT_SIGNAL:
            # Slurm's preemption outranks a warning signal of the same attempt: it says why.
            if signal is None or ev.get("source") == P.SOURCE_SLURM_PREEMPT:
                signal = ev
        elif kind in (P.EVENT_JOB_END, P.EVENT_REQUEUE):
            reason = str(ev.get("reason", "")) if kind == P.EVENT_JOB_END else (
                P.REASON_PROGRAM_REQUEUED if ev.get("by") == P.REQUEUED_BY_PROGRAM else
                P.REASON_REQUEUED_NO_CHECKPOINT if ev.get("checkpoint") is False else
                P.REASON_NODE_EXCLUDED if ev.get("cause") == P.REASON_NODE_EXCLUDED else
                P.REASON_REQUEUE)
            detail = reason if reason not in (P.REASON_COMPLETED, P.REASON_REQUEUE) else ""
            if reason == P.REASON_NODE_EXCLUDED:
                detail = (f"node(s) {ev.get('excluded', '?')} excluded after rank failures, no "
                          "spare node left: requeued without them")
            ranks = rank_detail(last_step_end, killed=reason == P.REASON_RANK_KILLED)
            if kind == P.EVENT_JOB_END and reason not in (P.REASON_COMPLETED, P.REASON_COMPLETED_AFTER_DONE):
                detail = "; ".join(d for d in (reason, ranks) if d)
            elif reason == P.REASON_COMPLETED_AFTER_DONE:
                detail = ("the final checkpoint was committed and every rank was done; srun "
                          f"reported {(last_step_end or {}).get('rc', '?')} from the teardown")
            ending_kind = K.REASON_KIND.get(reason, reason)
            if reason in K.WARNED_REASONS:
                detail = "; ".join(d for d in (detail, warning_source(spot, signal)) if d)
                if spot:
                    ending_kind = K.SPOT_KIND.get(ending_kind, ending_kind)
                elif signal and signal.get("source") == P.SOURCE_SLURM_PREEMPT:
                    ending_kind = K.SLURM_PREEMPT_KIND.get(ending_kind, ending_kind)
            ending = (ending_kind, detail)
            if reason == P.REASON_NETWORK_FALLBACK or (
                    reason in _FAILED_REASONS and _stopped_on_network(network, last_step_end)):
                ending = (K.ENDING_NETWORK_FALLBACK, network_fallback_detail(network))
    return ending


#: job_end reasons of a failed step that a network fall back may be behind.
_FAILED_REASONS = ("failed", P.REASON_PROGRAM_ERROR, P.REASON_FAILURE_LIMIT)


def _stopped_on_network(network: Mapping[str, Any] | None,
                        step_end: Mapping[str, Any] | None) -> bool:
    """The attempt's ranks stopped on a fall back: its ``network`` event says so, or the first
    failing rank left with :data:`hpcflow.protocol.EXIT_NETWORK_FALLBACK` and its reason."""
    if network is not None and network.get("stopped") is True:
        return True
    first = (step_end or {}).get("first_failure")
    return isinstance(first, Mapping) and first.get("rc") == P.EXIT_NETWORK_FALLBACK and \
        str(first.get("reason", "")).startswith(P.REASON_NETWORK_FALLBACK)


def network_fallback_detail(network: Mapping[str, Any] | None) -> str:
    """``NCCL over TCP sockets: EFA expected on p5.48xlarge; <what showed it>; fix: ...`` from
    the attempt's ``network`` event (a generic line without one)."""
    from hpcflow.nccl.netlog import FALLBACK_FIX as FIX

    if not network:
        return f"NCCL over TCP sockets on an instance with EFA; fix: {FIX}"
    problems = [str(p) for p in network.get("problems") or []]
    return "; ".join([str(network.get("summary") or "NCCL over TCP sockets"), *problems,
                      f"fix: {network.get('fix') or FIX}"])


def network_summary(events: Sequence[Mapping[str, Any]]) -> str:
    """The last ``network`` event's summary (``NCCL over EFA (aws-ofi-nccl 1.9.1, 32 NICs)``),
    or ``""`` when no attempt recorded one."""
    last = [ev for ev in events if ev.get("event") == P.EVENT_NETWORK]
    return str(last[-1].get("summary", "")) if last else ""


def excluded_nodes(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The ledger's ``node_excluded`` events (one job, oldest first) as ``{"attempt", "node",
    "failures", "spare", "time"}``: ``attempt`` counts from 1; ``spare`` is true when a spare node
    of the allocation took the node's place, false when the job was requeued without it."""
    return [{"attempt": int(ev.get("restart", 0)) + 1, "node": str(ev.get("node", "?")),
             "failures": ev.get("failures"), "spare": bool(ev.get("spare")),
             "time": ev.get("time")}
            for ev in events if ev.get("event") == P.EVENT_NODE_EXCLUDED]
