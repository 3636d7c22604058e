"""The warning and the deadline as pure functions: what the supervisor does when the warning
comes and when its stop timer is due.

The batch shell's trap of the preemption signal (``--signal=B:USR1@<lead>``, sbatch(1)) only
appends a line to the attempt's signals file and passes the signal on to the supervisor
(``python -m hpcflow.supervisor run``, its child, one per attempt), which keeps the stop timer
itself (docs/architecture.md, "The supervisor"). These rules give the supervisor's answer;
:class:`hpcflow.supervisor.turns.Turns` and :class:`hpcflow.supervisor.attempt.Attempt` carry
it out:

- :func:`deadline`: when the job must be off its nodes, re-read at every warning;
- :func:`on_warning`: write the flag file, and forward the signal to the step or not;
- :func:`stop_timer`: when a program that has not joined is stopped;
- :func:`at_deadline`: at the deadline less ``preemption.requeue_margin_s``, wait for the
  ranks' checkpoint or stop a program that never joined;
- :func:`mirror_budget_s`: how long the S3 mirror may drain before the job ends;
- :func:`slurm_view`: after a step, whether Slurm is cancelling the job, ending it at its time
  limit, or preempting it.

Nothing here reads a file, runs a command or looks at the clock; every rule has a table of
cases in ``tests/unit/supervisor/test_warning_rules.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

from hpcflow import protocol as P
from hpcflow.supervisor.sigcatch import CatchVerdict

__all__ = ["DeadlineAction", "SlurmView", "TimerPlan", "WarningPlan", "at_deadline", "deadline",
           "mirror_budget_s", "not_forwarded", "on_warning", "slurm_view", "stop_timer",
           "wants_catch_check", "warning_cause"]

#: ``program.protocol: requeue`` (spec/job_parts.py): never ask the program to checkpoint.
REQUEUE_ONLY = "requeue"

#: Seconds before the deadline by which the S3 mirror must have drained: the ending ladder
#: (a requeue or the job_end record) still has to run after it.
MIRROR_RESERVE_S = 10


def deadline(current_s: int, *, notice_s: int | None, end_time_s: int | None) -> int:
    """When the job must be off its nodes (Unix seconds): the earliest of the deadline known so
    far, a preemption notice's time, and Slurm's current EndTime (read at the warning: Slurm moves
    it to now + GraceTime on a preemption, preempt.html, so the value read at the attempt's start
    is then wrong)."""
    candidates = [current_s] + [t for t in (notice_s, end_time_s) if t is not None and t > 0]
    return min(candidates)


#: Slurm delivers a ``--signal=...@lead`` signal up to this many seconds off its mark
#: (sbatch(1), ``--signal``).
SIGNAL_JITTER_S = 60


def end_time_moved(end_time_s: int | None, *, deadline_s: int,
                   limit_end_s: int | None = None) -> bool:
    """Whether Slurm moved the job's end before the attempt's deadline as a preemption does
    (EndTime becomes now + GraceTime, the TimeLimit stays: preempt.html, GraceTime): the
    EndTime is more than 5 s before ``deadline_s`` and before the end the job's current
    StartTime + TimeLimit give (``limit_end_s``). A time limit shortened with ``scontrol update
    TimeLimit=`` moves both alike and is not a preemption. Unix seconds throughout."""
    if end_time_s is None or end_time_s >= deadline_s - 5:
        return False
    return limit_end_s is None or end_time_s < limit_end_s - 5


def warning_cause(*, notice: bool, end_time_moved: bool) -> str:
    """What brought a warning, for the requeue budgets (``preemption.max_requeues`` for the
    time limit, ``preemption.max_preemptions`` for a preemption).

    A spot interruption notice (``hpcflow spot-watch``) or Slurm's own preemption (the job's
    EndTime moved before the attempt's deadline: preempt.html, GraceTime) is a preemption.
    Anything else is Slurm's time-limit warning (``--signal=B:SIG@lead``); a signal sent by hand
    (``scancel --signal``) arrives the same way and is counted the same (docs/protocol.md,
    "Where a warning came from").
    """
    return P.CAUSE_PREEMPTION if notice or end_time_moved else P.CAUSE_TIME_LIMIT


@dataclass(frozen=True)
class WarningPlan:
    """What the supervisor does at once on the preemption warning.

    Attributes:
        flag: write the flag file (the ranks that joined checkpoint at their next step).
        forward: send the signal to the step (every rank joined, or every process of the step
            catches it itself).
        log: lines for the job log, in order.
    """

    flag: bool
    forward: bool
    log: tuple[str, ...]


def not_forwarded(signal: str, joined: int, ntasks: int) -> str:
    """The job-log line of a warning that stays in the flag file."""
    return (f"{signal} not forwarded: {joined} of {ntasks} rank(s) joined the protocol; the flag "
            "file stays")


def wants_catch_check(*, protocol: str, joined: int, ntasks: int, step_running: bool) -> bool:
    """Whether the step's processes are read for a handler of the warning signal
    (:mod:`hpcflow.supervisor.sigcatch`): a step runs, not every rank joined hpcflow's protocol,
    and ``program.protocol`` is not ``requeue``."""
    return protocol != REQUEUE_ONLY and step_running and joined < ntasks


def on_warning(*, protocol: str, launcher: str, signal: str, joined: int, ntasks: int,
               step_running: bool, catch: CatchVerdict | None = None) -> WarningPlan:
    """The first answer to the preemption warning: ask the ranks, and forward the signal or not.

    Args:
        protocol: ``program.protocol`` (``"requeue"``: the program is never asked to checkpoint,
            it is stopped at the margin and the job requeued).
        launcher: ``"srun"`` or ``"torchrun"``. hpcflow's torchrun line does not ask torchrun to
            handle the signal, so torchrun dies of it and orphans its workers (DESIGN.md §2): a
            step under it is forwarded the signal only when every process catches it.
        signal: the preemption signal's name (``USR1``).
        joined: ranks whose signal handler is installed (their joined files).
        ntasks: ranks of the step.
        step_running: the srun step has started and has not ended.
        catch: for a step whose ranks have not all joined, whether every process of it catches
            the signal itself (:func:`hpcflow.supervisor.sigcatch.forward_verdict`); None when
            the step was not read.

    srun passes the signal on to every process of the step (srun(1), SIGNALS AND ESCAPE
    SEQUENCES) and a process without a handler dies of it: it is forwarded once every rank has
    joined, or when every process of the step catches it itself (a Lightning script on its
    defaults, submitit, a hand-written handler), as a plain ``sbatch`` would.
    """
    if protocol == REQUEUE_ONLY:
        return WarningPlan(False, False, (f"{signal}: program.protocol is requeue: the program is "
                                          "not asked to checkpoint",))
    if launcher == "srun" and step_running and joined >= ntasks:
        return WarningPlan(True, True, (f"{signal}: every rank joined hpcflow's protocol: asking "
                                        "them to checkpoint and stop",))
    if step_running and catch is not None and catch.forward:
        return WarningPlan(True, True, (
            f"{signal}: {catch.why}: forwarding it to the step, as a plain sbatch would; the "
            "program saves and stops or requeues on its own",))
    if joined:
        log = [f"{signal}: {joined} of {ntasks} rank(s) joined hpcflow's protocol: they "
               "checkpoint at their next step (flag file)"]
    else:
        log = [f"{signal}: no rank has joined hpcflow's protocol; the flag file is written for "
               "ranks that join later"]
    why = f" ({catch.why})" if catch is not None else ""
    log.append(not_forwarded(signal, joined, ntasks) + why)
    if protocol == P.PROTOCOL_HANDLES_SIGNAL and catch is not None:
        log.append(f"program.protocol is handles_signal, but the step does not catch {signal} "
                   "on every process yet: it is asked again until it does")
    return WarningPlan(True, False, tuple(log))


@dataclass(frozen=True)
class TimerPlan:
    """The stop timer after a warning.

    Attributes:
        timer_s: seconds until the timer fires (it is started, or restarted because the deadline
            moved earlier), or None to leave the running timer as it is.
        log: lines for the job log.
    """

    timer_s: int | None
    log: tuple[str, ...]


def stop_timer(*, protocol: str, joined: int, timer_armed: bool, old_deadline_s: int,
               deadline_s: int, now_s: int, margin_s: int, forwarded: bool = False) -> TimerPlan:
    """When a program that has not joined is stopped: ``margin_s`` (``preemption.
    requeue_margin_s``) before the deadline as it is now, so that the job is requeued before
    Slurm kills it. The timer starts at the first warning and restarts only when a later one
    brings the deadline earlier (a notice, or Slurm's preemption moving the EndTime).

    Args:
        protocol, joined: as for :func:`on_warning`.
        timer_armed: the timer of an earlier warning runs.
        old_deadline_s, deadline_s: the deadline known before this warning and now (Unix s;
            :func:`deadline`).
        now_s: the time, Unix seconds.
        margin_s: seconds before the deadline.
        forwarded: the signal went to a program that catches it itself.
    """
    if timer_armed and deadline_s >= old_deadline_s:
        return TimerPlan(None, ())
    delay = max(deadline_s - margin_s - now_s, 0)
    if protocol == REQUEUE_ONLY:
        return TimerPlan(delay, (f"the program is stopped in {delay} s ({margin_s} s before the "
                                 "deadline), then the job is requeued",))
    if joined == 0 and forwarded:
        return TimerPlan(delay, (f"a program still running in {delay} s ({margin_s} s before the "
                                 "deadline) is stopped then, and the job is requeued unless the "
                                 "program requeued it itself",))
    if joined == 0:
        return TimerPlan(delay, (f"no rank has joined the protocol: the program is stopped in "
                                 f"{delay} s ({margin_s} s before the deadline) unless it joins "
                                 "first",))
    return TimerPlan(delay, ())


@dataclass(frozen=True)
class DeadlineAction:
    """What the supervisor does when its stop timer is due (the deadline less
    ``preemption.requeue_margin_s``).

    Attributes:
        action: ``"wait"`` (ranks joined: their checkpoint is coming), ``"stop"`` (TERM to the
            program, KILL after the grace, then the ending ladder: a requeue where
            ``preemption.requeue`` and the budgets allow), or ``"none"`` (no step
            runs).
        log: lines for the job log.
    """

    action: str
    log: tuple[str, ...]


def at_deadline(*, protocol: str, joined: int, step_running: bool) -> DeadlineAction:
    """The answer when the deadline less the margin is reached.

    A program that joined the protocol is trusted to checkpoint and leave (its ranks saw the flag
    file); a program that did not join, or one whose ``program.protocol`` is ``requeue``, is
    stopped so that the job is requeued before Slurm kills it at the deadline.
    """
    if protocol != REQUEUE_ONLY and joined > 0:
        return DeadlineAction("wait", (f"deadline margin reached; {joined} rank(s) joined the "
                                       "protocol: waiting for their checkpoint",))
    if not step_running:
        return DeadlineAction("none", ())
    return DeadlineAction("stop", ("deadline margin reached: stopping the program (it did not "
                                   "join the protocol) to requeue the job",))


def mirror_budget_s(deadline_s: int, now_s: int) -> int:
    """Seconds the S3 mirror may take to drain its last commit: until :data:`MIRROR_RESERVE_S`
    before the deadline, never negative. A mirror still running then is killed, and its copy,
    which has no record, is never used (docs/checkpoints.md)."""
    return max(deadline_s - MIRROR_RESERVE_S - now_s, 0)


@dataclass(frozen=True)
class SlurmView:
    """What Slurm is doing to the job, told after a step (:func:`slurm_view`).

    Attributes:
        cancelled: a cancel (``scancel``) is ending the job.
        time_limit: the time limit is ending the job.
        preempted: Slurm's own preemption: the job still runs, its end time moved to the grace
            time's end.
        requeued: someone other than hpcflow requeued the job while it ran (``scontrol
            requeue`` from a rank, as Lightning and submitit do): Slurm counts a restart more
            than this attempt's.
    """

    cancelled: bool = False
    time_limit: bool = False
    preempted: bool = False
    requeued: bool = False


def slurm_view(state: str, reason: str, end_time_s: int | None, *, terminated: bool,
               deadline_s: int, restarts: int | None = None, restart: int = 0,
               limit_end_s: int | None = None) -> SlurmView:
    """Tell a cancel, the time limit and Slurm's preemption apart.

    Args:
        state, reason, end_time_s: ``scontrol show job``'s JobState, Reason and EndTime (Unix s)
            after the step; ``""``/None when Slurm did not answer.
        terminated: the supervisor itself got TERM. Slurm sends it to every process of the
            batch step only when it ends the job: a cancel or the time limit (the job then reads
            ``COMPLETING``, with ``Reason=TimeLimit`` at the limit; seen with Slurm 22.05), and
            after a requeue, which the supervisor makes last and does not take. Its own
            preemption TERMs the steps alone (preempt.html; seen on the local cluster).
        deadline_s: the attempt's deadline as known at its start (Unix s).
        restarts: ``scontrol show job``'s ``Restarts`` (None when Slurm did not answer).
        restart: this attempt's ``SLURM_RESTART_COUNT``. Slurm counts a requeue at once
            (``Restarts`` one higher, the job ``REQUEUED``/``PENDING``) and TERMs the batch step:
            a requeue the supervisor did not make.
        limit_end_s: StartTime + TimeLimit now (Unix s), None when unknown.

    A preempted job's end time becomes now + GraceTime (preempt.html), so an end time moved
    before the attempt's deadline while the job still runs, and not by a shorter time limit, is
    a preemption (:func:`end_time_moved`).
    """
    if restarts is not None and restarts > restart:
        return SlurmView(requeued=True)
    if state == "TIMEOUT" or (terminated and reason == "TimeLimit"):
        return SlurmView(time_limit=True)
    if state.startswith("CANCELLED") or terminated:
        return SlurmView(cancelled=True)
    return SlurmView(preempted=state == "RUNNING" and end_time_moved(
        end_time_s, deadline_s=deadline_s, limit_end_s=limit_end_s))
