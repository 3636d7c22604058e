"""The job's budgets and the truth told to Slurm, as pure functions: the failures and the requeues
a job has used against ``resilience.max_failures``, ``preemption.max_requeues`` and
``preemption.max_preemptions``, and the batch script's exit status for each ending
(docs/your-training-loop.md, "Programs that don't use the API"; table tests in
``tests/unit/supervisor/test_catch_rules.py`` and ``test_supervisor_rules.py``)."""

from __future__ import annotations

from hpcflow import protocol as P
from hpcflow.supervisor.model import History, Limits

__all__ = ["exit_status", "failures", "requeue_budget", "requeues_used"]


def failures(history: History) -> int:
    """Failures so far: steps restarted in an allocation, plus attempts Slurm requeued itself
    (after a node failure: restarts that hpcflow's own requeues do not explain), plus hpcflow's
    requeues after a node exclusion with no spare left."""
    by_slurm = max(history.restart - history.requeues, 0)
    return history.step_restarts + by_slurm + history.exclusion_requeues


def requeues_used(history: History, limits: Limits, cause: str = P.CAUSE_TIME_LIMIT) -> int:
    """Requeues counted against the budget of ``cause``.

    A preemption's (a spot notice, Slurm's own preemption) count against
    ``preemption.max_preemptions``: every requeue the ledger records with that cause. The
    others count against ``preemption.max_requeues``: with ``resilience`` on (the default)
    hpcflow's own requeues after a time-limit warning (a node failure's or an exclusion's are
    failures, counted against ``resilience.max_failures``); with ``resilience: false`` every
    restart that was not a preemption's. Submitit keeps preemptions and time-outs apart for the
    same reason: a spot job preempted often has failed at nothing.
    """
    if cause == P.CAUSE_PREEMPTION:
        return history.preemption_requeues
    if not limits.resilience:
        return max(history.restart - history.preemption_requeues, 0)
    return history.requeues - history.exclusion_requeues - history.preemption_requeues


def requeue_budget(limits: Limits, cause: str) -> tuple[int, str]:
    """The bound of ``cause``'s requeues and its spec field."""
    if cause == P.CAUSE_PREEMPTION:
        return limits.max_preemptions, "preemption.max_preemptions"
    return limits.max_requeues, "preemption.max_requeues"


def exit_status(reason: str, rc: int) -> int:
    """The batch script's exit status for a job that ends with ``reason``.

    Only a finished job (``completed``, ``completed_after_done``) exits 0. Any other ending
    keeps the step's status when it is not 0, and is :data:`hpcflow.protocol.EXIT_UNFINISHED`
    when it is: a program that saved on the warning and exited 0 has not finished, and Slurm
    must not call the job COMPLETED (a batch script that exits non-zero makes the job FAILED,
    sbatch(1); ``--dependency=afterok`` then does not fire). A cancel and the time limit keep
    the step's status: Slurm's state is CANCELLED or TIMEOUT whatever it is. ``status`` and
    ``report`` keep hpcflow's finer reason.
    """
    if reason in (P.REASON_COMPLETED, P.REASON_COMPLETED_AFTER_DONE):
        return 0
    if reason in (P.REASON_CANCELLED, P.REASON_TIME_LIMIT):
        return rc  # Slurm's own state already says CANCELLED or TIMEOUT, whatever the status
    return rc if rc != 0 else P.EXIT_UNFINISHED
