"""The supervisor's effects on Slurm: the requeue, the attempt's last act (docs/protocol.md,
"Requeue is the last act").

``scontrol requeue`` of the running job makes Slurm end this attempt: slurmstepd sends TERM to
every process of the batch step, then KILL ``KillWait`` seconds later (slurm.conf(5), KillWait;
the job log shows "CANCELLED ... DUE TO JOB REQUEUE"). Whatever the batch script would do after
the requeue races that TERM. So the requeue is the last thing an attempt does, with one
exception that must come after it: the requeued job's ``ExcNodeList``, which Slurm changes only
while the job is pending (scontrol(1), update: "Job is no longer pending execution" otherwise),
and the job is pending from the requeue on (until its batch step is gone it cannot start, so the
update cannot miss). That one command runs with TERM ignored (SIG_IGN is inherited across
exec(2), so scontrol ignores it too), inside the KillWait window: deterministic, not a race.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence
from dataclasses import dataclass

from hpcflow.command import Runner, evidence, run_command

__all__ = ["RequeueResult", "requeue"]


@dataclass(frozen=True)
class RequeueResult:
    """What the requeue did.

    Attributes:
        ok: Slurm accepted the requeue.
        error: evidence of a failed ``scontrol requeue`` (exit status, command, stderr tail).
        excluded: the ExcNodeList update was accepted (always True without nodes to exclude).
        exclude_error: evidence of a failed update.
    """

    ok: bool
    error: str = ""
    excluded: bool = True
    exclude_error: str = ""


def requeue(requeue_id: str, exclude: Sequence[str] = (), *,
            runner: Runner = run_command, timeout_s: float = 30.0) -> RequeueResult:
    """Requeue the job ``requeue_id`` (``<arrayjob>_<task>`` for an array element: ``scontrol
    requeue <jobid>`` hits a whole array, scontrol(1)) and then exclude ``exclude`` from it.

    TERM is ignored from here on in this process (and so in the commands it starts): the caller
    must have written everything the job needs, the ledger's ``requeue`` event included, before.

    Raises:
        Nothing: a missing scontrol or a timeout is reported in the result.
    """
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    argv = ["scontrol", "requeue", requeue_id]
    try:
        result = runner(argv, timeout_s=timeout_s)
    except (OSError, Exception) as exc:  # noqa: BLE001 - reported, never raised
        return RequeueResult(False, f"{' '.join(argv)}: {exc}")
    if result.returncode != 0:
        return RequeueResult(False, evidence(argv, result))
    if not exclude:
        return RequeueResult(True)
    argv = ["scontrol", "update", f"JobId={requeue_id}", f"ExcNodeList={','.join(exclude)}"]
    try:
        update = runner(argv, timeout_s=timeout_s)
    except (OSError, Exception) as exc:  # noqa: BLE001
        return RequeueResult(True, excluded=False, exclude_error=f"{' '.join(argv)}: {exc}")
    if update.returncode != 0:
        return RequeueResult(True, excluded=False, exclude_error=evidence(argv, update))
    return RequeueResult(True)
