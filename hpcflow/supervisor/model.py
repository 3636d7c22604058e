"""The typed inputs of the supervisor's rules (:mod:`hpcflow.supervisor.rules`): the job's
limits, what a finished step left behind, and what the ledger says of the job so far. Pure data;
:mod:`hpcflow.supervisor.facts` fills them in from the run directory."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hpcflow import protocol as P

__all__ = ["History", "Limits", "RankExit", "StepFacts"]


@dataclass(frozen=True)
class Limits:
    """The job's bounds, from the spec (rendered into the batch script; defaults live in the spec
    models, never here).

    Attributes:
        ntasks: ranks of one step.
        step_nodes: nodes one step runs on (``nodes``; the allocation may hold spares).
        max_requeues: ``preemption.max_requeues``: requeues after a time-limit warning.
        max_preemptions: ``preemption.max_preemptions``: requeues after a preemption (a spot
            notice, Slurm's own preemption).
        requeue_allowed: ``preemption.requeue``.
        resilience: ``resilience`` is on (the default; in-job restarts, failure budget,
            exclusion).
        max_in_job_restarts: ``resilience.max_in_job_restarts``.
        max_failures: ``resilience.max_failures``.
        exclude_after: ``resilience.exclude_after_failures``.
        auto_resume: the step runs under SageMaker HyperPod's ``srun --auto-resume=1``
            (``hyperpod.auto_resume``): node faults are HyperPod's, not the supervisor's.
    """

    ntasks: int
    step_nodes: int
    max_requeues: int
    max_preemptions: int = 0
    requeue_allowed: bool = True
    resilience: bool = False
    max_in_job_restarts: int = 0
    max_failures: int = 0
    exclude_after: int = 0
    auto_resume: bool = False


@dataclass(frozen=True)
class RankExit:
    """One rank's exit record (``exits-<job>-<restart>/<rank>``): status, Unix ms, reason."""

    rc: int
    time_ms: int
    reason: str = ""


@dataclass(frozen=True)
class StepFacts:
    """What one finished step left behind.

    Attributes:
        rc: srun's exit status (the program's; >128 after a signal).
        exits: per rank (index = rank), its exit record or None (killed by a signal).
        joined: per rank, the node its joined file names, or None (not joined).
        warnings: warning signals the batch script took during the step (USR1/USR2, or TERM of
            Slurm's own preemption).
        slurm_preempted: one of them was Slurm's preemption (TERM, EndTime moved to the grace).
        cancelled: the job was cancelled (``scancel``) while it ran: Slurm said ``CANCELLED``, or
            sent the supervisor TERM (only a cancel or the time limit does; Slurm's preemption
            TERMs the steps alone) without ``Reason=TimeLimit``.
        time_limit: Slurm ended the job at its time limit (TERM to the supervisor,
            ``Reason=TimeLimit``).
        stopped_unaware: hpcflow stopped the program (TERM before the deadline) because it had
            not joined the protocol.
        flag: the preemption flag file exists.
        committed_step: the step of this attempt's preemption commit file, or None; ``-1`` for
            a commit file without a readable step.
        done: the done record exists (the final checkpoint committed, every rank finished).
        error_sigs: the ``<type>@<step>`` signatures of ranks that raised, sorted, unique.
        hang: the watchdog handled a hang in this step.
        latest_checkpoint: the highest committed ``step_<N>/`` in the checkpoint folder.
        handled_warning: the warning was forwarded to a program that catches it itself
            (:mod:`hpcflow.supervisor.sigcatch`): whatever its status, it stopped for the warning.
        requeued_by_program: Slurm requeued the job while the step ran, and hpcflow did not ask
            it to (``scontrol requeue`` from a rank, as Lightning and submitit do).
        cause: what brought the warning (:data:`hpcflow.protocol.CAUSE_TIME_LIMIT` or
            :data:`~hpcflow.protocol.CAUSE_PREEMPTION`; :func:`hpcflow.supervisor.warning.
            warning_cause`).
    """

    rc: int
    exits: Sequence[RankExit | None] = ()
    joined: Sequence[str | None] = ()
    warnings: int = 0
    slurm_preempted: bool = False
    cancelled: bool = False
    time_limit: bool = False
    stopped_unaware: bool = False
    flag: bool = False
    committed_step: int | None = None
    done: bool = False
    error_sigs: tuple[str, ...] = ()
    hang: bool = False
    latest_checkpoint: int | None = None
    handled_warning: bool = False
    requeued_by_program: bool = False
    cause: str = P.CAUSE_TIME_LIMIT

    @property
    def ending_by_slurm(self) -> bool:
        """Slurm is ending the attempt (a cancel, the time limit, or a requeue the program
        made): nothing restarts in it, and hpcflow requeues nothing."""
        return self.cancelled or self.time_limit or self.requeued_by_program

    @property
    def warned(self) -> bool:
        """A warning or a stop came in this step: the preemption path, not a failure."""
        return bool(self.warnings or self.flag or self.stopped_unaware or self.handled_warning
                    or self.committed_step is not None)

    @property
    def joined_count(self) -> int:
        return sum(1 for n in self.joined if n is not None)

    @property
    def network_fallback(self) -> bool:
        """A rank stopped because NCCL fell back to TCP sockets where EFA is required
        (``network.require_efa``; its exit record: status 78, reason ``network_fallback: ...``)."""
        return any(e is not None and e.rc == P.EXIT_NETWORK_FALLBACK
                   and e.reason.startswith(P.REASON_NETWORK_FALLBACK) for e in self.exits)


@dataclass(frozen=True)
class History:
    """What the ledger says of this job so far (every attempt), counted once.

    Attributes:
        restart: this attempt's ``SLURM_RESTART_COUNT``.
        step_restarts: ``step_restart`` events.
        requeues: ``requeue`` events (hpcflow's own requeues).
        exclusion_requeues: of those, requeues after a node exclusion with no spare.
        preemption_requeues: of those, requeues of an attempt a preemption warned (a
            ``spot_notice``, a ``signal`` with ``cause`` :data:`hpcflow.protocol.
            CAUSE_PREEMPTION` or Slurm's own preemption), the program's own included.
        over_budget: the last requeue was one the program made itself with no requeue of its
            budget left (``over_budget`` in its event): the next attempt does not start.
        blamed: node -> failed steps blamed on it (``step_end`` events with ``node``).
        excluded: nodes excluded so far, in order (``node_excluded`` events).
    """

    restart: int = 0
    step_restarts: int = 0
    requeues: int = 0
    exclusion_requeues: int = 0
    preemption_requeues: int = 0
    over_budget: bool = False
    blamed: Mapping[str, int] = field(default_factory=dict)
    excluded: tuple[str, ...] = ()

    @classmethod
    def from_events(cls, events: Sequence[Mapping[str, Any]], restart: int) -> History:
        """Count one job's ledger events (already filtered to the job)."""
        blamed: dict[str, int] = {}
        excluded: list[str] = []
        counts = {P.EVENT_STEP_RESTART: 0, P.EVENT_REQUEUE: 0}
        exclusion_requeues = preemption_requeues = 0
        over_budget = False
        preempted: set[Any] = set()  # attempts (restart numbers) a preemption warned
        for ev in events:
            name = ev.get("event")
            if name in counts:
                counts[name] += 1
            if name == P.EVENT_SPOT_NOTICE or (name == P.EVENT_SIGNAL and (
                    ev.get("cause") == P.CAUSE_PREEMPTION
                    or ev.get("source") == P.SOURCE_SLURM_PREEMPT)):
                preempted.add(ev.get("restart"))
            if name == P.EVENT_REQUEUE:
                over_budget = ev.get("over_budget") is True
            if name == P.EVENT_REQUEUE and ev.get("cause") == P.REASON_NODE_EXCLUDED:
                exclusion_requeues += 1
            elif name == P.EVENT_REQUEUE and (ev.get("cause") == P.CAUSE_PREEMPTION
                                              or ev.get("restart") in preempted):
                preemption_requeues += 1
            elif name == P.EVENT_STEP_END and isinstance(ev.get("node"), str):
                blamed[ev["node"]] = blamed.get(ev["node"], 0) + 1
            elif (name == P.EVENT_NODE_EXCLUDED and isinstance(ev.get("node"), str)
                  and ev["node"] not in excluded):
                excluded.append(ev["node"])
        return cls(restart=restart, step_restarts=counts[P.EVENT_STEP_RESTART],
                   requeues=counts[P.EVENT_REQUEUE], exclusion_requeues=exclusion_requeues,
                   preemption_requeues=preemption_requeues, over_budget=over_budget,
                   blamed=blamed, excluded=tuple(excluded))
