"""Benchmark: lost steps per warned preemption and goodput, on the real (local) Slurm cluster.

Goals (issue #3): 0 lost steps per warned preemption; goodput = step time / (wall - pending)
>= 0.97 with a preemption every 60 s. It never fails on time.

It submits the example job with ``hpcflow submit`` (``examples/tiny-dp.yaml`` by default, with
``--steps`` and ``run_dir`` overridden) and preempts it the way Slurm warns a job:
``scancel --signal=USR1 --batch <jobid>``, ``--every-s`` seconds after each attempt starts, for
``--preemptions`` attempts; the job checkpoints, requeues itself and resumes, and the last attempt
runs to the end. No ``scontrol update StartTime=now``: Slurm kills a requeued batch job that
starts before ``cred_expire`` ("Job credential revoked"), so the requeue delay is waited out and
counted as pending.

Figures come from the run's own records: the ledger ``<run_dir>/.hpcflow/events.jsonl``
(``attempt_start``, ``requeue``, ``job_end``; whole seconds) and rank 0's ``hpcflow-step``,
``hpcflow-checkpoint`` lines in the job log.

- lost steps of a preemption: the last step an attempt ran minus the step it committed, plus the
  steps the next attempt ran again (at or below that step);
- step time: the sum of ``step_time_s`` over each step's last run; wall: first submission to
  ``job_end``; pending: submission to the first start plus each ``requeue`` to the next start.

Start-up against its floor (issue: any program): before the job, the same layout runs a bare
step inside an allocation (``salloc ... srun python -c 'import torch; init_process_group;
barrier'``), timed from srun's start to its end, ``--floor-repeat`` times (median). Each
attempt's start-up (attempt start to its first step) and stop (its last step to the requeue or
the end) are printed as a ratio of that floor. Goals: start-up <= 1.3 x floor; stop <= 2 s plus
the checkpoint write.

Usage: python bench/bench_goodput.py [--every-s 60] [--preemptions 3] [--small]
       [--spec examples/tiny-dp.yaml] [--steps N] [--set KEY=VALUE ...]
       [--program-arg ARG ...] [--run-dir DIR]
       [--timeout-s 3600] [--floor-repeat 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from machine import header, verdict

from hpcflow import protocol

REPO = Path(__file__).resolve().parent.parent
GOAL_GOODPUT = 0.97
GOAL_LOST_STEPS = 0
STARTUP_GUESS_S = 25.0  # this machine: 8 ranks import torch on 2 shared cores
GOAL_STARTUP_RATIO = 1.3
GOAL_STOP_S = 2.0  # plus the checkpoint write
LINE = re.compile(r"^(hpcflow-[a-z]+) (\{.*\})$")
# The floor: what any job of this layout pays before its first step (one process per rank).
FLOOR_PROGRAM = """
import os
import torch.distributed as dist
from hpcflow.runtime.env import dist_env_from
env = dist_env_from(os.environ)
os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = env.master_addr, str(env.master_port)
dist.init_process_group("gloo", rank=env.rank, world_size=env.world_size)
dist.barrier()
dist.destroy_process_group()
"""
ATTEMPT = re.compile(r"^hpcflow: \S+ job \d+ attempt (\d+) on ")


def run(cmd: list[str], *, check: bool = True) -> subprocess.CompletedProcess:
    print("+ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, capture_output=True, text=True, check=check)


def submit(spec: Path, run_dir: Path, steps: int, overrides: list[str], extra: list[str]) -> str:
    """``hpcflow submit`` of ``spec`` with ``--steps``, ``run_dir``, ``overrides`` (``--set``
    KEY=VALUE) and ``extra`` program arguments applied; the job id."""
    program = yaml.safe_load(spec.read_text())["program"]
    args = [str(a) for a in program.get("args", [])]
    if "--steps" in args:
        args[args.index("--steps") + 1] = str(steps)
    else:
        args += ["--steps", str(steps)]
    args += extra
    sets = [f"run_dir={run_dir}", f"program.args={json.dumps(args)}", *overrides]
    cmd = [sys.executable, "-m", "hpcflow", "submit", str(spec), "--json"]
    for item in sets:
        cmd += ["--set", item]
    done = run(cmd, check=False)
    if done.returncode != 0:
        raise SystemExit(f"hpcflow submit failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    text = done.stdout
    job_id = re.search(r'"job_id":\s*"?(\d+)', text)
    if not job_id:
        raise SystemExit(f"no job id in the output of hpcflow submit:\n{text}")
    return job_id.group(1)


def ledger(run_dir: Path, job_id: str) -> list[dict]:
    path = protocol.ledger_path(run_dir)
    if not path.exists():
        return []
    events = []
    for line in path.read_text().splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if str(event.get("job_id")) == job_id:
            events.append(event)
    return events


def find(events: list[dict], kind: str, restart: int | None = None) -> dict | None:
    return next((e for e in events if e["event"] == kind
                 and (restart is None or int(e["restart"]) == restart)), None)


def drive(run_dir: Path, job_id: str, every_s: float, preemptions: int, timeout_s: float) -> int:
    """Preempt each attempt ``every_s`` after it starts, ``preemptions`` times; wait for the
    end. Returns the number of preemptions sent."""
    deadline = time.monotonic() + timeout_s
    sent = 0
    while time.monotonic() < deadline:
        events = ledger(run_dir, job_id)
        if find(events, "job_end"):
            return sent
        start = find(events, "attempt_start", restart=sent)
        if sent < preemptions and start and not find(events, "signal", restart=sent):
            if time.time() >= start["time"] + every_s:
                run(["scancel", "--signal=USR1", "--batch", job_id])
                sent += 1
        time.sleep(0.2)
    print(f"timed out after {timeout_s:.0f} s: cancelling job {job_id}", flush=True)
    run(["scancel", job_id], check=False)
    return sent


def attempts_from_log(log: str) -> dict[int, dict]:
    """Rank 0's step and checkpoint lines of each attempt, keyed by restart count."""
    out: dict[int, dict] = {}
    current = None
    for line in log.splitlines():
        if match := ATTEMPT.match(line):
            current = out.setdefault(int(match.group(1)), {"steps": [], "saves": []})
            continue
        match = LINE.match(line)
        if current is None or not match:
            continue
        tag, payload = match.group(1), json.loads(match.group(2))
        if tag == protocol.TAG_STEP:
            current["steps"].append((int(payload["step"]), float(payload["step_time_s"])))
        elif tag == protocol.TAG_CHECKPOINT:
            current["saves"].append(float(payload["save_s"]))
    return out


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


def analyse(events: list[dict], log: str, submitted_at: float,
            timed: dict[int, list[tuple[float, float]]]) -> dict:
    """Lost steps per preemption, goodput and its parts (see the module docstring)."""
    per_log = attempts_from_log(log)
    starts = {int(e["restart"]): e["time"] for e in events if e["event"] == "attempt_start"}
    ends = {int(e["restart"]): e["time"] for e in events if e["event"] in ("requeue", "job_end")}
    requeues = {int(e["restart"]): e for e in events if e["event"] == "requeue"}
    end = find(events, "job_end")
    last_run: dict[int, float] = {}
    rows, lost = [], []
    for restart in sorted(starts):
        info = per_log.get(restart, {"steps": [], "saves": []})
        steps = info["steps"]
        for step, step_s in steps:
            last_run[step] = step_s
        row = {"restart": restart, "start": starts[restart], "end": ends.get(restart),
               "steps": len(steps), "first": steps[0][0] if steps else None,
               "last": steps[-1][0] if steps else None, "step_s": sum(s for _, s in steps),
               "save_s": sum(info["saves"]), "startup_s": None, "stop_s": None}
        if timed.get(restart):  # first step began at its end time minus its duration
            first_end, first_s = timed[restart][0]
            row["startup_s"] = max(0.0, first_end - first_s - starts[restart])
            if ends.get(restart) is not None:
                row["stop_s"] = max(0.0, ends[restart] - timed[restart][-1][0])
        if restart in requeues:
            committed = int(requeues[restart]["step"])
            after = per_log.get(restart + 1, {"steps": []})["steps"]
            redone = sum(1 for step, _ in after if step <= committed)
            row["committed"] = committed
            lost.append(max(0, (row["last"] or committed) - committed) + redone)
        rows.append(row)
    running = sum((r["end"] or r["start"]) - r["start"] for r in rows)
    wall = (end["time"] if end else max(ends.values(), default=submitted_at)) - submitted_at
    pending = wall - running
    step_total = sum(last_run.values())
    known = rows and all(r["startup_s"] is not None for r in rows)
    startup = sum(r["startup_s"] for r in rows) if known else None
    after = step_total / (running - startup) if known and running > startup else None
    return {"startup_s": startup, "goodput_after_startup": after, "attempts": rows,
            "lost_steps": lost, "wall_s": wall, "pending_s": pending, "running_s": running,
            "step_s": step_total, "save_s": sum(r["save_s"] for r in rows),
            "goodput": step_total / running if running > 0 else float("nan"),
            "job_end": end, "steps_done": max(last_run, default=0)}


def floor_s(nodes: int, tasks_per_node: int, repeat: int) -> list[float]:
    """Seconds of a bare step of the same layout inside an allocation, ``repeat`` times: python
    starts on every rank, imports torch, joins a gloo process group, meets at a barrier, exits."""
    times = []
    for _ in range(repeat):
        inner = ("t0=$(date +%s.%N); srun --kill-on-bad-exit=1 " + sys.executable
                 + " -c \"$HPCFLOW_FLOOR\"; rc=$?; t1=$(date +%s.%N); echo \"floor $t0 $t1 $rc\"")
        done = subprocess.run(
            ["salloc", f"--nodes={nodes}", f"--ntasks-per-node={tasks_per_node}", "--quiet",
             "bash", "-c", inner],
            capture_output=True, text=True, env={**_environ(), "HPCFLOW_FLOOR": FLOOR_PROGRAM},
            timeout=600, check=False)
        match = re.search(r"^floor (\S+) (\S+) 0$", done.stdout, re.M)
        if not match:
            raise SystemExit(f"the floor step failed:\n{done.stdout}{done.stderr}")
        times.append(float(match.group(2)) - float(match.group(1)))
    return times


def _environ() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}


def report_floor(m: dict, floors: list[float]) -> None:
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
    print(f"preemptions sent {sent}, one every {every_s:g} s after each attempt started; "
          f"job end: {(m['job_end'] or {}).get('reason', 'none')}")
    print(f"  lost steps per warned preemption: {lost} (mean {mean_lost:.2f})   "
          f"{verdict(mean_lost, GOAL_LOST_STEPS, at_least=False)}")
    print(f"  wall {m['wall_s']:.0f} s, pending {m['pending_s']:.0f} s, running "
          f"{m['running_s']:.0f} s = steps {m['step_s']:.1f} s + checkpoints {m['save_s']:.1f} s "
          f"+ start, load, exit {m['running_s'] - m['step_s'] - m['save_s']:.1f} s")
    print(f"  goodput = step time / (wall - pending) = {m['step_s']:.1f} / {m['running_s']:.0f} "
          f"= {m['goodput']:.3f}   {verdict(m['goodput'], GOAL_GOODPUT, at_least=True)}")
    if m["goodput_after_startup"] is not None:
        print(f"  without process start-up ({m['startup_s']:.0f} s: launch, imports, rendezvous, "
              f"load): {m['step_s']:.1f} / {m['running_s'] - m['startup_s']:.0f} = "
              f"{m['goodput_after_startup']:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, default=REPO / "examples" / "tiny-dp.yaml")
    parser.add_argument("--every-s", type=float, default=60.0,
                        help="seconds from each attempt's start to its preemption (default 60)")
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
    args = parser.parse_args()
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
        train_s = max(args.every_s - STARTUP_GUESS_S, args.every_s / 3)
        args.steps = int((args.preemptions + 1) * train_s / args.step_time_s) + 1
    run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="bench-goodput-", dir=_runs()))
    print("\n".join(header("hpcflow goodput benchmark (local Slurm cluster)")), flush=True)
    print(f"spec:     {args.spec} with --steps {args.steps}, run_dir {run_dir}", flush=True)
    print(run(["sinfo", "-h", "-o", "%P %D %c %N %T"], check=False).stdout.strip(), flush=True)
    spec_doc = yaml.safe_load(args.spec.read_text())
    floors = floor_s(int(spec_doc.get("nodes", 1)), int(spec_doc.get("tasks_per_node", 1)),
                     2 if args.small else args.floor_repeat)
    submitted_at = time.time()
    job_id = submit(args.spec, run_dir, args.steps, args.overrides, args.extra)
    sent = drive(run_dir, job_id, args.every_s, args.preemptions, args.timeout_s)
    log_files = sorted(run_dir.glob(f"*-{job_id}.out"))
    log = log_files[0].read_text(errors="replace") if log_files else ""
    figures = analyse(ledger(run_dir, job_id), log, submitted_at, step_times(run_dir))
    report(figures, args.every_s, sent)
    report_floor(figures, floors)
    if args.json:
        args.json.write_text(json.dumps({**figures, "preemptions_sent": sent,
                                         "every_s": args.every_s}, indent=1) + "\n")


def _runs() -> Path:
    runs = REPO / "runs"
    runs.mkdir(exist_ok=True)
    return runs


if __name__ == "__main__":
    main()
