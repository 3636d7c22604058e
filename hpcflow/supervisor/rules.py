"""The job's decisions after a step, as pure functions: facts in, an action out
(docs/architecture.md).

Nothing here reads a file, runs a command or looks at the clock: :mod:`hpcflow.supervisor.facts`
gathers the inputs, and :class:`hpcflow.supervisor.turns.Turns` (the decisions' effects:
ledger records, requeue, exclusion) with :class:`hpcflow.supervisor.attempt.Attempt` (the
processes: the step, the watchdog, the mirror) carries out the result. Every rule is covered by
a table of cases in ``tests/unit/supervisor``.

The rules (docs/protocol.md, "Ending kinds", "Hangs and in-job restarts", "Spare nodes and node
exclusion"):

- :func:`blame_node`: the node a failed step is blamed on;
- :mod:`hpcflow.supervisor.budgets`: the failures and requeues a job has used, and the exit
  status of each ending;
- :func:`after_failed_step`: restart the step in the allocation, exclude a node, or stop.

How an attempt ends and whether one may start (:func:`~hpcflow.supervisor.endings.ending`,
:func:`~hpcflow.supervisor.endings.attempt_start`) are in :mod:`hpcflow.supervisor.endings`;
the warning's and the deadline's rules in :mod:`hpcflow.supervisor.warning`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hpcflow import protocol as P
from hpcflow.supervisor.budgets import failures, requeues_used
from hpcflow.supervisor.model import History, Limits, RankExit, StepFacts
from hpcflow.supervisor.ranks import rank_summary

__all__ = [
    "History", "Limits", "RankExit", "StepFacts", "StepOutcome", "after_failed_step",
    "blame_node", "exclude_for_step", "failures", "rank_summary", "requeues_used",
]


def blame_node(facts: StepFacts) -> str | None:
    """The node a failed step is blamed on: the one node every rank without an exit record ran on.

    Nothing is blamed after success, a warning or stop, the done record, a program error (a
    rank wrote an exception signature), a hang (a stopped process says nothing about its node),
    a rank whose node is unknown, or when those ranks ran on several nodes.
    """
    if facts.rc == 0 or facts.done or facts.warned or facts.error_sigs or facts.hang:
        return None
    node: str | None = None
    for rank, record in enumerate(facts.exits):
        if record is not None:
            continue
        where = facts.joined[rank] if rank < len(facts.joined) else None
        if not where or (node is not None and where != node):
            return None
        node = where
    return node


def exclude_for_step(hosts: Sequence[str], excluded: Sequence[str],
                     step_nodes: int) -> tuple[str, ...] | None:
    """The allocation's hosts a step must avoid (srun ``--exclude``), or None when avoiding the
    excluded ones would leave fewer than ``step_nodes`` nodes."""
    mine = tuple(h for h in hosts if h in excluded)
    if len(hosts) - len(mine) < step_nodes:
        return None
    return mine


@dataclass(frozen=True)
class StepOutcome:
    """The decision after a failed step (:func:`after_failed_step`).

    Attributes:
        restart: start the step again in this allocation.
        cause: ``rank_failure``, ``program_error`` or ``hang``.
        events: ledger events to append first, as ``(name, fields)``.
        log: lines for the job log.
        fail_reason: a job-end reason that says more than the generic one (the same exception
            twice, the failure budget), or None.
        exclusion_requeue: a node was excluded and no spare is left: requeue without it.
        excluded: every node excluded so far, after this step.
        srun_exclude: the hosts the next step avoids.
    """

    restart: bool
    cause: str = "rank_failure"
    events: tuple[tuple[str, dict[str, Any]], ...] = ()
    log: tuple[str, ...] = ()
    fail_reason: str | None = None
    exclusion_requeue: bool = False
    excluded: tuple[str, ...] = ()
    srun_exclude: tuple[str, ...] = ()


def after_failed_step(facts: StepFacts, history: History, limits: Limits, *, try_: int,
                      prev_error: str, hosts: Sequence[str], excluded: Sequence[str],
                      errors_path: str) -> StepOutcome:
    """Whether a step that ended goes again inside the allocation (``resilience`` only).

    ``history`` already counts this step's ``step_end`` (and its blamed node). Order of the
    rules: nothing to restart (success, done, a warning); the same exception twice; node
    exclusion (and its budget); the in-job bound; a committed checkpoint to restart from, or,
    before the first one, a rank lost (:func:`_lost_a_joined_rank`: the program restores nothing
    and starts again from step 0, so a rank lost early costs the steps run so far, not the
    allocation); the failure budget.

    Under SageMaker HyperPod's auto-resume (``limits.auto_resume``, the step is ``srun
    --auto-resume=1``) node faults are HyperPod's: when a step fails and its health checks find a
    faulty node, HyperPod replaces the node and runs the step again (AWS, "Automatic node
    recovery and auto-resume", https://docs.aws.amazon.com/sagemaker/latest/dg/
    sagemaker-hyperpod-resiliency-slurm-auto-resume.html; it acts on the srun, not on the batch
    script). These rules see the srun only when it returns, so a rerun HyperPod made inside it
    is not one of their restarts and is not counted. A step that still fails has had
    HyperPod's turn: no node is excluded
    (no ``--exclude``, no spare swapped in: HyperPod owns the node list), and a failure that is
    neither a program error nor a hang (ranks lost without an exit record, a node fault's mark)
    is not restarted here. Program errors and hangs keep their in-job restart.
    """
    excluded = tuple(excluded)
    if limits.auto_resume:
        srun_exclude: tuple[str, ...] = ()
    else:
        srun_exclude = exclude_for_step(hosts, excluded, limits.step_nodes) or ()
    keep = {"excluded": excluded, "srun_exclude": srun_exclude}
    if (not limits.resilience or facts.rc == 0 or facts.done or facts.warned
            or facts.ending_by_slurm):
        return StepOutcome(restart=False, **keep)
    if facts.network_fallback:  # the same nodes fall back the same way: never restarted
        return StepOutcome(restart=False, cause="network_fallback",
                           log=("NCCL fell back to TCP sockets where EFA is required: not "
                                "restarting (see hpcflow report for the fix)",), **keep)
    events: list[tuple[str, dict[str, Any]]] = []
    log: list[str] = []
    cause = "rank_failure"
    sig = " ".join(facts.error_sigs)
    if sig:
        cause = "program_error"
        repeated = sig == prev_error
        events.append((P.EVENT_PROGRAM_ERROR, {"exception": sig, "try": try_,
                                               "errors": errors_path, "repeated": repeated}))
        if repeated:
            log.append(f"the same exception ({sig}) ended two steps in a row: not restarting; "
                       f"tracebacks in {errors_path}")
            return StepOutcome(restart=False, cause=cause, events=tuple(events), log=tuple(log),
                               fail_reason=P.REASON_PROGRAM_ERROR, **keep)
    elif facts.hang:
        cause = "hang"
    if limits.auto_resume and cause == "rank_failure":
        log.append(f"step failed (status {facts.rc}) with ranks lost or failed and no exception "
                   "recorded: with hyperpod.auto_resume, HyperPod checks the nodes of a failed "
                   "step and replaces a faulty one itself; hpcflow neither excludes a node nor "
                   "restarts the step")
        return StepOutcome(restart=False, cause=cause, events=tuple(events), log=tuple(log),
                           **keep)
    node = None if limits.auto_resume else blame_node(facts)
    blamed = history.blamed.get(node, 0) if node else 0
    if node and node not in excluded and blamed >= limits.exclude_after:
        excluded = (*excluded, node)
        step_exclude = exclude_for_step(hosts, excluded, limits.step_nodes)
        spare = step_exclude is not None
        if not spare and failures(history) >= limits.max_failures:
            log.append(f"node {node} failed {blamed} time(s), no spare node is left, and the job "
                       f"has had {failures(history)} failure(s), its bound "
                       "(resilience.max_failures)")
            return StepOutcome(restart=False, cause=cause, events=tuple(events), log=tuple(log),
                               fail_reason=P.REASON_FAILURE_LIMIT, excluded=excluded,
                               srun_exclude=srun_exclude)
        events.append((P.EVENT_NODE_EXCLUDED, {"node": node, "failures": blamed,
                                               "excluded": ",".join(excluded), "spare": spare}))
        if not spare:
            log.append(f"node {node} failed {blamed} time(s): excluded; no spare node is left: "
                       f"requeueing the job without {','.join(excluded)}")
            return StepOutcome(restart=False, cause=cause, events=tuple(events), log=tuple(log),
                               exclusion_requeue=True, excluded=excluded,
                               srun_exclude=srun_exclude)
        srun_exclude = step_exclude or ()
        log.append(f"node {node} failed {blamed} time(s): excluded; the next step runs on the "
                   f"other node(s) of the allocation (--exclude={','.join(srun_exclude)})")
    keep = {"excluded": excluded, "srun_exclude": srun_exclude}
    if try_ >= limits.max_in_job_restarts:
        log.append(f"step failed ({cause}); the {limits.max_in_job_restarts} in-job restart(s) "
                   "are used")
        return StepOutcome(restart=False, cause=cause, events=tuple(events), log=tuple(log), **keep)
    if facts.latest_checkpoint is None and not _lost_a_joined_rank(facts):
        log.append(f"step failed ({cause}); no committed checkpoint to restart from")
        return StepOutcome(restart=False, cause=cause, events=tuple(events), log=tuple(log), **keep)
    if failures(history) >= limits.max_failures:
        log.append(f"step failed ({cause}); the job has had {failures(history)} failure(s), its "
                   "bound (resilience.max_failures)")
        return StepOutcome(restart=False, cause=cause, events=tuple(events), log=tuple(log),
                           fail_reason=P.REASON_FAILURE_LIMIT, **keep)
    events.append((P.EVENT_STEP_RESTART, {"try": try_ + 1, "rc": facts.rc, "cause": cause,
                                          "step": facts.latest_checkpoint}))
    start = (f"the checkpoint of step {facts.latest_checkpoint}"
             if facts.latest_checkpoint is not None else "the start (no committed checkpoint yet)")
    log.append(f"step failed ({cause}, status {facts.rc}): starting it again in this allocation "
               f"from {start} (in-job restart {try_ + 1} of at most "
               f"{limits.max_in_job_restarts})")
    return StepOutcome(restart=True, cause=cause, events=tuple(events), log=tuple(log), **keep)


def _lost_a_joined_rank(facts: StepFacts) -> bool:
    """A program that joined the protocol lost a rank it did not end itself: a rank without an
    exit record (killed by a signal: ``kill -9``, the OOM killer, a lost node) or a hang. Ranks
    that all recorded their own exit (an exception, ``sys.exit(64)`` on a bad configuration)
    would most likely fail the same way again from step 0, and a program that never joined
    keeps the ending it had."""
    return bool(facts.joined_count) and (facts.hang or any(e is None for e in facts.exits))
