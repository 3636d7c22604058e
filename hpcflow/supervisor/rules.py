"""The job's decisions as pure functions: facts in, an action out (docs/architecture.md).

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
- :func:`after_failed_step`: restart the step in the allocation, exclude a node, or stop;
- :func:`ending`: how the attempt ends: requeue (with its cause) or end (reason, status);
- :func:`attempt_start`: whether an attempt may start at all, and which nodes its steps avoid.

The warning's and the deadline's rules are in :mod:`hpcflow.supervisor.warning`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hpcflow import protocol as P
from hpcflow.supervisor.budgets import exit_status, failures, requeue_budget, requeues_used
from hpcflow.supervisor.model import History, Limits, RankExit, StepFacts
from hpcflow.supervisor.ranks import first_failure, rank_summary

__all__ = [
    "Action", "AttemptStart", "History", "Limits", "RankExit", "StepFacts", "StepOutcome",
    "after_failed_step", "attempt_start", "blame_node", "ending", "exclude_for_step",
    "exit_status", "failures", "rank_summary", "requeue_budget", "requeues_used",
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


@dataclass(frozen=True)
class Action:
    """How an attempt ends (:func:`ending`).

    Attributes:
        requeue: run ``scontrol requeue`` (the attempt's last act); on its failure the job ends
            with :data:`hpcflow.protocol.REASON_REQUEUE_FAILED` and ``rc``.
        reason: the ``job_end`` reason when not requeued.
        rc: the batch script's exit status when not requeued.
        requeue_fields: the ``requeue`` event's members (``step``, ``cause``, ...).
        log: lines for the job log.
        exclude: nodes to put in the requeued job's ExcNodeList.
        already_requeued: the program requeued the job itself: record the ``requeue`` event
            (``requeue_fields``) and requeue nothing.
    """

    requeue: bool
    reason: str
    rc: int
    requeue_fields: Mapping[str, Any] = field(default_factory=dict)
    log: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    already_requeued: bool = False


def _requeue_or(limits: Limits, history: History, *, what: str, rc: int,
                fields: Mapping[str, Any], requeue_id: str, counted: bool = True,
                exclude: tuple[str, ...] = (), cause: str = P.CAUSE_TIME_LIMIT) -> Action:
    if not limits.requeue_allowed:
        return Action(False, P.REASON_REQUEUE_DISABLED, rc,
                      log=(f"{what}; not requeueing (preemption.requeue is false)",))
    used = requeues_used(history, limits, cause)
    bound, name = requeue_budget(limits, cause)
    kind = "preemption" if cause == P.CAUSE_PREEMPTION else "time-limit"
    if counted and used >= bound:
        return Action(False, P.REASON_REQUEUE_LIMIT, rc,
                      log=(f"{what}, but the job has used its {bound} {kind} requeue(s) ({name})",))
    if not counted:
        tail = ")"
    elif cause == P.CAUSE_PREEMPTION:
        tail = f"; preemption {used + 1} of at most {bound}, {name})"
    else:
        tail = f" of at most {bound})"
    line = f"{what}: requeueing {requeue_id} (restart {history.restart + 1}{tail}"
    return Action(True, P.REASON_REQUEUE_FAILED, rc, requeue_fields=dict(fields),
                  log=(line,), exclude=exclude)


def ending(facts: StepFacts, history: History, limits: Limits, *,
           outcome: StepOutcome | None = None, requeue_id: str = "") -> Action:
    """The ending ladder (:func:`_ladder`), with the batch script's exit status of an ending
    that is not a requeue from :func:`exit_status`: only a finished job exits 0. (A requeue's
    ``rc`` is the step's; the caller passes it through :func:`exit_status` if the requeue
    fails.)"""
    action = _ladder(facts, history, limits, outcome=outcome, requeue_id=requeue_id)
    if action.already_requeued or action.requeue:
        return action
    return Action(action.requeue, action.reason, exit_status(action.reason, action.rc),
                  action.requeue_fields, action.log, action.exclude)


def _ladder(facts: StepFacts, history: History, limits: Limits, *,
            outcome: StepOutcome | None = None, requeue_id: str = "") -> Action:
    """The ending ladder: the first rule that holds decides.

    0. the program requeued the job itself while it ran (``scontrol requeue`` from a rank):
       record that requeue, against the warning's budget, and requeue nothing (one requeue,
       not two);
    1. cancelled (``scancel``): never requeued, whatever was saved;
    2. the done record: completed, whatever status a rank's teardown gave srun;
       then Slurm's time limit: never requeued (the job is past its limit);
    3. a node excluded with no spare left: requeue without it (a failure, not a preemption);
    4. a committed preemption checkpoint: requeue (torchrun exits 1 after a clean save, so the
       commit record decides, never the status); ``rc`` 75 when not requeued;
    5. hpcflow stopped the program before the deadline, the program took the forwarded warning
       itself and left, or Slurm preempted the job: requeue whatever its exit status (a program
       that saves on the warning or on TERM and exits 0 has not finished; only the done record
       says so);
    6. status 0: completed;
    7. a warning without a commit: not requeued (``preempted_no_checkpoint``);
    8. ranks of a program that joined died of a signal without a record: ``rank_killed``;
    9. a rank stopped on NCCL's fall back to TCP sockets where EFA is required:
       ``network_fallback``, never requeued (the same nodes would fall back again);
    10. a rank exited with an error: ``program_error``; else ``failed``.
    The restart rules' reason (``outcome.fail_reason``) replaces 8 and 9's generic ones.
    """
    rc = facts.rc
    if facts.requeued_by_program and not facts.done:
        bound, name = requeue_budget(limits, facts.cause)
        over = requeues_used(history, limits, facts.cause) >= bound
        line = ("the program requeued the job itself (scontrol requeue from a rank): not "
                "requeueing it again; " + (
                    f"but its {bound} requeue(s) ({name}) are used: the next attempt ends at its "
                    "start" if over else
                    "the next attempt resumes from the program's own checkpoint"))
        return Action(False, P.REASON_REQUEUE, 0, already_requeued=True, requeue_fields={
            "step": None, "checkpoint": False, "cause": facts.cause,
            "by": P.REQUEUED_BY_PROGRAM, "over_budget": over}, log=(line,))
    if facts.cancelled:
        return Action(False, P.REASON_CANCELLED, rc,
                      log=("the job was cancelled: not requeueing",))
    if facts.done:
        if rc == 0:
            return Action(False, P.REASON_COMPLETED, 0)
        return Action(False, P.REASON_COMPLETED_AFTER_DONE, 0, log=(
            "the final checkpoint was committed and every rank was done: the job completed "
            f"(the step's status {rc} came from the teardown)",))
    if facts.time_limit:
        return Action(False, P.REASON_TIME_LIMIT, rc,
                      log=("Slurm ended the job at its time limit: not requeueing",))
    if outcome is not None and outcome.exclusion_requeue:
        step = facts.latest_checkpoint
        return _requeue_or(limits, history, what=f"node(s) {','.join(outcome.excluded)} excluded",
                           rc=rc, counted=False, exclude=outcome.excluded, requeue_id=requeue_id,
                           fields={"step": step, "cause": P.REASON_NODE_EXCLUDED,
                                   "excluded": ",".join(outcome.excluded)})
    if facts.committed_step is not None:
        step = facts.committed_step if facts.committed_step >= 0 else None
        action = _requeue_or(limits, history, what=f"checkpoint at step {step} committed",
                             rc=P.EXIT_PREEMPTED, fields={"step": step},
                             requeue_id=requeue_id, cause=facts.cause)
        return action
    if facts.stopped_unaware or facts.handled_warning or (facts.slurm_preempted
                                                          and facts.warnings):
        what = ("stopped before the deadline" if facts.stopped_unaware
                else "the program took the warning itself and left" if facts.handled_warning
                else "preempted by Slurm")
        return _requeue_or(limits, history, what=f"{what}, without an hpcflow checkpoint",
                           rc=rc, fields={"step": None, "checkpoint": False},
                           requeue_id=requeue_id, cause=facts.cause)
    if rc == 0:
        return Action(False, P.REASON_COMPLETED, 0)
    if facts.warnings or facts.flag:
        return Action(False, P.REASON_PREEMPTED_NO_CHECKPOINT, rc,
                      log=("signalled, but no checkpoint was committed: not requeueing",))
    if facts.network_fallback:
        return Action(False, P.REASON_NETWORK_FALLBACK, P.EXIT_NETWORK_FALLBACK)
    reason = P.REASON_FAILED
    missing = sum(1 for e in facts.exits if e is None)
    if missing and rc > 128 and facts.joined_count:
        reason = P.REASON_RANK_KILLED
    elif first_failure(facts.exits) is not None:
        reason = P.REASON_PROGRAM_ERROR
    if outcome is not None and outcome.fail_reason:
        reason = outcome.fail_reason
    return Action(False, reason, rc)


@dataclass(frozen=True)
class AttemptStart:
    """Whether an attempt starts (:func:`attempt_start`).

    Attributes:
        start: run the step; False ends the job with ``reason`` and status 1.
        reason: the ``job_end`` reason when not started.
        srun_exclude: hosts of this allocation the steps avoid.
        ignored: excluded nodes this allocation holds that the steps use all the same (too few
            others): Slurm did not keep the exclusion.
        log: lines for the job log.
    """

    start: bool
    reason: str = ""
    srun_exclude: tuple[str, ...] = ()
    ignored: tuple[str, ...] = ()
    log: tuple[str, ...] = ()


def attempt_start(history: History, limits: Limits, hosts: Sequence[str]) -> AttemptStart:
    """An attempt that Slurm requeued after the failure bound was reached (a node failure) does
    not start; otherwise its steps avoid the nodes earlier attempts excluded, when enough others
    are left, except under HyperPod's auto-resume (``limits.auto_resume``), where they avoid
    none: HyperPod replaces faulty nodes (:func:`after_failed_step`)."""
    if history.over_budget:
        return AttemptStart(False, P.REASON_REQUEUE_LIMIT, log=(
            "the program requeued the job itself with no requeue of its budget left "
            "(preemption.max_requeues or max_preemptions): not starting",))
    if limits.resilience and failures(history) > limits.max_failures:
        return AttemptStart(False, P.REASON_FAILURE_LIMIT, log=(
            f"the job has had {failures(history)} failure(s), more than resilience.max_failures "
            f"({limits.max_failures}): not starting",))
    if not history.excluded or limits.auto_resume:  # HyperPod owns the node list
        return AttemptStart(True)
    avoid = exclude_for_step(hosts, history.excluded, limits.step_nodes)
    if avoid is None:
        here = tuple(h for h in hosts if h in history.excluded)
        return AttemptStart(True, ignored=here, log=(
            f"nodes excluded earlier ({','.join(history.excluded)}) leave fewer than "
            f"{limits.step_nodes} node(s) of this allocation: using them all",))
    return AttemptStart(True, srun_exclude=avoid)

