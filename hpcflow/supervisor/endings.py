"""How an attempt ends, and whether one may start: pure functions, facts in, an action out
(docs/protocol.md, "Ending kinds"; docs/architecture.md).

- :func:`ending`: requeue (with its cause) or end (reason, status), after the attempt's last
  step (:func:`hpcflow.supervisor.rules.after_failed_step` decided no restart in the
  allocation);
- :func:`attempt_start`: whether an attempt may start at all, and which nodes its steps avoid.

:class:`hpcflow.supervisor.turns.Turns` carries out the answers. Every rule is covered by a table
of cases in ``tests/unit/supervisor``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hpcflow import protocol as P
from hpcflow.supervisor.budgets import exit_status, failures, requeue_budget, requeues_used
from hpcflow.supervisor.model import History, Limits, StepFacts
from hpcflow.supervisor.ranks import first_failure
from hpcflow.supervisor.rules import StepOutcome, exclude_for_step

__all__ = ["Action", "AttemptStart", "attempt_start", "ending"]


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

