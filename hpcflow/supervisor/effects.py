"""The supervisor's effects on Slurm and on the step: the forwarded warning, the stop of a
program that never joined, and the requeue, the attempt's last act (docs/protocol.md, "Requeue
is the last act").

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

import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hpcflow.command import Runner, evidence, run_command
from hpcflow.supervisor.sigcatch import NodeReport

__all__ = ["RequeueResult", "catch_reports", "forward", "requeue", "step_alive", "stop_program"]


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


def step_alive(pid: int) -> bool:
    """Whether process ``pid`` (the batch script's srun) still runs: it exists and is not a
    zombie that the batch script has yet to reap (proc(5), /proc/<pid>/stat state ``Z``)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2:][:1] != "Z"


def forward(pid: int, signal_name: str) -> bool:
    """Send ``SIG<signal_name>`` to the srun step ``pid``, which passes it on to every task
    (srun(1), SIGNALS AND ESCAPE SEQUENCES). False when the step had already ended."""
    if not step_alive(pid):
        return False
    try:
        os.kill(pid, getattr(signal, f"SIG{signal_name}"))
    except ProcessLookupError:
        return False
    return True


def stop_program(job_id: str, pid: int, grace_s: int, *, runner: Runner = run_command,
                 sleep: Callable[[float], None] = time.sleep) -> str:
    """Stop a program that never joined the protocol: TERM to the job's steps (``scancel
    --signal=TERM`` without ``--batch`` signals the steps, not the batch script, scancel(1)), so
    that it may save; KILL to whatever still runs ``grace_s`` seconds later. Where scancel fails,
    the signal goes to the srun process ``pid`` itself.

    Returns:
        ``"term"`` when the step ended within the grace, ``"kill"`` when it had to be killed.
    """
    _signal_steps(job_id, pid, "TERM", runner)
    for _ in range(grace_s):
        if not step_alive(pid):
            return "term"
        sleep(1.0)
    if not step_alive(pid):
        return "term"
    _signal_steps(job_id, pid, "KILL", runner)
    return "kill"


def _signal_steps(job_id: str, pid: int, name: str, runner: Runner) -> None:
    try:
        ok = runner(["scancel", f"--signal={name}", job_id], timeout_s=30.0).returncode == 0
    except (OSError, Exception):  # noqa: BLE001 - fall back to the srun process
        ok = False
    if not ok:
        try:
            os.kill(pid, getattr(signal, f"SIG{name}"))
        except (ProcessLookupError, PermissionError):
            pass


def catch_reports(argv: Sequence[str], *, runner: Runner = run_command,
                  timeout_s: float = 20.0) -> list[NodeReport]:
    """Run the catch probe step (:func:`hpcflow.supervisor.commands.sigprobe_argv`) and decode
    its one line per node. A probe that cannot run, or that Slurm refuses, gives one report
    that says why (the warning is then not forwarded: the safe path).

    Raises:
        Nothing: every failure becomes a report with ``error`` set.
    """
    try:
        result = runner(list(argv), timeout_s=timeout_s)
    except (OSError, Exception) as exc:  # noqa: BLE001 - reported, never raised
        return [NodeReport("?", error=f"{argv[0]}: {exc}")]
    reports = [r for r in map(NodeReport.decode, (result.stdout or "").splitlines()) if r]
    if result.returncode != 0 or not reports:
        return [NodeReport("?", error=evidence(list(argv), result)[:300])]
    return reports
