"""Benchmark: lost steps per warned preemption and goodput, on the real (local) Slurm cluster.

Goals: 0 lost steps per warned preemption; goodput holding nodes = training / (wall - pending)
>= 0.97 with a preemption every 60 s. It never fails on time.

It runs the example job (``examples/tiny-dp.yaml`` by default, with ``--steps`` and ``run_dir``
overridden) through ``hpcflow local-cluster rehearse``'s loop (:mod:`hpcflow.local_cluster.rehearse`):
submit, then ``--every-s`` seconds after each attempt's first training step warn it the way Slurm
does (``scancel --signal=USR1 --batch <jobid>``), for ``--preemptions`` attempts; the job
checkpoints, requeues itself and resumes, and the last attempt runs to the end. No ``scontrol
update StartTime=now``: Slurm kills a requeued batch job that starts before ``cred_expire`` ("Job
credential revoked"), so the requeue delay is waited out and counted as pending.

Figures come from ``hpcflow report``'s ledger (:func:`hpcflow.jobs.report_load.load_report`: the
run's ledger ``<run_dir>/.hpcflow/events.jsonl``, whole seconds, and rank 0's ``hpcflow-step``,
``hpcflow-checkpoint`` lines in the job log), so its goodput is the report's:

- lost steps of a preemption: the last step an attempt ran minus the step it committed, plus the
  steps the next attempt ran again (at or below that step);
- training: the sum of ``step_time_s`` over each step's last run; wall: first submission to the
  end; pending: submission to the first start plus each requeue to the next start;
- goodput = training / wall (``hpcflow report``); goodput holding nodes = training / (wall -
  pending), the figure the goal is about (the queue is Slurm's time, not the job's).

Start-up against its floor (issue: any program): before the job, the same layout runs a bare
step inside an allocation (``salloc ... srun python -c 'import torch; init_process_group;
barrier'``), timed from srun's start to its end, ``--floor-repeat`` times (median). Each
attempt's start-up (attempt start to its first step) and stop (its last step to the requeue or
the end) are printed as a ratio of that floor. Goals: start-up <= 1.3 x floor; stop <= 2 s plus
the checkpoint write. Where each attempt's start-up goes comes from rank 0's ``hpcflow-startup``
line (:mod:`hpcflow.runtime.startup`): the launch (batch script to the rank's process), the
interpreter and imports, joining the process group (the part the floor also pays), then building
the model, restoring the checkpoint and the first step (the part beyond it).

Failure mode (``--kill-every-s N``, :mod:`goodput_failures`): instead of warned preemptions, a
rank is killed (``kill -9``) N seconds after each program start's first step, ``--kills`` times,
once with cold in-job restarts, once with restarts handed to a warm standby
(``resilience.warm_standby``) and once with requeues; goodput, lost steps and restart time of
the three are printed side by side.

Usage: python bench/bench_goodput.py [--every-s 60] [--preemptions 3] [--small]
       [--spec examples/tiny-dp.yaml] [--steps N] [--set KEY=VALUE ...]
       [--program-arg ARG ...] [--run-dir DIR]
       [--timeout-s 3600] [--floor-repeat 3] [--json FILE]
       python bench/bench_goodput.py --kill-every-s N [--kills 3] [--small] [--steps N]
       [--interval 10] [--step-time-s 0.2] [--timeout-s 3600] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import tempfile
from pathlib import Path

import yaml
from floor import floor_s
from machine import header, verdict

from hpcflow.errors import HpcflowError
from hpcflow.jobs import records
from hpcflow.jobs.joblog import read_text, split_log
from hpcflow.jobs.report import GoodputReport
from hpcflow.jobs.report_load import load_report
from hpcflow.local_cluster.rehearse import rehearse
from hpcflow.protocol import TAG_STARTUP
from hpcflow.runtime.startup import PHASES
from hpcflow.supervisor.commands import COST_LINE

REPO = Path(__file__).resolve().parent.parent
GOAL_GOODPUT = 0.97
GOAL_LOST_STEPS = 0
GOAL_STARTUP_RATIO = 1.3
GOAL_STOP_S = 2.0  # plus the checkpoint write
def run(cmd: list[str], *, check: bool = True) -> subprocess.CompletedProcess:
    print("+ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, capture_output=True, text=True, check=check)


def overrides_for(spec: Path, run_dir: Path, steps: int, overrides: list[str],
                  extra: list[str]) -> list[str]:
    """The ``--set`` KEY=VALUE overrides that give ``spec`` ``--steps``, ``run_dir`` and the
    ``extra`` program arguments, then ``overrides``."""
    program = yaml.safe_load(spec.read_text())["program"]
    args = [str(a) for a in program.get("args", [])]
    if "--steps" in args:
        args[args.index("--steps") + 1] = str(steps)
    else:
        args += ["--steps", str(steps)]
    args += extra
    return [f"run_dir={run_dir}", f"program.args={json.dumps(args)}", *overrides]


def step_times(run_dir: Path) -> dict[int, list[tuple[float, float]]]:
    """(end time, step_time_s) of each step per restart from ``<run_dir>/metrics.jsonl`` (the
    training program's per-step records, with Unix times), if it writes them."""
    out: dict[int, list[tuple[float, float]]] = {}
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
            out.setdefault(int(rec["restart_count"]), []).append(
                (float(rec["time"]), float(rec["step_time_s"])))
        except (ValueError, KeyError, TypeError):
            continue
    return out


def analyse(rep: GoodputReport, events: list[dict],
            timed: dict[int, list[tuple[float, float]]]) -> dict:
    """Lost steps per preemption and start-up/stop per attempt (see the module docstring), with
    the goodput figures of ``hpcflow report`` (:mod:`hpcflow.jobs.report`)."""
    ends = {int(e["restart"]): e["time"] for e in events if e["event"] in ("requeue", "job_end")}
    committed_at = {int(e["restart"]): int(e["step"]) for e in events
                    if e["event"] == "requeue" and "step" in e}
    end = next((e for e in events if e["event"] == "job_end"), None)
    rows, lost = [], []
    for i, att in enumerate(rep.attempts):
        row = {"restart": att.restart, "start": att.start, "end": ends.get(att.restart),
               "steps": len(att.step_times), "first": att.first_step, "last": att.last_step,
               "step_s": sum(att.step_times.values()), "save_s": att.checkpointing_s,
               "startup_s": None, "stop_s": None}
        if timed.get(att.restart):  # first step began at its end time minus its duration
            first_end, first_s = timed[att.restart][0]
            row["startup_s"] = max(0.0, first_end - first_s - att.start)
            if row["end"] is not None:
                row["stop_s"] = max(0.0, row["end"] - timed[att.restart][-1][0])
        if att.restart in committed_at:
            committed = committed_at[att.restart]
            after = rep.attempts[i + 1].step_times if i + 1 < len(rep.attempts) else {}
            redone = sum(1 for step in after if step <= committed)
            row["committed"] = committed
            lost.append(max(0, (att.last_step or committed) - committed) + redone)
        rows.append(row)
    held = rep.wall_s - rep.totals["pending"]
    known = rows and all(r["startup_s"] is not None for r in rows)
    startup = sum(r["startup_s"] for r in rows) if known else None
    after = rep.totals["training"] / (held - startup) if known and held > startup else None
    return {"startup_s": startup, "goodput_after_startup": after, "attempts": rows,
            "lost_steps": lost, "wall_s": rep.wall_s, "pending_s": rep.totals["pending"],
            "running_s": held, "step_s": rep.totals["training"], "lost_s": rep.totals["lost"],
            "save_s": rep.totals["checkpointing"], "goodput": rep.goodput,
            "goodput_holding_nodes": rep.goodput_holding_nodes(), "job_end": end,
            "steps_done": max((a.last_step or 0 for a in rep.attempts), default=0)}


def startup_phases(job_id: str) -> dict[int, dict]:
    """Rank 0's first ``hpcflow-startup`` record of each attempt of ``job_id``, by restart."""
    rec = records.find_job(job_id)
    if rec is None:
        return {}
    out: dict[int, dict] = {}
    for restart, lines in split_log(read_text(rec.log_path), job_id).items():
        found = [payload for tag, payload in lines if tag == TAG_STARTUP]
        if found:
            out[restart] = found[0]
    return out


def report_phases(m: dict, phases: dict[int, dict], floor: float) -> None:
    """Where each attempt's start-up went (seconds), and the part the floor also pays."""
    if not phases:
        print("  (no hpcflow-startup lines: the program does not use hpcflow's Run)")
        return
    print("  where the start-up goes (rank 0, s): " + ", ".join(PHASES) + "; floor's part = "
          "launch + imports + join, beyond = build + restore + first step")
    for restart, ph in sorted(phases.items()):
        values = "  ".join("-" if ph.get(p) is None else f"{ph[p]:.2f}" for p in PHASES)
        floors_part = sum(ph.get(p) or 0.0 for p in ("launch_s", "imports_s", "join_s"))
        beyond = sum(ph.get(p) or 0.0 for p in ("build_s", "restore_s", "first_step_s"))
        ratio = floors_part / floor if floor > 0 else float("nan")
        print(f"  attempt {restart}: {values}   floor's part {floors_part:.1f} s = {ratio:.2f} x "
              f"floor, beyond {beyond:.1f} s")
    m["startup_phases"] = {str(k): v for k, v in sorted(phases.items())}


def supervisor_costs(job_id: str) -> list[tuple[float, float]]:
    """Each attempt's ``the supervisor used <cpu> s of CPU in <wall> s`` line of the job log
    (:func:`hpcflow.supervisor.commands.own_cost_line`), in order."""
    rec = records.find_job(job_id)
    if rec is None:
        return []
    pattern = re.compile(re.escape(COST_LINE) + r" ([\d.]+) s of CPU in ([\d.]+) s")
    return [(float(m.group(1)), float(m.group(2))) for m in pattern.finditer(read_text(rec.log_path))]


def report_supervisor(m: dict, costs: list[tuple[float, float]]) -> None:
    """What the supervisor itself cost each attempt: its CPU time against the attempt's wall."""
    if not costs:
        print("  (no supervisor cost lines in the job log)")
        return
    parts = ", ".join(f"{cpu:.2f} s in {wall:.0f} s ({cpu / wall:.1%})" for cpu, wall in costs
                      if wall > 0)
    print(f"the supervisor's own CPU per attempt (not the steps'): {parts}")
    m["supervisor_cpu_s"] = [cpu for cpu, _ in costs]


def report_floor(m: dict, floors: list[float], phases: dict[int, dict] | None = None) -> None:
    floor = statistics.median(floors)
    print(f"start-up floor (bare srun of the same layout: python, import torch, "
          f"init_process_group, barrier, exit): {', '.join(f'{f:.1f}' for f in floors)} s, "
          f"median {floor:.1f} s")
    for r in m["attempts"]:
        if r["startup_s"] is None:
            continue
        ratio = r["startup_s"] / floor if floor > 0 else float("nan")
        stop = "" if r["stop_s"] is None else (
            f"; stop {r['stop_s']:.1f} s (goal <= {GOAL_STOP_S:g} s + checkpoint write)")
        print(f"  attempt {r['restart']}: start-up {r['startup_s']:.1f} s = {ratio:.2f} x floor   "
              f"{verdict(ratio, GOAL_STARTUP_RATIO, at_least=False)}{stop}")
    m["floor_s"] = floors
    if phases is not None:
        report_phases(m, phases, floor)


def report(m: dict, every_s: float, sent: int) -> None:
    print("attempts (ledger times are whole seconds; startup = attempt start to first step, "
          "stop = last step to requeue/end):")
    print("  restart  running_s  steps  first..last  committed  step_s  save_s  startup_s  stop_s")
    for r in m["attempts"]:
        running = (r["end"] or r["start"]) - r["start"]
        startup = "-" if r["startup_s"] is None else f"{r['startup_s']:.1f}"
        stop = "-" if r["stop_s"] is None else f"{r['stop_s']:.1f}"
        span = f"{r['first']!s:>5}..{r['last']!s:<5}"
        print(f"  {r['restart']:7d}  {running:9.0f}  {r['steps']:5d}  {span}"
              f"  {r.get('committed', '-')!s:>9}  {r['step_s']:6.1f}  {r['save_s']:6.1f}"
              f"  {startup:>9}  {stop:>6}")
    lost = m["lost_steps"]
    mean_lost = sum(lost) / len(lost) if lost else float("nan")
    print(f"preemptions sent {sent}, each {every_s:g} s after the attempt's first training step; "
          f"job end: {(m['job_end'] or {}).get('reason', 'none')}")
    print(f"  lost steps per warned preemption: {lost} (mean {mean_lost:.2f})   "
          f"{verdict(mean_lost, GOAL_LOST_STEPS, at_least=False)}")
    rest = m["running_s"] - m["step_s"] - m["lost_s"] - m["save_s"]
    print(f"  wall {m['wall_s']:.0f} s, pending {m['pending_s']:.0f} s, holding nodes "
          f"{m['running_s']:.0f} s = steps kept {m['step_s']:.1f} s + steps redone "
          f"{m['lost_s']:.1f} s + checkpoints {m['save_s']:.1f} s + start, load, exit {rest:.1f} s")
    print(f"  goodput (hpcflow report) = training / wall = {m['step_s']:.1f} / {m['wall_s']:.0f} "
          f"= {m['goodput'] or 0:.3f}")
    held = m["goodput_holding_nodes"]
    print(f"  goodput holding nodes = training / (wall - pending) = {m['step_s']:.1f} / "
          f"{m['running_s']:.0f} = {held or 0:.3f}   "
          f"{verdict(held or 0.0, GOAL_GOODPUT, at_least=True)}")
    if m["goodput_after_startup"] is not None:
        print(f"  without process start-up ({m['startup_s']:.0f} s: launch, imports, rendezvous, "
              f"load): {m['step_s']:.1f} / {m['running_s'] - m['startup_s']:.0f} = "
              f"{m['goodput_after_startup']:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, default=REPO / "examples" / "tiny-dp.yaml")
    parser.add_argument("--every-s", type=float, default=60.0,
                        help="seconds from each attempt's first training step to its preemption "
                             "(default 60)")
    parser.add_argument("--preemptions", type=int, default=3)
    parser.add_argument("--steps", type=int, default=None,
                        help="training steps (default: enough for the preemptions and one more "
                             "attempt of about --every-s)")
    parser.add_argument("--step-time-s", type=float, default=None,
                        help="expected seconds per step for the default --steps (default: the "
                             "spec's --step-time-s plus 0.3)")
    parser.add_argument("--run-dir", type=Path, default=None,
                        help="run directory (default: a new one under runs/)")
    parser.add_argument("--timeout-s", type=float, default=3600.0,
                        help="cancel the job after this many seconds")
    parser.add_argument("--small", action="store_true",
                        help="CI size: a preemption every 20 s, 2 preemptions")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="more spec overrides for hpcflow submit")
    parser.add_argument("--program-arg", dest="extra", action="append", default=[],
                        metavar="ARG", help="append ARG to the program's arguments, e.g. "
                        "--program-arg=--async-checkpoint")
    parser.add_argument("--floor-repeat", type=int, default=3,
                        help="bare srun steps timed for the start-up floor (median)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--kill-every-s", type=float, default=None,
                        help="failure mode: kill a rank this many seconds after each program "
                             "start's first step; in-job restart against requeue")
    parser.add_argument("--kills", type=int, default=3, help="failure mode: ranks killed")
    parser.add_argument("--interval", type=int, default=10,
                        help="failure mode: checkpoint every N steps")
    args = parser.parse_args()
    if args.kill_every_s is not None:
        failure_mode(args)
        return
    if args.small:
        args.every_s, args.preemptions = 20.0, 2
    if args.every_s <= 0 or args.preemptions < 0:
        parser.error("--every-s must be > 0 and --preemptions >= 0")
    spec_args = [str(a) for a in yaml.safe_load(args.spec.read_text())["program"].get("args", [])]
    if args.step_time_s is None:
        sleep = float(spec_args[spec_args.index("--step-time-s") + 1]) \
            if "--step-time-s" in spec_args else 0.0
        args.step_time_s = sleep + 0.3
    if args.steps is None:
        args.steps = int((args.preemptions + 1) * args.every_s / args.step_time_s) + 1
    run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="bench-goodput-", dir=_runs()))
    print("\n".join(header("hpcflow goodput benchmark (local Slurm cluster)")), flush=True)
    print(f"spec:     {args.spec} with --steps {args.steps}, run_dir {run_dir}", flush=True)
    print(run(["sinfo", "-h", "-o", "%P %D %c %N %T"], check=False).stdout.strip(), flush=True)
    spec_doc = yaml.safe_load(args.spec.read_text())
    floors = floor_s(int(spec_doc.get("nodes", 1)), int(spec_doc.get("tasks_per_node", 1)),
                     2 if args.small else args.floor_repeat)
    sets = overrides_for(args.spec, run_dir, args.steps, args.overrides, args.extra)
    submitted: list[str] = []

    def log(line: str) -> None:
        print(line, flush=True)
        if match := re.match(r"submitted job (\d+)", line):
            submitted.append(match.group(1))

    try:
        done = rehearse(args.spec, sets, preemptions=args.preemptions,
                        preempt_after_s=args.every_s, timeout_s=args.timeout_s, log=log)
    except HpcflowError as exc:  # timed out or stalled: leave no job behind
        for job_id in submitted:
            run(["scancel", job_id], check=False)
        raise SystemExit(f"the rehearsal failed: {exc}") from None
    rep, _signals = load_report(done.job_id)
    figures = analyse(rep, done.events, step_times(run_dir))
    report(figures, args.every_s, done.preemptions_sent)
    report_floor(figures, floors, startup_phases(done.job_id))
    report_supervisor(figures, supervisor_costs(done.job_id))
    if args.json:
        args.json.write_text(json.dumps({**figures, "preemptions_sent": done.preemptions_sent,
                                         "every_s": args.every_s}, indent=1) + "\n")


def failure_mode(args: argparse.Namespace) -> None:
    """``--kill-every-s``: in-job restart, cold and warm, against requeue
    (:mod:`goodput_failures`)."""
    import goodput_failures

    if args.small:
        args.kill_every_s, args.kills = 10.0, 2
    if args.kill_every_s <= 0 or args.kills < 1 or args.interval < 1:
        raise SystemExit("--kill-every-s must be > 0, --kills >= 1 and --interval >= 1")
    args.step_time_s = 0.2 if args.step_time_s is None else args.step_time_s
    if args.steps is None:  # about one more stretch of --kill-every-s after the last kill
        args.steps = int((args.kills + 1) * args.kill_every_s / (args.step_time_s + 0.05)) + 1
    run_root = args.run_dir or Path(tempfile.mkdtemp(prefix="bench-kill-", dir=_runs()))
    print("\n".join(header("hpcflow goodput benchmark, failure mode (local Slurm cluster)")),
          flush=True)
    print(f"job: 2 nodes x 1 rank, hpcflow.examples.train --steps {args.steps} --step-time-s "
          f"{args.step_time_s:g}, a checkpoint every {args.interval} steps; run dirs under "
          f"{run_root}", flush=True)
    print(run(["sinfo", "-h", "-o", "%P %D %c %N %T"], check=False).stdout.strip(), flush=True)
    results = goodput_failures.main(args, run_root)
    if args.json:
        args.json.write_text(json.dumps({"kill_every_s": args.kill_every_s, **results},
                                        indent=1) + "\n")


def _runs() -> Path:
    runs = REPO / "runs"
    runs.mkdir(exist_ok=True)
    return runs


if __name__ == "__main__":
    main()
