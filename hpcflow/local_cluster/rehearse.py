"""Rehearse a job's preemption path on the local cluster before paying for GPUs.

Submits the job, and for each of N preemptions waits until the attempt has run for a while,
leaves a preemption notice (the nodes go away ``notice_s`` from now, as an EC2 spot interruption
notice says two minutes ahead) and sends the spec's warning signal (``preemption.signal``, USR1 by
default) to the batch shell exactly as Slurm's ``--signal=B:USR1@<lead>`` would
(``scancel --signal=USR1 --batch``; scancel(1)), then waits for
the job's own answer: checkpoint, commit, requeue; or, for a program that does not join the
protocol, stop and requeue shortly before the notice's deadline. Finally it follows the job to
its end and reports what happened.

With ``by="slurm"`` the preemption is Slurm's own instead: the job runs in the local cluster's
``preemptible`` partition, and a job of the ``urgent`` partition that wants its nodes is
submitted (``PreemptType=preempt/partition_prio``, ``PreemptMode=REQUEUE``; slurm.conf(5),
Slurm's preempt.html). Slurm sends TERM to the job's steps, moves its end time to now +
``GraceTime``, and the job must checkpoint (or the program save) and requeue within it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcflow import protocol
from hpcflow.errors import HpcflowError
from hpcflow.jobs import records, service
from hpcflow.jobs.status import JobStatus
from hpcflow.local_cluster.config import PREEMPTIBLE, URGENT
from hpcflow.slurm.client import SlurmClient

Log = Callable[[str], None]


@dataclass
class Rehearsal:
    """The outcome of a rehearsal.

    Attributes:
        job_id: the job rehearsed.
        status: its final status.
        preemptions_sent: how many warnings (the spec's signal) were sent.
        requeues: how many times the job requeued itself (from its ledger).
        events: the job's ledger.
    """

    job_id: str
    status: JobStatus
    preemptions_sent: int
    requeues: int
    events: list[dict[str, Any]] = field(default_factory=list)


#: The events that end an attempt.
_ENDS = (protocol.EVENT_REQUEUE, protocol.EVENT_JOB_END)


def _wait(pred: Callable[[], Any], timeout_s: float, what: str, poll_s: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(poll_s)
    raise HpcflowError(f"rehearsal: timed out after {timeout_s:.0f} s waiting for {what}")


#: An EC2 spot interruption notice comes two minutes before the instance is reclaimed (EC2 user
#: guide, "Spot Instance interruption notices").
SPOT_NOTICE_S = 120.0
#: Seconds ranks that joined the protocol may take to report their first training step
#: (imports, rendezvous, loading a checkpoint) before they are preempted anyway.
STARTUP_ALLOWANCE_S = 120.0
#: How a rehearsal preempts: the warning signal as ``--signal=B:`` sends it, or Slurm's own
#: preemption by a job of a higher partition tier.
PREEMPT_BY = ("signal", "slurm")


def rehearse(spec_path: str | Path, overrides: Sequence[str] = (), *, preemptions: int = 1,
             preempt_after_s: float = 20.0, notice_s: float = SPOT_NOTICE_S,
             timeout_s: float = 1800.0, by: str = "signal",
             client: SlurmClient | None = None, log: Log = lambda _m: None) -> Rehearsal:
    """Submit a job and preempt it ``preemptions`` times, then follow it to its end.

    Args:
        spec_path: the job YAML.
        overrides: ``KEY=VALUE`` overrides, as ``hpcflow submit --set``.
        preemptions: how many preemption warnings to send (one per attempt).
        preempt_after_s: seconds each attempt trains before its warning: counted from its
            first ``hpcflow-step`` line, or from the attempt's start for a program that prints
            none.
        notice_s: the warning says the nodes go away this many seconds later; a program that
            does not join the protocol is stopped and requeued ``requeue_margin_s`` before then.
        timeout_s: give up after this many seconds in total.
        by: ``"signal"`` (the warning signal and a notice) or ``"slurm"`` (Slurm's own
            preemption: the job runs in the ``preemptible`` partition, whatever the spec says,
            and an ``urgent`` job takes its nodes; ``notice_s`` is not used).
        client: the Slurm client.
        log: progress sink, one line per call.

    Raises:
        HpcflowError: ``by`` is not one of :data:`PREEMPT_BY`, or the job ended or stalled
            before the rehearsal could finish.
    """
    from hpcflow.spec.job import load_job_spec

    if by not in PREEMPT_BY:
        raise HpcflowError(f"rehearse: by is {by!r}; allowed: {', '.join(PREEMPT_BY)}")
    if by == "slurm":
        overrides = (*overrides, f"partition={PREEMPTIBLE}")
    client = client or SlurmClient()
    warning = load_job_spec(spec_path, overrides).preemption.signal  # what Slurm would send
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
        watcher = _QueueWatcher(job_id, client, log)
        start = _wait(lambda a=attempt, w=watcher: next((e for e in events() if e.get("event") ==
                      protocol.EVENT_ATTEMPT_START and int(e.get("restart", -1)) == a), None)
                      or _ended(events()) or w.tick(), left(), f"attempt {attempt + 1} to start")
        if start.get("event") == protocol.EVENT_JOB_END:
            log(f"job ended before preemption {attempt + 1}: rc {start.get('rc')}")
            break
        # Count the time from the attempt's first training step when the program reports
        # steps (`hpcflow-step` lines); start-up (imports, rendezvous) is not training. Ranks
        # that joined the protocol are given up to STARTUP_ALLOWANCE_S for their first step; a
        # program none of whose ranks joined is preempted preempt_after_s after it began.
        offset = _log_size(result.log_path)
        joined_dir = protocol.state_dir(run_dir) / protocol.joined_name(job_id, attempt)
        log(f"attempt {attempt + 1} started on {start.get('nodelist')}; waiting for its first "
            "training step")
        began = time.monotonic()
        stepped = joined = False
        while (time.monotonic() < began + min(left(), STARTUP_ALLOWANCE_S)
               and not _ended(events())):
            if _first_line_after(result.log_path, offset, protocol.TAG_STEP + " "):
                stepped = True
                break
            joined = _any_file(joined_dir)
            if time.monotonic() >= began + preempt_after_s and not joined:
                break
            time.sleep(0.5)
        resumed = _first_line_after(result.log_path, offset, protocol.TAG_RESUME + " ")
        where = f"resumed from step {_step_of(resumed)}" if resumed else "started from scratch"
        if stepped:
            log(f"attempt {attempt + 1} is training ({where}); preempting in {preempt_after_s:.0f} s")
            time.sleep(preempt_after_s)
        elif joined:
            log(f"attempt {attempt + 1}: its ranks joined the protocol but report no training "
                f"steps (no {protocol.TAG_STEP} lines) after {STARTUP_ALLOWANCE_S:.0f} s: "
                "preempting it now")
        else:
            log(f"attempt {attempt + 1} reports no training steps (no {protocol.TAG_STEP} lines) "
                f"and no rank joined the protocol after {preempt_after_s:.0f} s: preempting it now")
        if _ended(events()):
            log("job ended before its preemption warning")
            break
        if by == "slurm":
            nodes = str(start.get("nodelist") or "")
            urgent = client.submit_wrap("sleep 1", [
                "--partition", URGENT, "--exclusive", "--time", "1:00", "--output", "/dev/null",
                "--job-name", "hpcflow-rehearse-preemptor", *(["--nodelist", nodes] if nodes else [])])
            sent += 1
            log(f"asked Slurm to preempt job {job_id}: urgent job {urgent} wants its nodes "
                f"{nodes or '?'} (preemption {sent}; the job has the {PREEMPTIBLE} partition's "
                "GraceTime to checkpoint and requeue)")
        else:
            _leave_notice(run_dir, job_id, notice_s)
            client.warn_batch(job_id, warning)
            sent += 1
            log(f"sent {warning} to the batch shell of job {job_id} (preemption warning {sent}; "
                f"the nodes go away in {notice_s:.0f} s)")
        gone = _GoneWatcher(job_id, client)
        outcome = _wait(lambda a=attempt, g=gone: next((e for e in events() if e.get("event") in
                        _ENDS and int(e.get("restart", -1)) == a), None)
                        or g.tick(), left(), "the job to checkpoint and requeue")
        if outcome["event"] == "gone":
            log(f"job {job_id} ended without an end record ({outcome['state']}): the batch "
                "shell was killed; see its log")
            break
        if outcome["event"] == protocol.EVENT_JOB_END:
            log(f"job did not requeue: {outcome.get('reason')} (rc {outcome.get('rc')})")
            break
        if outcome.get("checkpoint") is False and by == "slurm":
            log("the program did not join the protocol: it had Slurm's TERM and the GraceTime to "
                "save its own checkpoint; the job requeued without an hpcflow checkpoint")
        elif outcome.get("checkpoint") is False:
            log("the program did not join the protocol: it was stopped before the deadline and "
                "the job requeued without an hpcflow checkpoint")
        else:
            log(f"checkpoint committed at step {outcome.get('step')}; job requeued itself")
    watcher = _QueueWatcher(job_id, client, log)
    final = _wait(lambda: ((s := service.job_status(job_id, client=client)).finished and s)
                  or watcher.tick(), left(), "the job to finish", poll_s=2.0)
    evs = events()
    requeues = sum(1 for e in evs if e.get("event") == protocol.EVENT_REQUEUE)
    resumes = _all_steps(result.log_path, protocol.TAG_RESUME + " ")
    if resumes:
        log(f"attempts resumed from step {', '.join(map(str, resumes))} (the committed checkpoints)")
    log(f"job {job_id} {final.state} (exit {final.exit_code}) after {final.attempts} attempt(s), "
        f"{requeues} requeue(s)")
    return Rehearsal(job_id, final, sent, requeues, evs)


def _leave_notice(run_dir: Path, job_id: str, notice_s: float) -> None:
    """Write the preemption notice the supervisor reads at the warning: the Unix time the
    nodes go away."""
    path = protocol.state_dir(run_dir) / protocol.notice_name(job_id)
    try:
        path.write_text(f"{int(time.time() + notice_s)}\n")
    except OSError as exc:
        raise HpcflowError(f"rehearsal: cannot write the preemption notice {path}: "
                           f"{exc.strerror or exc}") from exc


def _ended(evs: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((e for e in evs if e.get("event") == protocol.EVENT_JOB_END), None)


def _log_size(path: Path | None) -> int:
    try:
        return path.stat().st_size if path else 0
    except OSError:
        return 0


def _first_line_after(path: Path | None, offset: int, prefix: str) -> str | None:
    """The first log line starting with ``prefix`` written after byte ``offset``."""
    if path is None:
        return None
    try:
        with path.open("rb") as fh:
            fh.seek(offset)
            text = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    return next((ln for ln in text.splitlines() if ln.startswith(prefix)), None)


def _step_of(line: str) -> object:
    try:
        return json.loads(line.split(" ", 1)[1]).get("step", "?")
    except (IndexError, ValueError, AttributeError):
        return "?"


def _all_steps(path: Path | None, prefix: str) -> list[object]:
    """The ``step`` of every log line that starts with ``prefix``."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace") if path else ""
    except OSError:
        return []
    return [_step_of(ln) for ln in text.splitlines() if ln.startswith(prefix)]


def _any_file(folder: Path) -> bool:
    try:
        return any(folder.iterdir())
    except OSError:
        return False


class _StatusPoll:
    """The job's status from Slurm, asked at most every ``every_s`` seconds (the first time
    ``first_s`` seconds after it is made); ``None`` when not due or when Slurm did not answer."""

    def __init__(self, job_id: str, client: SlurmClient, first_s: float, every_s: float) -> None:
        self.job_id, self.client, self.every_s = job_id, client, every_s
        self.next_check = time.monotonic() + first_s

    def poll(self) -> JobStatus | None:
        if time.monotonic() < self.next_check:
            return None
        self.next_check = time.monotonic() + self.every_s
        try:
            return service.job_status(self.job_id, client=self.client)
        except HpcflowError:
            return None


class _GoneWatcher(_StatusPoll):
    """Says (at most every 5 s) whether Slurm reports the job finished although its ledger has
    no end record: the batch shell was killed (for example by a signal it does not trap)."""

    def __init__(self, job_id: str, client: SlurmClient) -> None:
        super().__init__(job_id, client, first_s=5.0, every_s=5.0)

    def tick(self) -> dict[str, Any] | None:
        st = self.poll()
        return {"event": "gone", "state": st.state} if st is not None and st.finished else None


class _QueueWatcher(_StatusPoll):
    """Reports a pending job's state and reason when they change (at most every 10 s), so a
    rehearsal never sits silent while the job waits for nodes or for its requeue delay."""

    def __init__(self, job_id: str, client: SlurmClient, log: Log) -> None:
        super().__init__(job_id, client, first_s=3.0, every_s=10.0)
        self.log = log
        self.last: tuple[str, str] | None = None

    def tick(self) -> None:
        st = self.poll()
        if st is None:
            return None
        now = (st.state, st.reason)
        if now != self.last and st.state in ("PENDING", "REQUEUED", "CONFIGURING"):
            self.log(f"job {self.job_id} is {st.state}" + (f" ({st.reason})" if st.reason else ""))
        self.last = now
        return None
