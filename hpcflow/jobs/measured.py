"""The costs a job measured, as ``hpcflow plan`` reads them: save, restart and start-up times,
the node count and the failures per node-hour. Pure, over a built
:class:`~hpcflow.jobs.report.GoodputReport`; ``report --json`` carries it as ``measured``.

Definitions (seconds):
    save_s: the mean blocking time of a committed save (``save_s`` of the ``hpcflow-checkpoint``
        lines: the whole of a synchronous save, the staging part of an asynchronous one).
    startup_s: the first attempt's time that is neither training nor checkpointing, over the
        program starts it had (in-job restarts start the program again); teardown included.
    restart_s: the rest of the start-up time of every attempt plus the queue time of every
        requeue, over the restarts (requeues and in-job restarts): what one restart costs,
        whatever caused it.
    failures: the report's failures of an unwarned kind (a warned preemption, a cancel, a hold
        or a requeue limit is not a failure of the hardware or the program).
    failures_per_node_hour: ``failures`` over the node-hours held (nodes x (wall - pending)).
A figure is None when the job did not measure it (no save, no restart, no node list).
"""

from __future__ import annotations

from typing import Any

from hpcflow import ending_kinds as K
from hpcflow import protocol as P
from hpcflow.jobs.report import GoodputReport

#: Endings that are not failures: they come with a warning, from the user, or from a limit.
NOT_FAILURES = (K.ENDING_COMPLETED, K.ENDING_PREEMPTED, K.ENDING_PREEMPTED_SPOT,
                K.ENDING_CANCELLED, K.ENDING_HELD, K.ENDING_REQUEUE_LIMIT,
                K.ENDING_NOT_REQUEUED)


def measured_costs(report: GoodputReport) -> dict[str, Any]:
    """The figures above as a JSON-ready mapping (see the module docstring)."""
    saves = [s for a in report.attempts for s in a.save_times]
    nodes = _nodes(report)
    out: dict[str, Any] = {
        "save_s": sum(saves) / len(saves) if saves else None, "saves": len(saves),
        "startup_s": None, "restart_s": None, "restarts": 0, "nodes": nodes,
        "node_hours": None, "failures": 0, "failures_per_node_hour": None,
    }
    if not report.attempts:
        return out
    first = report.attempts[0]
    startup = first.startup_s / max(1, len(first.segments))
    restarts = len(report.attempts) - 1 + sum(max(0, len(a.segments) - 1)
                                              for a in report.attempts)
    restart_total = (report.totals["pending"] - first.pending_s + report.totals["startup"]
                     - startup)
    failures = sum(1 for f in report.failures if f.kind not in NOT_FAILURES)
    out.update(startup_s=startup, restarts=restarts, failures=failures,
               restart_s=restart_total / restarts if restarts else None)
    held_h = (report.wall_s - report.totals["pending"]) / 3600.0
    if nodes and held_h > 0:
        out["node_hours"] = nodes * held_h
        out["failures_per_node_hour"] = failures / (nodes * held_h)
    return out


def _nodes(report: GoodputReport) -> int | None:
    """Nodes of the first attempt, from its ``attempt_start`` node list."""
    from hpcflow.hostlist import expand_hostlist

    for att in report.attempts:
        for ev in att.events:
            if ev.get("event") == P.EVENT_ATTEMPT_START and ev.get("nodelist"):
                try:
                    return len(expand_hostlist(str(ev["nodelist"])))
                except ValueError:
                    return None
    return None


def job_measured_costs(job_id: str) -> dict[str, Any]:
    """:func:`measured_costs` of a job submitted with hpcflow, read from its run directory,
    with ``notes``: the report's figures that cannot be right (goodput over 100%,
    :attr:`~hpcflow.jobs.report.GoodputReport.notes`), which cast doubt on the costs too.

    Raises:
        SlurmQueryError: no hpcflow record of the job (:func:`hpcflow.jobs.report_load.load_report`).
    """
    from hpcflow.jobs.report_load import load_report

    report, _ = load_report(job_id)
    return {**measured_costs(report), "notes": list(report.notes)}
