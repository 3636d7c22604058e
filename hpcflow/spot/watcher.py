"""The spot interruption watcher: one small daemon per node (``hpcflow spot-watch``).

Every ``interval_s`` it asks the instance metadata service (IMDSv2, :mod:`hpcflow.aws.imds`) for
``spot/instance-action``. When EC2 has posted an interruption notice, each hpcflow job running
on this node is sent down the same path as Slurm's own end-of-time warning (docs/protocol.md):

1. the notice file ``<run_dir>/.hpcflow/notice-<job>`` gets the notice's time (Unix seconds), so
   the job's supervisor takes it as the deadline at the warning;
2. the job's warning signal (``preemption.signal``) goes to its batch shell:
   ``scancel --signal=USR1 --batch <job>``;
3. once every job is signalled, a ``spot_notice`` event is appended to each job's ledger (for
   ``hpcflow report``).

The watcher runs as root on a node, and a run directory is its user's: steps 1 and 3, and the
ledger read that finds a notice already handed over, run in child processes started as the
job's owner, all jobs at once, within ``job_bound_s`` (:mod:`hpcflow.spot.jobfiles`). Only
Slurm's commands run as root. A job whose files cannot be written, or whose step timed out, is
signalled all the same.

It acts once per notice per job: a job requeued onto the same node while the same notice is
still posted is left alone, also by a watcher started after the notice was handed over (the
job's ledger already holds it). A rebalance recommendation is logged as a warning, once per
recommendation. A network error, a metadata answer it cannot read or a failed Slurm command is
logged and the next poll tries again: the watcher never stops on its own.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

from hpcflow import ledger, protocol
from hpcflow.aws.imds import ImdsClient, SpotNotice
from hpcflow.errors import HpcflowError
from hpcflow.spot import jobfiles
from hpcflow.spot.nodejobs import NodeJob, NodeJobs

#: The ledger event the watcher appends (docs/protocol.md, "Ledger").
EVENT = protocol.EVENT_SPOT_NOTICE
#: AWS recommends checking for interruption notices every 5 seconds (EC2 User Guide, "Spot
#: Instance interruption notices").
DEFAULT_INTERVAL_S = 5.0
#: Seconds the file steps of one poll may take in all (each job's notice file or ledger line,
#: done by a child process as the job's owner, all jobs at once): a hung or hostile run
#: directory delays the other jobs' signals by at most this.
DEFAULT_JOB_BOUND_S = 5.0

log = logging.getLogger("hpcflow.spot")


@dataclass
class Action:
    """What the watcher did for one job on one notice.

    Attributes:
        job_id: the job.
        signal: the signal sent to its batch shell.
        notice_file: the notice file written.
        notice: the notice acted on.
    """

    job_id: str
    signal: str
    notice_file: Path
    notice: SpotNotice


@dataclass
class PollResult:
    """One poll: the notice seen (or None), the rebalance time seen (or None), the actions
    taken, the errors logged, and the exit code of each error's class (7: the metadata service
    could not be asked; 4: a Slurm command failed)."""

    notice: SpotNotice | None = None
    rebalance: str | None = None
    actions: list[Action] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    error_codes: list[int] = field(default_factory=list)


class SpotWatcher:
    """Polls IMDS and hands interruption notices to the hpcflow jobs on ``node``.

    Args:
        imds: the metadata client.
        node: this node's Slurm name (``squeue --nodelist``).
        jobs: Slurm's view of the node's jobs.
        only_jobs: act only on these job ids (default: every hpcflow job on the node).
        clock: Unix time in seconds (a seam for tests).
        job_bound_s: seconds the file steps of one poll may take (:data:`DEFAULT_JOB_BOUND_S`).
    """

    def __init__(self, imds: ImdsClient, node: str, jobs: NodeJobs | None = None, *,
                 only_jobs: Collection[str] | None = None,
                 clock: Callable[[], float] = time.time,
                 job_bound_s: float = DEFAULT_JOB_BOUND_S) -> None:
        self.imds = imds
        self.node = node
        self.jobs = jobs or NodeJobs()
        self.only_jobs = frozenset(only_jobs) if only_jobs else None
        self._clock = clock
        self.job_bound_s = job_bound_s
        self._acted: set[tuple[int, str]] = set()  # (notice time, job id): signal sent
        self._prepared: set[tuple[int, str]] = set()  # (notice time, job id): notice file done
        self._skipped: set[str] = set()  # jobs that are not hpcflow's
        self._rebalance_seen: str | None = None
        self._notice_seen: SpotNotice | None = None

    def poll_once(self) -> PollResult:
        """Ask IMDS once and act on what it says. Never raises for a network, metadata or
        Slurm failure: each is logged and listed in the result's ``errors``."""
        result = PollResult()
        try:
            result.rebalance = self.imds.rebalance()
        except HpcflowError as exc:
            self._error(result, f"rebalance recommendation: {exc}", exc)
        if result.rebalance is not None and result.rebalance != self._rebalance_seen:
            self._rebalance_seen = result.rebalance
            log.warning("EC2 rebalance recommendation (noticeTime %s): this spot instance is at "
                        "elevated risk of interruption; nothing is done until a notice comes",
                        result.rebalance)
        try:
            result.notice = self.imds.instance_action()
        except HpcflowError as exc:
            self._error(result, f"interruption notice: {exc}", exc)
            return result
        if result.notice is None:
            return result
        if result.notice != self._notice_seen:
            self._notice_seen = result.notice
            log.warning("EC2 spot interruption notice: %s at %s (in %.0f s)", result.notice.action,
                        result.notice.raw, result.notice.time_s - self._clock())
        try:
            job_ids = self.jobs.running(self.node)
        except HpcflowError as exc:
            self._error(result, f"listing the jobs on {self.node}: {exc}", exc)
            return result
        jobs: list[NodeJob] = []
        for job_id in job_ids:
            if (result.notice.time_s, job_id) in self._acted or job_id in self._skipped:
                continue
            if self.only_jobs is not None and job_id not in self.only_jobs:
                continue
            try:
                job = self.jobs.describe(job_id)
            except HpcflowError as exc:
                self._error(result, f"job {job_id}: {exc}", exc)
                continue
            if job is None:
                self._skipped.add(job_id)
                log.info("job %s on %s is not an hpcflow job: left alone", job_id, self.node)
                continue
            jobs.append(job)
        if jobs:
            self._hand_over(jobs, result.notice, result)
        return result

    def _hand_over(self, jobs: list[NodeJob], notice: SpotNotice, result: PollResult) -> None:
        """Notice files (each job's deadline, read by its supervisor at the warning), then
        every signal, then the ledger records. The file steps run as each job's owner, all jobs
        at once, within ``job_bound_s`` (hpcflow.spot.jobfiles); a job whose step failed or
        timed out is signalled all the same."""
        fresh = [j for j in jobs if (notice.time_s, j.job_id) not in self._prepared]
        prepared = self._in_run_dirs(fresh, jobfiles.PREPARE, notice)
        signalled: list[NodeJob] = []
        for job in jobs:
            key = (notice.time_s, job.job_id)
            outcome = prepared.get(job.job_id)
            if outcome is not None:
                self._prepared.add(key)
                if outcome.already:
                    # A watcher that started after this notice was handed over (a restarted
                    # service, or the next attempt's own watcher) leaves the job alone.
                    self._acted.add(key)
                    log.info("job %s already got this notice (its ledger says so): left alone",
                             job.job_id)
                    continue
                if not outcome.ok:
                    log.error("job %s: cannot write the notice file under %s (%s); sending the "
                              "signal all the same (its deadline stays the time limit)",
                              job.job_id, job.run_dir, outcome.error)
            try:
                self.jobs.warn(job)
            except HpcflowError as exc:
                self._error(result, f"job {job.job_id}: {exc}", exc)
                continue
            self._acted.add(key)
            path = protocol.state_dir(job.run_dir) / protocol.notice_name(job.job_id)
            wrote = f"wrote {path}" if outcome is None or outcome.ok else "no notice file"
            log.warning("job %s: spot notice (%s at %s) -> %s, sent %s to its batch shell "
                        "(scancel --signal=%s --batch %s)", job.job_id, notice.action, notice.raw,
                        wrote, job.signal, job.signal, job.job_id)
            result.actions.append(Action(job.job_id, job.signal, path, notice))
            signalled.append(job)
        for job_id, outcome in self._in_run_dirs(signalled, jobfiles.RECORD, notice).items():
            if not outcome.ok:
                log.error("job %s: cannot append the %s event to its ledger (%s)", job_id, EVENT,
                          outcome.error)

    def _in_run_dirs(self, jobs: list[NodeJob], op: str,
                     notice: SpotNotice) -> dict[str, jobfiles.Outcome]:
        """Run ``op`` in each job's state folder as the job's owner; a job whose owner Slurm
        did not name gets an error outcome and its folder is left alone."""
        outcomes: dict[str, jobfiles.Outcome] = {}
        requests: list[jobfiles.Request] = []
        for job in jobs:
            if job.uid is None or job.gid is None:
                outcomes[job.job_id] = jobfiles.Outcome(
                    False, error=f"{job.owner_error or 'Slurm names no owner'}: run directory "
                                 "left alone")
                continue
            event = None
            if op == jobfiles.RECORD:
                event = ledger.event_line(EVENT, job_id=job.job_id, restart=job.restart,
                                          time_s=int(self._clock()), action=notice.action,
                                          notice_time=notice.time_s, node=self.node,
                                          signal=job.signal)
            requests.append(jobfiles.Request(op, job.run_dir, job.uid, job.gid, job.job_id,
                                             notice.time_s, event))
        if requests:
            done = jobfiles.run_as_owners(requests, bound_s=self.job_bound_s)
            outcomes.update({r.job_id: o for r, o in zip(requests, done, strict=True)})
        return outcomes

    def _error(self, result: PollResult, message: str, exc: Exception) -> None:
        result.errors.append(message)
        result.error_codes.append(getattr(exc, "exit_code", 1))
        log.error("%s (polling again)", message)

    def run(self, interval_s: float = DEFAULT_INTERVAL_S,
            stop: threading.Event | None = None) -> None:
        """Poll every ``interval_s`` seconds until ``stop`` is set (never, without one)."""
        stop = stop or threading.Event()
        log.info("watching %s%s every %g s for jobs on node %s", self.imds.endpoint,
                 "/latest/meta-data/spot/instance-action", interval_s, self.node)
        while not stop.is_set():
            started = time.monotonic()
            try:
                self.poll_once()
            except Exception:  # noqa: BLE001 - a daemon that stops misses the next notice
                log.exception("unexpected error in a poll (polling again)")
            stop.wait(max(0.0, interval_s - (time.monotonic() - started)))
