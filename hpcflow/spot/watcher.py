"""The spot interruption watcher: one small daemon per node (``hpcflow spot-watch``).

Every ``interval_s`` it asks the instance metadata service (IMDSv2, :mod:`hpcflow.aws.imds`) for
``spot/instance-action``. When EC2 has posted an interruption notice, each hpcflow job running
on this node is sent down the same path as Slurm's own end-of-time warning (docs/protocol.md):

1. the notice file ``<run_dir>/.hpcflow/notice-<job>`` gets the notice's time (Unix seconds), so
   the batch script's trap takes it as the deadline;
2. a ``spot_notice`` event is appended to the job's ledger (for ``hpcflow report``);
3. the job's warning signal (``preemption.signal``) goes to its batch shell:
   ``scancel --signal=USR1 --batch <job>``.

It acts once per notice per job: a job requeued onto the same node while the same notice is
still posted is left alone, also by a watcher started after the notice was handed over (the
job's ledger already holds it). A rebalance recommendation is logged as a warning, once per
recommendation. A network error, a metadata answer it cannot read or a failed Slurm command is
logged and the next poll tries again: the watcher never stops on its own.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

from hpcflow import protocol
from hpcflow.aws.imds import ImdsClient, SpotNotice
from hpcflow.errors import HpcflowError
from hpcflow.jobs import records
from hpcflow.spot.nodejobs import NodeJob, NodeJobs

#: The ledger event the watcher appends (docs/protocol.md, "Ledger").
EVENT = protocol.EVENT_SPOT_NOTICE
#: AWS recommends checking for interruption notices every 5 seconds (EC2 User Guide, "Spot
#: Instance interruption notices").
DEFAULT_INTERVAL_S = 5.0

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


def _hand_to_owner(path: Path, like: Path) -> None:
    """Give ``path`` the owner of ``like`` when running as root, so the job's user (who owns
    the run directory) keeps full control of what the watcher wrote there."""
    if os.geteuid() != 0:
        return
    try:
        st = like.stat()
        os.chown(path, st.st_uid, st.st_gid)
    except OSError:
        pass


class SpotWatcher:
    """Polls IMDS and hands interruption notices to the hpcflow jobs on ``node``.

    Args:
        imds: the metadata client.
        node: this node's Slurm name (``squeue --nodelist``).
        jobs: Slurm's view of the node's jobs.
        only_jobs: act only on these job ids (default: every hpcflow job on the node).
        clock: Unix time in seconds (a seam for tests).
    """

    def __init__(self, imds: ImdsClient, node: str, jobs: NodeJobs | None = None, *,
                 only_jobs: Collection[str] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.imds = imds
        self.node = node
        self.jobs = jobs or NodeJobs()
        self.only_jobs = frozenset(only_jobs) if only_jobs else None
        self._clock = clock
        self._acted: set[tuple[int, str]] = set()  # (notice time, job id): signal sent
        self._noted: set[tuple[int, str]] = set()  # (notice time, job id): file + ledger done
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
        for job_id in job_ids:
            if (result.notice.time_s, job_id) in self._acted or job_id in self._skipped:
                continue
            if self.only_jobs is not None and job_id not in self.only_jobs:
                continue
            try:
                action = self._act(job_id, result.notice)
            except (HpcflowError, OSError) as exc:
                self._error(result, f"job {job_id}: {exc}", exc)
                continue
            if action is not None:
                result.actions.append(action)
        return result

    def _act(self, job_id: str, notice: SpotNotice) -> Action | None:
        job = self.jobs.describe(job_id)
        if job is None:
            self._skipped.add(job_id)
            log.info("job %s on %s is not an hpcflow job: left alone", job_id, self.node)
            return None
        path = protocol.state_dir(job.run_dir) / protocol.notice_name(job.job_id)
        key = (notice.time_s, job.job_id)
        if key not in self._noted and self._in_ledger(job, notice):
            # A watcher that started after this notice was handed over (a restarted service,
            # or the next attempt's own watcher) leaves the job alone.
            self._acted.add(key)
            log.info("job %s already got this notice (its ledger says so): left alone", job.job_id)
            return None
        if key not in self._noted:
            try:
                self._write_notice(job, path, notice)
            except OSError as exc:  # e.g. root squash on a shared filesystem
                log.error("job %s: cannot write the notice file or ledger event under %s (%s); "
                          "sending the signal all the same (its deadline stays the time limit)",
                          job.job_id, job.run_dir, exc.strerror or exc)
            self._noted.add(key)
        self.jobs.warn(job)
        self._acted.add(key)
        log.warning("job %s: spot notice (%s at %s) -> wrote %s, sent %s to its batch shell "
                    "(scancel --signal=%s --batch %s)", job.job_id, notice.action, notice.raw,
                    path, job.signal, job.signal, job.job_id)
        return Action(job.job_id, job.signal, path, notice)

    @staticmethod
    def _in_ledger(job: NodeJob, notice: SpotNotice) -> bool:
        return any(e.get("event") == EVENT and e.get("notice_time") == notice.time_s
                   for e in records.job_events(job.run_dir, job.job_id))

    def _write_notice(self, job: NodeJob, path: Path, notice: SpotNotice) -> None:
        state = protocol.state_dir(job.run_dir)
        records.write_atomic(path, f"{notice.time_s}\n")
        _hand_to_owner(path, state)
        ledger = protocol.ledger_path(job.run_dir)
        existed = ledger.exists()
        records.append_jsonl(ledger, {
            "event": EVENT, "time": int(self._clock()), "job_id": job.job_id,
            "restart": job.restart, "action": notice.action, "notice_time": notice.time_s,
            "node": self.node, "signal": job.signal,
        })
        if not existed:
            _hand_to_owner(ledger, state)

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
