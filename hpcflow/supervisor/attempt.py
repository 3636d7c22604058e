"""One attempt of a job, run by the supervisor: the steps' processes and the signals, around the
turns that decide (:mod:`hpcflow.supervisor.turns`).

The batch script starts ``python -m hpcflow.supervisor run`` once per attempt and only waits for
it (docs/architecture.md, "The supervisor"). This module is the edge where the decisions become
processes:

- the step: ``srun <options> [torchrun ...] <program>``, started again after an in-job restart,
  or handed to the warm standby started beside it (``resilience.warm_standby``,
  :mod:`hpcflow.supervisor.standby`);
- beside each step, the hang watchdog (``python -m hpcflow.watchdog``) unless
  ``resilience: false`` or ``resilience.watchdog: false``;
- beside the attempt, the S3 mirror (``checkpoint.s3_uri``) and the spot watcher step
  (``preemption.spot_watch``);
- the warning: the batch shell takes Slurm's ``B:`` signal, appends one line to the attempt's
  signals file and passes the signal on; the line is the truth (it also holds a warning that
  came while this process was starting), the signal only wakes the loop;
- TERM: Slurm sends it to every process of the batch step on a cancel, at the time limit and
  right after a requeue (slurm.conf(5), KillWait). It is noted, never obeyed: the step gets its
  own TERM from Slurm, and the ending ladder still runs and records the end.

Processes inherit this process's stdout and stderr (the job log) and read /dev/null.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hpcflow import fsutil
from hpcflow import protocol as P
from hpcflow.contract import SupervisorSettings
from hpcflow.supervisor import facts
from hpcflow.supervisor.commands import (
    own_cost_line,
    spot_watch_argv,
    step_argv,
    step_env,
    step_status,
    watchdog_argv,
)
from hpcflow.supervisor.standby import Standby
from hpcflow.supervisor.turns import Job, Turns, log

__all__ = ["Attempt", "warning_lines"]

#: Most seconds between two looks at the signals file and the stop timer while the step runs.
#: The loop sleeps in select(2) on the step's pidfd (pidfd_open(2), Linux >= 5.3) and on the
#: signals' wake-up pipe (signal.set_wakeup_fd), so a warning or the step's end wakes it at
#: once; without a pidfd it looks every :data:`POLL_S`.
IDLE_S = 1.0
POLL_S = 0.05


def warning_lines(text: str, signal_name: str) -> int:
    """How many warnings the signals file holds: its whole lines ``<signal_name> <unix s>``.
    A line of another signal, or a last line not yet ended by its newline, does not count."""
    lines = text.split("\n")[:-1]  # the part after the last newline is not a whole line yet
    return sum(1 for line in lines if line.split()[:1] == [signal_name])


class Attempt:
    """Run one attempt: the steps, the watchdog, the mirror and the spot watcher.

    Args:
        job: the attempt's ids, paths and limits.
        deadline_s: when the job must be off its nodes as known at the start (Unix s).
        nnodes: ``SLURM_NNODES`` as the batch script read it ("" when unset), for torchrun.
    """

    def __init__(self, job: Job, *, deadline_s: int, nnodes: str = "") -> None:
        self.job = job
        self.cfg: SupervisorSettings = job.cfg
        self.turns = Turns(job, deadline_s=deadline_s, nnodes=nnodes)
        self.nnodes = nnodes
        self.signal_name = self.cfg.signal
        self.signals_file = job.paths.state / P.signals_name(job.job_id, job.restart)
        self._signals_seen = 0
        self._signals_size = 0
        self._woken = False
        self._term_seen = False
        self._wake_r = -1
        self.step: subprocess.Popen[bytes] | None = None
        self.watchdog: subprocess.Popen[bytes] | None = None
        self.mirror: subprocess.Popen[bytes] | None = None
        self.standby = (Standby(self.cfg, job.paths.state, job_id=job.job_id,
                                restart=job.restart, log=log)
                        if self.cfg.warm_standby else None)
        self._exclude: tuple[str, ...] = ()
        self._step_started = 0.0

    # ---- signals --------------------------------------------------------------------------
    def install_handlers(self) -> None:
        """The warning signal wakes the loop; TERM is noted. Installed before any child starts:
        a child's handled signals are reset to their default action by exec(2)."""
        self._wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        signal.signal(getattr(signal, f"SIG{self.signal_name}"), self._on_warning)
        signal.signal(signal.SIGTERM, self._on_term)

    def _on_warning(self, signum: int, frame: Any) -> None:
        self._woken = True

    def _on_term(self, signum: int, frame: Any) -> None:
        if not self.turns.terminated:
            log("TERM: Slurm is ending the job or this attempt (a cancel, the time limit, or a "
                "requeue the program made); the step ends with it, and hpcflow requeues nothing")
        self.turns.terminated = True

    def new_warnings(self) -> int:
        """Warnings the batch shell took since the last look (its lines in the signals file)."""
        text = facts.read_small(self.signals_file)
        total = warning_lines(text or "", self.signal_name)
        new, self._signals_seen = max(total - self._signals_seen, 0), total
        return new

    # ---- the attempt ------------------------------------------------------------------------
    def run(self) -> int:
        """Run the attempt to its end. Returns the batch script's exit status (0 after a
        requeue)."""
        self._started = time.monotonic()
        self.install_handlers()
        paths = self.job.paths
        for stale in (paths.flag, paths.committed, paths.done):
            stale.unlink(missing_ok=True)
        # What every step of the attempt shares (a warm standby inherits it too).
        os.environ.update(step_env(self.cfg, paths, 0).attempt_variables())
        answer = self.turns.start()
        if not answer.run:
            return answer.status
        hosts = self.job.hosts()
        if self.cfg.launcher == "torchrun" and not hosts:
            log(f"cannot expand the node list '{self.job.nodelist}'")
            return self.turns.end(1)
        log(f"job {self.job.job_id} attempt {self.job.restart} on {self.job.nodelist or '?'}: "
            f"starting {self.job.limits.ntasks} rank(s)")
        self._start_spot_watch()
        self._start_mirror()
        exclude = answer.exclude
        while True:
            rc = self._run_step(exclude, hosts)
            after = self.turns.after_step(rc)
            if not after.restart:
                break
            exclude = after.exclude
        if self.standby is not None:
            self.standby.quit()
        self._finish_mirror(after.mirror_budget_s)
        log(own_cost_line(time.monotonic() - self._started))
        return self.turns.end(rc)

    def _prepare_try(self) -> dict[str, str]:
        """This try's files (a new step's ranks send their own heartbeats and have not joined
        yet) and what the step's environment adds to this process's
        (:meth:`~hpcflow.contract.StepEnv.try_variables`)."""
        paths, try_ = self.job.paths, self.turns.try_
        env = step_env(self.cfg, paths, try_).try_variables()
        if self.standby is not None:  # the next standby waits for this step's own module list
            paths.warm_modules.unlink(missing_ok=True)
        folders = [paths.joined]
        if self.cfg.watchdog is not None:
            folders.append(paths.heartbeat(try_))
        for gone in (paths.errors(try_), paths.exits, *folders):
            shutil.rmtree(gone, ignore_errors=True)
        for folder in folders:
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                log(f"cannot create {folder}: {exc}")
        return env

    def _run_step(self, exclude: Sequence[str], hosts: Sequence[str]) -> int:
        """Start one step and wait for it, taking warnings and the stop timer as they come.
        Returns its status (``128 + N`` after signal N)."""
        added = self._prepare_try()
        self._exclude = tuple(exclude)
        self._step_started = time.monotonic()
        self.step = self.standby.take(added, exclude) if self.standby is not None else None
        if self.step is None:
            argv = step_argv(self.cfg, job_id=self.job.job_id, exclude=exclude,
                             rdzv_host=hosts[0] if hosts else "", nnodes=self.nnodes)
            try:
                self.step = subprocess.Popen(argv, env={**os.environ, **added},
                                             stdin=subprocess.DEVNULL)
            except OSError as exc:
                log(f"could not start the step ({argv[0]}): {exc}")
                return 127
        self._start_watchdog()
        try:
            return step_status(self._wait(self.step))
        finally:
            self._stop(self.watchdog)
            self.watchdog = None

    def _wait(self, proc: subprocess.Popen[bytes]) -> int:
        """Wait for ``proc``, serving warnings and the stop timer meanwhile."""
        try:
            pidfd: int | None = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            pidfd = None
        try:
            while (rc := proc.poll()) is None:
                self._service()
                if pidfd is None:
                    time.sleep(POLL_S)
                    continue
                timer_at = self.turns.timer_at
                idle = IDLE_S if timer_at is None else min(IDLE_S, max(timer_at - time.time(), 0))
                ready, _, _ = select.select([pidfd, self._wake_r], [], [], idle)
                if self._wake_r in ready:
                    self._drain_wakeups()
            return rc
        finally:
            if pidfd is not None:
                os.close(pidfd)

    def _drain_wakeups(self) -> None:
        try:
            while os.read(self._wake_r, 512):
                pass
        except BlockingIOError:
            pass

    def _service(self) -> None:
        """Between two looks at the step: new warnings, then the stop timer."""
        try:
            size = self.signals_file.stat().st_size
        except OSError:
            size = 0
        if self._woken or size != self._signals_size:
            self._woken, self._signals_size = False, size
            for _ in range(self.new_warnings()):
                self.turns.warning(self.signal_name, self.step.pid if self.step else 0)
        if self.turns.terminated and not self._term_seen:
            self._term_seen = True
            self.turns.on_term()
        self.turns.recheck_held(self.signal_name, self.step.pid if self.step else 0)
        timer_at = self.turns.timer_at
        if timer_at is not None and time.time() >= timer_at:
            self.turns.deadline(self.step.pid if self.step else 0)
        # No new standby once the job is being stopped (a warning, Slurm's TERM), nor when no
        # in-job restart is left to hand it.
        if (self.standby is not None and not self.turns.state.warnings
                and not self.turns.terminated
                and self.turns.try_ < self.cfg.max_in_job_restarts):
            self.standby.maybe_start(elapsed_s=time.monotonic() - self._step_started,
                                     exclude=self._exclude)

    # ---- the processes beside the step -------------------------------------------------------
    def _python(self) -> str:
        return self.cfg.hpcflow_python

    def _popen(self, argv: list[str]) -> subprocess.Popen[bytes] | None:
        try:
            return subprocess.Popen(argv, stdin=subprocess.DEVNULL)
        except OSError as exc:
            log(f"could not start {' '.join(argv[:3])}: {exc}")
            return None

    @staticmethod
    def _stop(proc: subprocess.Popen[bytes] | None) -> None:
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def _start_watchdog(self) -> None:
        argv = watchdog_argv(self.cfg, self.job.paths, self.turns.try_)
        if argv:
            self.watchdog = self._popen(argv)

    def _start_spot_watch(self) -> None:
        argv = spot_watch_argv(self.cfg, self.job.job_id)
        if argv:
            self._popen(argv)

    def _mirror_args(self) -> list[str]:
        job = self.job
        return ["--checkpoint-dir", str(job.paths.checkpoint_dir),
                "--s3-uri", self.cfg.mirror.s3_uri if self.cfg.mirror else "",
                "--ledger", str(job.paths.ledger),
                "--job-id", job.job_id, "--restart", str(job.restart)]

    @property
    def _mirror_stop(self) -> Path:
        return self.job.paths.state / f"mirror-stop-{P.attempt_suffix(self.job.job_id, self.job.restart)}"

    def _start_mirror(self) -> None:
        """Two-phase checkpoints (docs/checkpoints.md; only with ``checkpoint.s3_uri``): an
        empty checkpoint folder first gets the newest complete S3 mirror; then a mirror process
        beside the program copies each newly committed checkpoint to S3."""
        mirror = self.cfg.mirror
        if mirror is None:
            return
        pull = [self._python(), "-m", "hpcflow.mirror", "pull", *self._mirror_args()]
        try:
            ok = subprocess.run(pull, stdin=subprocess.DEVNULL, check=False).returncode == 0
        except OSError:
            ok = False
        if not ok:
            log(f"could not pull from {mirror.s3_uri}: the program starts without that "
                "checkpoint")
        self._mirror_stop.unlink(missing_ok=True)
        self.mirror = self._popen([self._python(), "-m", "hpcflow.mirror", "watch",
                                   *self._mirror_args(), "--keep", str(mirror.keep),
                                   "--stop-file", str(self._mirror_stop),
                                   "--parent-pid", str(os.getpid())])

    def _finish_mirror(self, budget_s: int) -> None:
        """After the steps: the stop file asks the mirror to copy the newest commit (the
        preemption checkpoint) and exit (a file, not a signal: it also works while the mirror
        is starting up); past ``budget_s`` it is killed, and its unfinished copy, which has no
        S3 record, is never used."""
        proc = self.mirror
        if proc is None:
            return
        try:
            fsutil.write_atomic(self._mirror_stop, "")
        except OSError:
            proc.terminate()
        log(f"waiting at most {budget_s} s for the S3 mirror")
        try:
            proc.wait(timeout=budget_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            log("the S3 mirror did not finish before the deadline: stopped; its copy is never "
                "used")
            self.job.event(P.EVENT_MIRROR_ABANDONED)
        self._mirror_stop.unlink(missing_ok=True)
