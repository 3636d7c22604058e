"""The hang watchdog the supervisor runs beside each training step (docs/protocol.md, "Hangs
and in-job restarts")::

    python -m hpcflow.watchdog --heartbeat-dir DIR --ntasks N --run-dir RUN --job-id J \\
        --restart R --try T --settings JSON [--poll-s S] [--parent-pid PID] [--auto-resume]

``--settings`` is the :class:`~hpcflow.contract.WatchdogSettings` of the job spec's
``resilience`` block as JSON (its timeouts, the heartbeat interval, ``kill_after_s``).

It polls the ranks' heartbeats (:mod:`hpcflow.runtime.heartbeat`). When it first finds a hang
(:func:`hpcflow.watchdog.hang.find_hang`) it writes every rank's stacks to
``<run_dir>/hang-<job>-<restart>-<try>-suspected-<n>.txt`` and appends ``hang_suspected``; if
every rank reports in time again it appends ``hang_cleared`` and goes on watching. Once the hang
has lasted ``kill_after_s`` more (at once when it is 0) it writes the stacks again to
``<run_dir>/hang-<job>-<restart>-<try>.txt``, appends a ``hang`` event to the ledger, leaves
``hang.json`` in the heartbeat folder for the supervisor, and ends the step (``scancel
<job>.<step>``: the step, never the job; scancel(1)), then exits 0. It does nothing until the
first heartbeat appears (a program that does not use the runtime is never judged). The
supervisor stops it when the step ends. Exit 2: bad arguments.

With ``--auto-resume`` (the step runs under SageMaker HyperPod's ``srun --auto-resume=1``) a
hang found is checked against the job's running steps (``squeue --steps``, at most every
:data:`STEPS_EVERY_S` seconds, and before a step is ended): ranks of a step that no longer
runs are not judged, since HyperPod is replacing a node and running the step again
(:func:`hpcflow.watchdog.hang.live_beats`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from hpcflow import fsutil, ledger, protocol
from hpcflow.contract import WatchdogSettings, loads_bounded
from hpcflow.watchdog.hang import (
    CLEAR,
    KILL,
    SUSPECT,
    Hang,
    Timeouts,
    find_hang,
    first_beat_s,
    live_beats,
    next_action,
)
from hpcflow.watchdog.stacks import collect, stopped_ranks

#: Seconds between two ``squeue --steps`` of a watchdog with ``--auto-resume``.
STEPS_EVERY_S = 10.0


def read_beats(directory: Path) -> dict[int, dict[str, Any]]:
    """rank -> last heartbeat, from ``<rank>.json`` files (unreadable ones are skipped)."""
    out: dict[int, dict[str, Any]] = {}
    for path in directory.glob("*.json"):
        if not path.stem.isdigit():
            continue
        try:
            obj = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(obj, dict):
            out[int(path.stem)] = obj
    return out


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m hpcflow.watchdog", description=__doc__.split("::")[0])
    p.add_argument("--heartbeat-dir", type=Path, required=True)
    p.add_argument("--ntasks", type=int, required=True)
    p.add_argument("--run-dir", type=Path, required=True)
    p.add_argument("--job-id", required=True)
    p.add_argument("--restart", type=int, default=0)
    p.add_argument("--try", dest="try_", type=int, default=0)
    # The settings come from the job spec (hpcflow.slurm.render.watchdog_settings): no defaults.
    p.add_argument("--settings", type=_settings, required=True,
                   help="the watchdog's settings as JSON (hpcflow.contract.WatchdogSettings)")
    p.add_argument("--poll-s", type=float, default=1.0)
    p.add_argument("--auto-resume", action="store_true",
                   help="the step runs under HyperPod's srun --auto-resume=1: judge only ranks "
                        "of a step that still runs")
    p.add_argument("--parent-pid", type=int, default=None,
                   help="stop once this process (the supervisor) is no longer the parent "
                        "[the parent at start]")
    args = p.parse_args(argv)
    if args.ntasks < 1 or args.poll_s <= 0:
        p.error("--ntasks must be at least 1, --poll-s positive")
    return args


def _settings(text: str) -> WatchdogSettings:
    """``--settings``: the one decoding of the watchdog's settings (a ValueError is argparse's
    usage error, exit 2)."""
    try:
        return WatchdogSettings.decode(loads_bounded(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def step_ids(squeue_steps: str) -> set[str]:
    """The step ids (``0``, ``batch``, ...) in ``squeue --steps --noheader --format=%i`` output
    for one job, whose lines are ``<job>.<step>`` (``<job>_<task>.<step>`` for an array
    element; squeue(1), ``--steps``, ``%i``)."""
    return {line.strip().rsplit(".", 1)[1] for line in squeue_steps.splitlines()
            if "." in line.strip()}


def running_steps(job_id: str) -> set[str] | None:
    """The job's running step ids, or None when squeue gives no answer (then every rank is
    judged, as without ``--auto-resume``)."""
    try:
        done = subprocess.run(["squeue", "--steps", f"--jobs={job_id}", "--noheader",
                               "--format=%i"], capture_output=True, text=True, check=False,
                              timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return step_ids(done.stdout) if done.returncode == 0 else None


def end_step(job_id: str, beats: dict[int, dict[str, Any]]) -> None:
    """Kill the step the ranks run in (their ``SLURM_STEP_ID``), once their stacks are written.

    KILL, not TERM: the runtime takes TERM as a stop request (Slurm's own preemption sends it),
    so a TERMed step of a program on the runtime would checkpoint and read as a preemption,
    not as the hang it is."""
    steps = sorted({str(b.get("slurm_step_id", "")) for b in beats.values()} - {""})
    if not steps:  # not under srun: nothing to cancel
        return
    for step in steps:
        subprocess.run(["scancel", "--signal=KILL", f"{job_id}.{step}"],
                       capture_output=True, check=False, timeout=60)


def _hang_fields(args: argparse.Namespace, beats: dict[int, dict[str, Any]], hang: Hang,
                 stacks_file: str) -> dict[str, Any]:
    """Write every rank's stacks to ``<run_dir>/<stacks_file>``; the hang's ledger members."""
    stopped = [r for r in stopped_ranks(beats, args.job_id) if r in hang.ranks]
    first = stopped[0] if stopped else hang.first
    stacks = collect(beats, args.heartbeat_dir, args.job_id, time.time())
    fsutil.write_atomic(args.run_dir / stacks_file, stacks)
    return {"try": args.try_, "section": hang.section, "ranks": hang.ranks, "first": first,
            "stopped": stopped, "step": hang.step, "timeout_s": round(hang.timeout_s, 3),
            "stacks": stacks_file}


def _event(args: argparse.Namespace, name: str, fields: dict[str, Any]) -> None:
    ledger.append_event(protocol.ledger_path(args.run_dir), name, job_id=args.job_id,
                        restart=args.restart, time_s=int(time.time()), **fields)


def suspect(args: argparse.Namespace, beats: dict[int, dict[str, Any]], hang: Hang,
            n: int) -> str:
    """The first stage: stacks to the run directory and a ``hang_suspected`` event; the step
    goes on. Returns the stacks file's name."""
    name = protocol.suspected_stacks_name(args.job_id, args.restart, args.try_, n)
    fields = _hang_fields(args, beats, hang, name)
    kill_after_s = args.settings.kill_after_s
    _event(args, protocol.EVENT_HANG_SUSPECTED, {**fields, "kill_after_s": kill_after_s})
    print(f"hpcflow-watchdog: ranks {hang.ranks} silent in section {hang.section} for more than "
          f"{hang.timeout_s:.1f} s; stacks in {name}; the step is ended if they stay silent "
          f"{kill_after_s:.0f} s more", file=sys.stderr, flush=True)
    return name


def handle(args: argparse.Namespace, beats: dict[int, dict[str, Any]], hang: Hang) -> None:
    """Stacks to the run directory, the ledger event, the marker, then the step's end."""
    name = protocol.stacks_name(args.job_id, args.restart, args.try_)
    fields = _hang_fields(args, beats, hang, name)
    _event(args, protocol.EVENT_HANG, fields)
    marker = ledger.event_line(protocol.EVENT_HANG, job_id=args.job_id, restart=args.restart,
                               time_s=int(time.time()), **fields)
    fsutil.write_atomic(args.heartbeat_dir / protocol.HANG_MARKER, marker)
    print(f"hpcflow-watchdog: hang in section {hang.section} (ranks {hang.ranks} silent for more "
          f"than {hang.timeout_s:.1f} s); stacks in {name}; ending the step", file=sys.stderr,
          flush=True)
    end_step(args.job_id, beats)


def _running(args: argparse.Namespace, beats: dict[int, dict[str, Any]], hang: Hang,
             live: set[str] | None, now: float,
             t: Timeouts) -> tuple[dict[int, dict[str, Any]], Hang | None]:
    """The heartbeats of ranks whose step still runs, and the hang among them (``--auto-resume``;
    as given when squeue gave no answer)."""
    if live is None:
        return beats, hang
    kept = dict(live_beats(beats, live))
    return kept, (find_hang(kept, args.ntasks, now, first_beat_s(kept), t) if kept else None)


def main(argv: list[str] | None = None) -> int:
    """Watch until a hang is handled (0), the supervisor stops it, or the supervisor is gone
    (0: an orphan, reparented when the supervisor was killed, would escape Slurm's process
    tracking by parentage, ``proctrack/linuxproc``, and judge ranks that no longer run)."""
    args = _args(argv)
    s: WatchdogSettings = args.settings
    t = Timeouts(startup_s=s.startup_s, checkpoint_s=s.checkpoint_s,
                 step_floor_s=s.step_floor_s, step_factor=s.step_factor,
                 warmup_steps=s.warmup_steps, step_s=s.step_s, interval_s=s.heartbeat_interval_s,
                 kill_after_s=s.kill_after_s)
    armed_at: float | None = None
    since: float | None = None
    suspicions = 0
    stacks_file = ""
    # The pid given, not the parent found at start: the supervisor may be gone before this
    # process has even imported its modules.
    parent = os.getppid() if args.parent_pid is None else args.parent_pid
    live: set[str] | None = None
    live_at = 0.0
    while True:
        time.sleep(args.poll_s)
        if os.getppid() != parent:  # the supervisor is gone: so is the step; never outlive it
            print("hpcflow-watchdog: the supervisor is gone: stopping", file=sys.stderr,
                  flush=True)
            return 0
        beats = read_beats(args.heartbeat_dir)
        if not beats:
            continue
        now = time.time()
        armed_at = armed_at or now
        hang = find_hang(beats, args.ntasks, now, armed_at, t)
        if hang is not None and args.auto_resume:
            if now - live_at >= STEPS_EVERY_S:
                live, live_at = running_steps(args.job_id), now
            beats, hang = _running(args, beats, hang, live, now, t)
            if hang is not None and live_at < now and next_action(
                    hang, since, now, t.kill_after_s) == KILL:
                # The step is ended on a fresh look only: it may have ended since the last.
                live, live_at = running_steps(args.job_id), now
                beats, hang = _running(args, beats, hang, live, now, t)
        action = next_action(hang, since, now, t.kill_after_s)
        if action == KILL and hang is not None:
            handle(args, beats, hang)
            return 0
        if action == SUSPECT and hang is not None:
            suspicions += 1
            stacks_file = suspect(args, beats, hang, suspicions)
            since = now
        elif action == CLEAR and since is not None:
            _event(args, protocol.EVENT_HANG_CLEARED, {
                "try": args.try_, "after_s": round(now - since, 3), "stacks": stacks_file})
            print(f"hpcflow-watchdog: every rank reports again after {now - since:.0f} s; the "
                  "suspected hang is cleared", file=sys.stderr, flush=True)
            since = None


if __name__ == "__main__":
    sys.exit(main())
