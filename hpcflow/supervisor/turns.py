"""The supervisor's turns: at each moment of an attempt, gather the facts, apply a rule, record
it in the ledger and say what to do (docs/architecture.md, "The supervisor").

- :meth:`Turns.start`: before the first step (the version check, the failure bound, the nodes
  earlier attempts excluded);
- :meth:`Turns.warning`: the preemption warning (the flag file, the forward once every rank
  joined, the deadline re-read, the stop timer);
- :meth:`Turns.deadline`: the stop timer fired (wait for the joined ranks' checkpoint, or stop
  a program that never joined);
- :meth:`Turns.after_step`: a step ended (``step_end``, the restart rules);
- :meth:`Turns.end`: the ending ladder (requeue, or ``job_end``).

The rules themselves are pure (:mod:`~hpcflow.supervisor.rules`, :mod:`~hpcflow.supervisor.
warning`); the facts come from :mod:`~hpcflow.supervisor.facts`; the effects on Slurm and the
step from :mod:`~hpcflow.supervisor.effects`. :mod:`~hpcflow.supervisor.attempt` runs the turns
around the step's processes. Log lines go to stderr (the job log).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any

from hpcflow import fsutil
from hpcflow import protocol as P
from hpcflow.supervisor import budgets, effects, endings, facts, rules, sigcatch, warning
from hpcflow.supervisor.commands import sigprobe_argv
from hpcflow.supervisor.job import Job

__all__ = ["CATCH_RECHECK_S", "Job", "StartAnswer", "StepEnd", "Turns", "log"]

#: Seconds between two reads of a held warning's step: a program installs its handler some
#: time after it starts (Lightning: at ``Trainer.fit``), and the warning then goes to it.
CATCH_RECHECK_S = 10.0


def log(message: str) -> None:
    """One line in the job log, in the batch script's ``hpcflow:`` format."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    print(f"hpcflow: {stamp} {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class StartAnswer:
    """Whether the attempt runs (:meth:`Turns.start`).

    Attributes:
        run: start the first step; False: end with ``status``.
        status: the batch script's exit status when not run.
        exclude: hosts the steps avoid (``srun --exclude``).
    """

    run: bool
    status: int = 0
    exclude: tuple[str, ...] = ()


@dataclass(frozen=True)
class StepEnd:
    """What follows a step (:meth:`Turns.after_step`).

    Attributes:
        restart: start the step again in this allocation (``try_`` one higher).
        exclude: hosts the next step avoids.
        mirror_budget_s: seconds the S3 mirror may drain before the ending.
    """

    restart: bool
    exclude: tuple[str, ...] = ()
    mirror_budget_s: int = 0


@dataclass
class _State:
    """What the turns of one attempt remember between them."""

    try_: int = 0
    prev_error: str = ""
    excluded: list[str] = field(default_factory=list)
    outcome: rules.StepOutcome | None = None
    slurm: warning.SlurmView = field(default_factory=warning.SlurmView)
    warnings: int = 0
    stopped_unaware: bool = False
    #: The warning went to a program that had not joined and catches it itself.
    forwarded: bool = False
    #: A warning waits for the program to catch it (asked again every CATCH_RECHECK_S).
    held: bool = False
    held_checked_at: float = 0.0
    #: What brought the warnings (rules.requeue_budget): a preemption once any was one.
    cause: str = P.CAUSE_TIME_LIMIT
    #: The program's own requeue is in the ledger already (:meth:`Turns.on_term`).
    requeue_recorded: bool = False


class Turns:
    """The decisions of one attempt, in the order the attempt takes them.

    Args:
        job: the attempt.
        deadline_s: when the job must be off its nodes as known at the start (Unix s:
            ``SLURM_JOB_END_TIME``, or the attempt's start plus the time limit).
        now: the clock (Unix seconds; tests pass their own).
        nnodes: ``SLURM_NNODES`` (the catch probe runs on every node of the allocation).
    """

    def __init__(self, job: Job, *, deadline_s: int, now: Any = time.time,
                 nnodes: str = "") -> None:
        self.job = job
        self.nnodes = nnodes
        self.attempt_deadline_s = deadline_s
        self.deadline_s = deadline_s
        self._now = now
        self.state = _State()
        #: Unix time at which the stop timer fires, or None.
        self.timer_at: float | None = None
        #: The supervisor got TERM: Slurm is ending the job (a cancel or the time limit).
        self.terminated = False

    @property
    def try_(self) -> int:
        """The in-job try of the current step (0 for the first)."""
        return self.state.try_

    # ---- start ---------------------------------------------------------------------------
    def start(self) -> StartAnswer:
        """Before the first step: ``attempt_start``; a job rendered for another protocol
        version, or past its failure bound, ends at once."""
        job = self.job
        lim = job.limits
        job.event(P.EVENT_ATTEMPT_START, nodelist=job.nodelist, budgets={
            "max_requeues": lim.max_requeues, "max_preemptions": lim.max_preemptions,
            "max_failures": lim.max_failures, "resilience": lim.resilience})
        if not self.version_ok():
            return StartAnswer(False, 1)
        if not job.paths.version.exists():
            try:
                fsutil.write_atomic(job.paths.version, f"{P.PROTOCOL_VERSION}\n")
            except OSError as exc:
                log(f"could not record the protocol version in {job.paths.version}: {exc}")
        history = job.history()
        verdict = endings.attempt_start(history, job.limits, job.hosts())
        for line in verdict.log:
            log(line)
        if not verdict.start:
            job.event(P.EVENT_JOB_END, rc=1, reason=verdict.reason)
            return StartAnswer(False, 1)
        if verdict.ignored:
            job.event(P.EVENT_EXCLUSION_IGNORED, nodes=",".join(verdict.ignored),
                      nodelist=job.nodelist)
        self.state.excluded = list(history.excluded)
        return StartAnswer(True, exclude=verdict.srun_exclude)

    def version_ok(self) -> bool:
        """The batch script speaks this hpcflow's protocol version; else ``job_end``
        ``version_skew`` is recorded with a message that says what to do."""
        version = self.job.cfg.protocol_version
        if version == P.PROTOCOL_VERSION:
            return True
        log(f"this job's batch script speaks hpcflow protocol version {version}, but the hpcflow "
            f"installed now speaks version {P.PROTOCOL_VERSION} (the environment was upgraded "
            "while the job was queued): not starting. Submit the job again with `hpcflow submit` "
            "(same run_dir): it resumes from the latest committed checkpoint")
        self.job.event(P.EVENT_JOB_END, rc=1, reason=P.REASON_VERSION_SKEW)
        return False

    # ---- the warning and the stop timer -------------------------------------------------------
    def warning(self, signal_name: str, step_pid: int) -> None:
        """The preemption warning: the flag file and the forward first (to ranks that joined,
        or to a program whose every process catches the signal itself), then the deadline as
        it is now (a notice's, or the job's current EndTime: Slurm moves it on a preemption),
        the warning's cause and the stop timer (:attr:`timer_at`).

        Args:
            signal_name: ``USR1`` or ``USR2``.
            step_pid: srun's pid, 0 when no step runs.
        """
        job, state = self.job, self.state
        state.warnings += 1
        joined = job.joined()
        now = int(self._now())
        running = effects.step_alive(step_pid)
        verdict = None
        if warning.wants_catch_check(
                protocol=job.protocol, joined=joined, ntasks=job.limits.ntasks,
                step_running=running):
            verdict = self._catch_check()
        plan = warning.on_warning(protocol=job.protocol, launcher=job.cfg.launcher,
                                  signal=signal_name, joined=joined, ntasks=job.limits.ntasks,
                                  step_running=running, catch=verdict)
        if plan.flag:
            try:
                fsutil.write_atomic(job.paths.flag, f"{now}\n")
            except OSError as exc:
                log(f"could not write the flag file {job.paths.flag}: {exc}")
        forwarded = plan.forward and effects.forward(step_pid, signal_name)
        for line in plan.log:
            log(line)
        if plan.forward and not forwarded:
            log("the step had already ended")
            log(warning.not_forwarded(signal_name, joined, job.limits.ntasks))
        if verdict is not None:
            state.forwarded = state.forwarded or forwarded
            state.held = not forwarded and running
            state.held_checked_at = time.monotonic()
        notice: int | None = None
        text = facts.read_small(job.paths.notice)
        if text is not None:
            job.paths.notice.unlink(missing_ok=True)
            notice = int(text.strip()) if text.strip().isdigit() else None
        slurm = facts.slurm_job(job.job_id)
        end_time_s = slurm.end_time_s
        new = warning.deadline(self.deadline_s, notice_s=notice, end_time_s=end_time_s)
        if warning.warning_cause(
                notice=text is not None,
                end_time_moved=warning.end_time_moved(
                    end_time_s, deadline_s=self.attempt_deadline_s,
                    limit_end_s=slurm.limit_end_s)) == P.CAUSE_PREEMPTION:
            state.cause = P.CAUSE_PREEMPTION
        timer = warning.stop_timer(protocol=job.protocol, joined=joined,
                                   timer_armed=self.timer_at is not None,
                                   old_deadline_s=self.deadline_s, deadline_s=new, now_s=now,
                                   margin_s=job.cfg.requeue_margin_s,
                                   forwarded=state.forwarded)
        if not self.terminated:  # after Slurm's TERM (the program's own requeue) no stop comes
            for line in timer.log:
                log(line)
        self.deadline_s = new
        if timer.timer_s is not None:
            self.timer_at = now + timer.timer_s
        extra = {} if verdict is None else {"catch": self._catch_fields(verdict, forwarded)}
        job.event(P.EVENT_SIGNAL, signal=signal_name, joined=joined, forwarded=forwarded,
                  deadline=new, source=P.SOURCE_WARNING, cause=state.cause, **extra)

    def _catch_check(self) -> sigcatch.CatchVerdict:
        """Read the running step's processes on every node (:mod:`hpcflow.supervisor.sigprobe`)."""
        job = self.job
        reports = effects.catch_reports(sigprobe_argv(job.cfg, job_id=job.job_id, try_=self.try_,
                                                      nnodes=self.nnodes))
        return sigcatch.forward_verdict(reports, tasks=job.tasks, signal=job.cfg.signal)

    @staticmethod
    def _catch_fields(verdict: sigcatch.CatchVerdict, forwarded: bool) -> dict[str, Any]:
        return {"forwarded": forwarded, "ranks": verdict.ranks_found, "why": verdict.why,
                "not_catching": [{"node": n, "pid": pid, "comm": comm}
                                 for n, pid, comm in verdict.not_catching[:sigcatch.MAX_NAMED]]}

    def recheck_held(self, signal_name: str, step_pid: int) -> None:
        """A held warning (the program did not catch the signal when it came): read the step
        again every :data:`CATCH_RECHECK_S`, and forward the signal once every process of it
        catches it (a program installs its handler some time after it starts)."""
        state, job = self.state, self.job
        if not state.held or time.monotonic() - state.held_checked_at < CATCH_RECHECK_S:
            return
        state.held_checked_at = time.monotonic()
        if not effects.step_alive(step_pid) or job.joined() >= job.limits.ntasks:
            state.held = False
            return
        verdict = self._catch_check()
        if not verdict.forward:
            return
        state.held = False
        state.forwarded = effects.forward(step_pid, signal_name)
        if state.forwarded:
            log(f"{signal_name}: {verdict.why} now: forwarding the held warning to the step, as "
                "a plain sbatch would")
        self.job.event(P.EVENT_CATCH_CHECK, **self._catch_fields(verdict, state.forwarded))

    def deadline(self, step_pid: int) -> None:
        """The stop timer fired: wait for the joined ranks' checkpoint, or stop the program
        (TERM to the steps, KILL after the grace; the ending then requeues the job)."""
        self.timer_at = None
        action = warning.at_deadline(protocol=self.job.protocol, joined=self.job.joined(),
                                     step_running=effects.step_alive(step_pid))
        for line in action.log:
            log(line)
        if action.action == "stop":
            self.state.held = False
            self.job.event(P.EVENT_STOP, signal="TERM")
            self.state.stopped_unaware = True
            effects.stop_program(self.job.job_id, step_pid, self.job.cfg.term_grace_s)

    # ---- after each step, and the end -----------------------------------------------------------
    def _slurm_view(self) -> tuple[warning.SlurmView, int | None]:
        """What Slurm is doing to the job (:func:`hpcflow.supervisor.warning.slurm_view`), and
        its end time as it is now."""
        slurm = facts.slurm_job(self.job.job_id)
        view = warning.slurm_view(slurm.state, slurm.reason, slurm.end_time_s,
                                terminated=self.terminated, deadline_s=self.attempt_deadline_s,
                                restarts=slurm.restarts, restart=self.job.restart,
                                limit_end_s=slurm.limit_end_s)
        if view.requeued and not self.state.forwarded:
            # Requeued, not by a program hpcflow gave the warning to (an admin's scontrol
            # requeue, Slurm's after a node failure): Slurm is ending this attempt, as a cancel.
            view = warning.SlurmView(cancelled=True)
        return view, slurm.end_time_s

    def _step_facts(self, rc: int) -> rules.StepFacts:
        paths, n, slurm = self.job.paths, self.job.limits.ntasks, self.state.slurm
        return rules.StepFacts(
            rc=rc, exits=facts.rank_exits(paths.exits, n), joined=facts.ranks_joined(paths.joined, n),
            warnings=self.state.warnings + (1 if slurm.preempted else 0),
            slurm_preempted=slurm.preempted, cancelled=slurm.cancelled,
            time_limit=slurm.time_limit, stopped_unaware=self.state.stopped_unaware,
            handled_warning=self.state.forwarded, requeued_by_program=slurm.requeued,
            cause=P.CAUSE_PREEMPTION if slurm.preempted else self.state.cause,
            flag=paths.flag.exists(), committed_step=facts.committed_step(paths.committed),
            done=paths.done.exists(), error_sigs=facts.error_sigs(paths.errors(self.try_)),
            hang=(paths.heartbeat(self.try_) / P.HANG_MARKER).is_file(),
            latest_checkpoint=facts.latest_checkpoint(paths.checkpoint_dir))

    def after_step(self, rc: int) -> StepEnd:
        """A step ended with status ``rc``: ``step_end``, then restart it in the allocation or
        go to the ending."""
        job, state = self.job, self.state
        self.timer_at = None
        state.slurm, end_time_s = self._slurm_view()
        if state.slurm.preempted:
            log("Slurm preempted the job (its end time moved to the grace time's end): the "
                "program's own stop or checkpoint counts, and the job is requeued")
            job.event(P.EVENT_SIGNAL, signal="TERM", joined=0, forwarded=False,
                      deadline=end_time_s, source=P.SOURCE_SLURM_PREEMPT)
        step = self._step_facts(rc)
        fields, first = rules.rank_summary(step)
        if job.limits.resilience:
            fields["node"] = rules.blame_node(step)
        job.event(P.EVENT_STEP_END, rc=step.rc, **fields)
        log(f"the step ended with status {step.rc}" + (f"; {first}" if first else ""))
        outcome = rules.after_failed_step(
            step, job.history(), job.limits, try_=self.try_, prev_error=state.prev_error,
            hosts=job.hosts(), excluded=state.excluded,
            errors_path=f"{P.STATE_DIR}/{P.errors_name(job.job_id, job.restart, self.try_)}")
        for name, ev in outcome.events:
            job.event(name, **ev)
        for line in outcome.log:
            log(line)
        state.excluded = list(outcome.excluded)
        state.outcome = outcome
        state.prev_error = " ".join(step.error_sigs) or state.prev_error
        if outcome.restart:
            state.try_ += 1
            return StepEnd(True, exclude=outcome.srun_exclude)
        return StepEnd(False, mirror_budget_s=warning.mirror_budget_s(self.deadline_s,
                                                                     int(self._now())))

    def on_term(self) -> None:
        """Slurm's TERM came (:attr:`terminated`). When it is a requeue the program made
        itself (after the warning hpcflow gave it), record that requeue at once: the batch step
        is killed ``KillWait`` seconds later (slurm.conf(5)), maybe before the step ends and the
        ending would record it."""
        state, job = self.state, self.job
        if not state.forwarded or state.requeue_recorded:
            return
        view, _ = self._slurm_view()
        if not view.requeued:
            return
        state.slurm = view
        action = endings.ending(self._step_facts(0), job.history(), job.limits,
                              requeue_id=job.requeue_id)
        if action.already_requeued:
            for line in action.log:
                log(line)
            job.event(P.EVENT_REQUEUE, **action.requeue_fields)
            state.requeue_recorded = True

    def end(self, rc: int) -> int:
        """The ending ladder (:func:`hpcflow.supervisor.endings.ending`): record ``requeue`` and
        requeue (the attempt's last act), or record ``job_end``. Returns the batch script's
        exit status."""
        job = self.job
        if self.state.requeue_recorded:
            return 0  # the program requeued the job: decided and recorded at Slurm's TERM
        action = endings.ending(self._step_facts(rc), job.history(), job.limits,
                              outcome=self.state.outcome, requeue_id=job.requeue_id)
        for line in action.log:
            log(line)
        if action.already_requeued:
            job.event(P.EVENT_REQUEUE, **action.requeue_fields)
            return 0
        if action.requeue:
            job.event(P.EVENT_REQUEUE, **action.requeue_fields)
            result = effects.requeue(job.requeue_id, action.exclude)
            if result.ok:
                if not result.excluded:
                    log(f"could not exclude {','.join(action.exclude)} from the requeued job; it "
                        f"may run on them again: {result.exclude_error}")
                return 0
            log(f"scontrol requeue {job.requeue_id} failed (does the job have --requeue?) "
                f"{result.error}")
        rc = budgets.exit_status(action.reason, action.rc)
        job.event(P.EVENT_JOB_END, rc=rc, reason=action.reason)
        log(f"job ends: {action.reason} (status {rc})")
        return rc

    def end_early(self, rc: int, reason: str) -> int:
        """End the attempt before any step ran (``job_end`` with ``reason``)."""
        self.job.event(P.EVENT_JOB_END, rc=rc, reason=reason)
        return rc
