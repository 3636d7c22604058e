"""Rehearse a job's preemption path on the local cluster before paying for GPUs.

Submits the job, and for each of N preemptions waits until the attempt has run for a while,
sends USR1 to the batch shell exactly as Slurm's ``--signal=B:USR1@<lead>`` would
(``scancel --signal=USR1 --batch``; scancel(1)), then waits for the job's own answer:
checkpoint, commit, requeue. Finally it follows the job to its end and reports what happened.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcflow.errors import HpcflowError
from hpcflow.jobs import records, service
from hpcflow.jobs.status import JobStatus
from hpcflow.slurm.client import SlurmClient

Log = Callable[[str], None]


@dataclass
class Rehearsal:
    """The outcome of a rehearsal.

    Attributes:
        job_id: the job rehearsed.
        status: its final status.
        preemptions_sent: how many USR1 warnings were sent.
        requeues: how many times the job requeued itself (from its ledger).
        events: the job's ledger.
    """

    job_id: str
    status: JobStatus
    preemptions_sent: int
    requeues: int
    events: list[dict[str, Any]] = field(default_factory=list)


def _wait(pred: Callable[[], Any], timeout_s: float, what: str, poll_s: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(poll_s)
    raise HpcflowError(f"rehearsal: timed out after {timeout_s:.0f} s waiting for {what}")


def rehearse(spec_path: str | Path, overrides: Sequence[str] = (), *, preemptions: int = 1,
             preempt_after_s: float = 20.0, timeout_s: float = 1800.0,
             client: SlurmClient | None = None, log: Log = lambda _m: None) -> Rehearsal:
    """Submit a job and preempt it ``preemptions`` times, then follow it to its end.

    Args:
        spec_path: the job YAML.
        overrides: ``KEY=VALUE`` overrides, as ``hpcflow submit --set``.
        preemptions: how many preemption warnings to send (one per attempt).
        preempt_after_s: seconds each attempt runs before its warning.
        timeout_s: give up after this many seconds in total.
        client: the Slurm client.
        log: progress sink, one line per call.

    Raises:
        HpcflowError: the job ended or stalled before the rehearsal could finish.
    """
    client = client or SlurmClient()
    result = service.submit(spec_path, overrides, client=client)
    job_id = str(result.job_id)
    run_dir = result.run_dir
    log(f"submitted job {job_id}; log: {result.log_path}")
    deadline = time.monotonic() + timeout_s

    def events() -> list[dict[str, Any]]:
        return records.job_events(run_dir, job_id)

    def left() -> float:
        return max(1.0, deadline - time.monotonic())

    sent = 0
    for attempt in range(preemptions):
        start = _wait(lambda a=attempt: next((e for e in events() if e.get("event") ==
                      "attempt_start" and int(e.get("restart", -1)) == a), None) or _ended(events()),
                      left(), f"attempt {attempt + 1} to start")
        if start.get("event") == "job_end":
            log(f"job ended before preemption {attempt + 1}: rc {start.get('rc')}")
            break
        log(f"attempt {attempt + 1} running on {start.get('nodelist')}; preempting in "
            f"{preempt_after_s:.0f} s")
        time.sleep(preempt_after_s)
        if _ended(events()):
            log("job ended before its preemption warning")
            break
        client.cancel(job_id, signal="USR1", batch_only=True)
        sent += 1
        log(f"sent USR1 to the batch shell of job {job_id} (preemption warning {sent})")
        outcome = _wait(lambda a=attempt: next((e for e in events() if e.get("event") in
                        ("requeue", "job_end") and int(e.get("restart", -1)) == a), None),
                        left(), "the job to checkpoint and requeue")
        if outcome["event"] == "job_end":
            log(f"job did not requeue: {outcome.get('reason')} (rc {outcome.get('rc')})")
            break
        log(f"checkpoint committed at step {outcome.get('step')}; job requeued itself")
    final = _wait(lambda: (s := service.job_status(job_id, client=client)).finished and s,
                  left(), "the job to finish", poll_s=2.0)
    evs = events()
    requeues = sum(1 for e in evs if e.get("event") == "requeue")
    log(f"job {job_id} {final.state} (exit {final.exit_code}) after {final.attempts} attempt(s), "
        f"{requeues} requeue(s)")
    return Rehearsal(job_id, final, sent, requeues, evs)


def _ended(evs: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((e for e in evs if e.get("event") == "job_end"), None)
