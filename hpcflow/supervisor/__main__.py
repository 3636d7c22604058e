"""``python -m hpcflow.supervisor COMMAND``: what the batch script asks at each turn of a job.

The batch script keeps only what must be shell (the trap, ``srun ... & wait``, the timer); at
each turn it hands the facts over and does what the answer on stdout says (docs/architecture.md,
"The supervisor"):

- ``start``: before the first step of an attempt. Prints ``run <exclude> <rdzv host> <rdzv
  port>`` (the first host and :func:`hpcflow.protocol.port_for_job_number`, for torchrun) or
  ``exit <status>``.
- ``warning``: from the trap of the preemption signal. Writes the flag file, forwards the
  signal to the step once every rank has joined, records the ``signal`` event; prints
  ``<deadline> <timer>``: the deadline as it is now, and the seconds until the stop timer
  fires (``keep``: leave the running one).
- ``deadline``: from the stop timer's ALRM. Prints ``wait`` (ranks joined: their checkpoint
  comes), ``none`` (no step runs) or ``stopped``: the program was stopped (``stop`` event,
  TERM to the steps, KILL after the grace).
- ``after-step``: after each step. Records ``step_end`` (and the restart rules' events);
  prints ``restart <try> <exclude>`` or ``end <seconds the S3 mirror may drain>``.
- ``end``: the ending ladder: records ``requeue`` and requeues, or records ``job_end``; prints
  ``exit <status>``.
- ``event NAME [KEY=VALUE ...]``: one ledger event (``mirror_abandoned``).

``<exclude>`` is a comma-separated host list for ``srun --exclude``, or ``-``. Any other answer
(nothing, when this process crashed) makes the batch script end the job with
``supervisor_error``. Log lines go to stderr (the job log).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from hpcflow import fsutil, ledger
from hpcflow import protocol as P
from hpcflow.hostlist import expand_hostlist
from hpcflow.supervisor import effects, facts, rules, warning


def log(message: str) -> None:
    """One line in the job log, in the batch script's ``hpcflow:`` format."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    print(f"hpcflow: {stamp} {message}", file=sys.stderr, flush=True)


class Job:
    """One attempt of one job: its ids, paths, limits and the supervisor's state file."""

    def __init__(self, args: argparse.Namespace) -> None:
        cfg = json.loads(args.config)
        self.cfg = cfg
        self.job_id: str = args.job_id
        self.requeue_id: str = args.requeue_id or args.job_id
        self.restart: int = args.restart
        self.nodelist: str = args.nodelist
        self.paths = facts.Paths(Path(os.environ[P.ENV_RUN_DIR]),
                                 Path(os.environ[P.ENV_CHECKPOINT_DIR]), self.job_id, self.restart)
        self.limits = rules.Limits(
            ntasks=cfg["ntasks"], step_nodes=cfg["step_nodes"], max_requeues=cfg["max_requeues"],
            requeue_allowed=cfg["requeue_allowed"], resilience=cfg["resilience"],
            max_in_job_restarts=cfg.get("max_in_job_restarts", 0),
            max_failures=cfg.get("max_failures", 0), exclude_after=cfg.get("exclude_after", 0))

    def hosts(self) -> list[str]:
        try:
            return expand_hostlist(self.nodelist)
        except ValueError:
            return []

    def event(self, name: str, **fields: Any) -> None:
        ledger.append_event(self.paths.ledger, name, job_id=self.requeue_id,
                            restart=self.restart, **fields)

    def history(self) -> rules.History:
        events = ledger.read_events(self.paths.ledger, job_id=self.requeue_id)
        return rules.History.from_events(events, self.restart)

    def state(self) -> dict[str, Any]:
        text = facts.read_small(self.paths.supervisor_state)
        try:
            return json.loads(text) if text else {}
        except ValueError:
            return {}

    def save(self, state: dict[str, Any]) -> None:
        fsutil.write_json_atomic(self.paths.supervisor_state, state)

    def step_facts(self, args: argparse.Namespace, try_: int, slurm: dict[str, bool]) -> rules.StepFacts:
        n = self.limits.ntasks
        hang = (self.paths.heartbeat(try_) / P.HANG_MARKER).is_file()
        return rules.StepFacts(
            rc=args.rc, exits=facts.rank_exits(self.paths.exits, n),
            joined=facts.ranks_joined(self.paths.joined, n),
            warnings=args.warnings + (1 if slurm.get("slurm_preempted") else 0),
            slurm_preempted=slurm.get("slurm_preempted", False),
            cancelled=slurm.get("cancelled", False), stopped_unaware=bool(args.stopped),
            flag=self.paths.flag.exists(), committed_step=facts.committed_step(self.paths.committed),
            done=self.paths.done.exists(), error_sigs=facts.error_sigs(self.paths.errors(try_)),
            hang=hang, latest_checkpoint=facts.latest_checkpoint(self.paths.checkpoint_dir))


def cmd_start(job: Job, args: argparse.Namespace) -> str:
    job.event(P.EVENT_ATTEMPT_START, nodelist=job.nodelist)
    version = job.cfg.get("protocol_version")
    if version != P.PROTOCOL_VERSION:
        log(f"this job's batch script speaks hpcflow protocol version {version}, but the hpcflow "
            f"installed now speaks version {P.PROTOCOL_VERSION} (the environment was upgraded "
            "while the job was queued): not starting. Submit the job again with `hpcflow submit` "
            "(same run_dir): it resumes from the latest committed checkpoint")
        job.event(P.EVENT_JOB_END, rc=1, reason=P.REASON_VERSION_SKEW)
        return "exit 1"
    if not job.paths.version.exists():
        try:
            fsutil.write_atomic(job.paths.version, f"{P.PROTOCOL_VERSION}\n")
        except OSError as exc:
            log(f"could not record the protocol version in {job.paths.version}: {exc}")
    verdict = rules.attempt_start(job.history(), job.limits, job.hosts())
    for line in verdict.log:
        log(line)
    if not verdict.start:
        job.event(P.EVENT_JOB_END, rc=1, reason=verdict.reason)
        return "exit 1"
    if verdict.ignored:
        job.event(P.EVENT_EXCLUSION_IGNORED, nodes=",".join(verdict.ignored),
                  nodelist=job.nodelist)
    job.save({"try": 0, "prev_error": "", "excluded": list(job.history().excluded),
              "srun_exclude": list(verdict.srun_exclude)})
    hosts = job.hosts()
    rdzv = f"{hosts[0] if hosts else '-'} {P.port_for_job_number(int(job.job_id))}"
    return f"run {','.join(verdict.srun_exclude) or '-'} {rdzv}"


def _joined(job: Job) -> int:
    return sum(node is not None for node in facts.ranks_joined(job.paths.joined,
                                                               job.limits.ntasks))


def cmd_warning(job: Job, args: argparse.Namespace) -> str:
    """The preemption warning: the flag file and the forward first, then the deadline as it is
    now (a notice's, or the job's current EndTime: Slurm moves it on a preemption) and the stop
    timer. Prints ``<deadline> <timer: seconds|keep>``."""
    protocol = job.cfg.get("program_protocol", "auto")
    joined = _joined(job)
    now = int(time.time())
    plan = warning.on_warning(protocol=protocol, launcher=job.cfg.get("launcher", "srun"),
                              signal=args.signal, joined=joined, ntasks=job.limits.ntasks,
                              step_running=effects.step_alive(args.step_pid))
    if plan.flag:
        try:
            fsutil.write_atomic(job.paths.flag, f"{now}\n")
        except OSError as exc:
            log(f"could not write the flag file {job.paths.flag}: {exc}")
    forwarded = plan.forward and effects.forward(args.step_pid, args.signal)
    for line in plan.log:
        log(line)
    if plan.forward and not forwarded:
        log("the step had already ended")
        log(warning.not_forwarded(args.signal, joined, job.limits.ntasks))
    notice: int | None = None
    text = facts.read_small(job.paths.notice)
    if text is not None:
        job.paths.notice.unlink(missing_ok=True)
        notice = int(text.strip()) if text.strip().isdigit() else None
    new = warning.deadline(args.deadline, notice_s=notice,
                           end_time_s=facts.slurm_job(job.job_id).end_time_s)
    timer = warning.stop_timer(protocol=protocol, joined=joined,
                               timer_armed=args.timer == "armed", old_deadline_s=args.deadline,
                               deadline_s=new, now_s=now,
                               margin_s=int(job.cfg.get("requeue_margin_s", 0)))
    for line in timer.log:
        log(line)
    job.event(P.EVENT_SIGNAL, signal=args.signal, joined=joined, forwarded=forwarded,
              deadline=new, source=P.SOURCE_WARNING)
    return f"{new} {'keep' if timer.timer_s is None else timer.timer_s}"


def cmd_deadline(job: Job, args: argparse.Namespace) -> str:
    """The stop timer fired: wait for the joined ranks' checkpoint, or stop the program."""
    action = warning.at_deadline(protocol=job.cfg.get("program_protocol", "auto"),
                                 joined=_joined(job),
                                 step_running=effects.step_alive(args.step_pid))
    for line in action.log:
        log(line)
    if action.action == "stop":
        job.event(P.EVENT_STOP, signal="TERM")
        effects.stop_program(job.job_id, args.step_pid, int(job.cfg.get("term_grace_s", 10)))
        return "stopped"
    return action.action


def _slurm_view(job: Job, deadline_s: int) -> dict[str, bool]:
    """Cancelled, or preempted by Slurm: the job's EndTime moved before the attempt's deadline
    (preempt.html: a preempted job's end time becomes now + GraceTime) while it still runs."""
    slurm = facts.slurm_job(job.job_id)
    cancelled = slurm.state.startswith("CANCELLED")
    preempted = (slurm.state == "RUNNING" and slurm.end_time_s is not None
                 and slurm.end_time_s < deadline_s - 5)
    return {"cancelled": cancelled, "slurm_preempted": preempted}


def cmd_after_step(job: Job, args: argparse.Namespace) -> str:
    state = job.state()
    try_ = int(state.get("try", 0))
    slurm = _slurm_view(job, args.deadline)
    if slurm["slurm_preempted"]:
        log("Slurm preempted the job (its end time moved to the grace time's end): the "
            "program's own stop or checkpoint counts, and the job is requeued")
        job.event(P.EVENT_SIGNAL, signal="TERM", joined=0, forwarded=False,
                  deadline=args.deadline, source=P.SOURCE_SLURM_PREEMPT)
    step = job.step_facts(args, try_, slurm)
    fields, first = rules.rank_summary(step)
    if job.limits.resilience:
        fields["node"] = rules.blame_node(step)
    job.event(P.EVENT_STEP_END, rc=step.rc, **fields)
    log(f"the step ended with status {step.rc}" + (f"; first failure: {first}" if first else ""))
    outcome = rules.after_failed_step(
        step, job.history(), job.limits, try_=try_, prev_error=state.get("prev_error", ""),
        hosts=job.hosts(), excluded=state.get("excluded", []),
        errors_path=f"{P.STATE_DIR}/{P.errors_name(job.job_id, job.restart, try_)}")
    for name, ev in outcome.events:
        job.event(name, **ev)
    for line in outcome.log:
        log(line)
    sigs = " ".join(step.error_sigs)
    state.update(excluded=list(outcome.excluded), srun_exclude=list(outcome.srun_exclude),
                 outcome=asdict(outcome), slurm=slurm,
                 prev_error=sigs or state.get("prev_error", ""))
    if outcome.restart:
        state["try"] = try_ + 1
        job.save(state)
        return f"restart {try_ + 1} {','.join(outcome.srun_exclude) or '-'}"
    job.save(state)
    current = args.current_deadline or args.deadline
    return f"end {warning.mirror_budget_s(current, int(time.time()))}"


def cmd_end(job: Job, args: argparse.Namespace) -> str:
    state = job.state()
    try_ = int(state.get("try", 0))
    out = state.get("outcome") or {}
    outcome = rules.StepOutcome(
        restart=False, fail_reason=out.get("fail_reason"),
        exclusion_requeue=bool(out.get("exclusion_requeue")),
        excluded=tuple(out.get("excluded", ())))
    step = job.step_facts(args, try_, state.get("slurm") or {})
    action = rules.ending(step, job.history(), job.limits, outcome=outcome,
                          requeue_id=job.requeue_id)
    for line in action.log:
        log(line)
    if action.requeue:
        job.event(P.EVENT_REQUEUE, **action.requeue_fields)
        result = effects.requeue(job.requeue_id, action.exclude)
        if result.ok:
            if not result.excluded:
                log(f"could not exclude {','.join(action.exclude)} from the requeued job; it may "
                    f"run on them again: {result.exclude_error}")
            return "exit 0"
        log(f"scontrol requeue {job.requeue_id} failed (does the job have --requeue?) "
            f"{result.error}")
    job.event(P.EVENT_JOB_END, rc=action.rc, reason=action.reason)
    log(f"job ends: {action.reason} (status {action.rc})")
    return f"exit {action.rc}"


def cmd_event(job: Job, args: argparse.Namespace) -> str:
    fields: dict[str, Any] = {}
    for item in args.fields:
        key, _, value = item.partition("=")
        fields[key] = int(value) if value.isdigit() else value
    job.event(args.name, **fields)
    return "ok"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m hpcflow.supervisor", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    def common(name: str) -> argparse.ArgumentParser:
        c = sub.add_parser(name)
        c.add_argument("--config", required=True, help="the job's limits as JSON (rendered)")
        c.add_argument("--job-id", required=True)
        c.add_argument("--requeue-id", default="")
        c.add_argument("--restart", type=int, default=0)
        c.add_argument("--nodelist", default="")
        return c

    common("start")
    w = common("warning")
    w.add_argument("--signal", required=True)
    w.add_argument("--step-pid", type=int, default=0, help="srun's pid; 0 before it started")
    w.add_argument("--timer", default="", help="armed: the stop timer of a warning runs")
    w.add_argument("--deadline", type=int, required=True, help="Unix s known so far")
    d = common("deadline")
    d.add_argument("--step-pid", type=int, default=0, help="srun's pid; 0 before it started")
    for name in ("after-step", "end"):
        s = common(name)
        s.add_argument("--rc", type=int, required=True)
        s.add_argument("--warnings", type=int, default=0)
        s.add_argument("--stopped", type=int, default=0)
        s.add_argument("--deadline", type=int, required=True, help="the attempt's deadline, Unix s")
        s.add_argument("--current-deadline", type=int, default=0,
                       help="the deadline as the last warning left it, Unix s")
    e = common("event")
    e.add_argument("name", choices=(P.EVENT_MIRROR_ABANDONED,))
    e.add_argument("fields", nargs="*", metavar="KEY=VALUE")
    return p


_COMMANDS = {"start": cmd_start, "warning": cmd_warning, "deadline": cmd_deadline,
             "after-step": cmd_after_step,
             "end": cmd_end, "event": cmd_event}


def main(argv: list[str] | None = None) -> int:
    """Answer one question of the batch script on stdout; 0, or 2 for bad arguments."""
    args = _parser().parse_args(argv)
    job = Job(args)
    print(_COMMANDS[args.command](job, args), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
