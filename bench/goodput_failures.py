"""``bench_goodput.py --kill-every-s N``: a rank killed every N seconds, in-job restart (cold and
handed to a warm standby) against requeue, side by side in one run. It prints figures; it never
fails on time.

Three jobs of the same spec run one after the other on the local Slurm cluster (2 nodes x 1 rank,
``hpcflow.examples.train``, a checkpoint every ``--interval`` steps, a ``resilience`` block
without the hang watchdog). ``N`` seconds after each program start's first training step the
benchmark kills one training process (``kill -9`` of rank 1, found through ``/proc``), ``kills``
times; then the job runs to its end.

- in-job restart: ``resilience.max_in_job_restarts`` = kills + 1: the batch script starts a new
  step in the same allocation from the latest committed checkpoint (docs/protocol.md, "Hangs and
  in-job restarts").
- warm standby: the same with ``resilience.warm_standby``: the restart is handed to a standby
  step started beside the running one, whose ranks have imported ahead (docs/protocol.md, "Warm
  standby").
- requeue: ``resilience.max_in_job_restarts`` = 0. What the batch script really does then: the
  step ends, the job ends ``rank_killed`` and Slurm marks it FAILED; nothing requeues a failed job
  by itself (Slurm requeues on its own only after a node failure, or with a ``RequeueExit``
  rule in slurm.conf, which hpcflow does not set). The benchmark therefore requeues it the way
  Slurm does after a node failure, ``scontrol requeue <job>`` once the job has ended; the batch
  script counts each such requeue against ``resilience.max_failures`` (kills + 1 here) and the
  next attempt resumes from the latest committed checkpoint.

Figures per job, from ``hpcflow report``'s ledger (:func:`hpcflow.jobs.report_load.load_report`) and
rank 0's ``<run_dir>/metrics.jsonl`` (Unix time and ``step_time_s`` of every step):

- goodput = training / wall; goodput holding nodes = training / (wall - pending);
- lost steps: per failure, the steps trained before it and trained again after it;
- restart time: from the kill to the start of the first training step of the next program start
  (detection, teardown, for the requeue also the queue, then start-up and restore); median;
- against the floor: before the jobs, a bare step of the same layout (:mod:`floor`: srun of
  python that imports torch, joins a gloo process group, meets at a barrier and exits) runs in
  an allocation; each arm's median restart is printed as a ratio of it (goal for the in-job
  restarts: <= 1.2).
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from hpcflow.jobs import records, service
from hpcflow.jobs.report_load import load_report
from hpcflow.local_cluster.processes import rank_pid

#: (name, in-job restarts, warm standby): the cold in-job restart, the same handed to a warm
#: standby (``resilience.warm_standby``), and the requeue.
ARMS = (("in-job restart", True, False), ("warm standby", True, True), ("requeue", False, False))
TRAIN = "hpcflow.examples.train"


def failure_spec(run_dir: Path, *, steps: int, step_time_s: float, interval: int, kills: int,
                 in_job: bool, warm: bool = False) -> dict[str, Any]:
    """The benchmark's job spec: the same for every arm but for ``max_in_job_restarts`` and
    ``warm_standby``.

    The kills always hit rank 1, on the same node; ``exclude_after_failures`` above the number
    of kills keeps that node in the job, so the in-job arm measures restarts, not node
    exclusion (a 2-node job on the 2-node local cluster has no node to move to).
    """
    return {
        "name": "kill-bench", "nodes": 2, "tasks_per_node": 1, "time_limit": "00:30:00",
        "run_dir": str(run_dir),
        "program": {"module": TRAIN,
                    "args": ["--steps", str(steps), "--step-time-s", str(step_time_s)]},
        "env": {"OMP_NUM_THREADS": "1"},
        "checkpoint": {"keep": 2, "interval_steps": interval},
        "preemption": {"max_requeues": 0},
        "resilience": {"watchdog": False, "max_in_job_restarts": kills + 1 if in_job else 0,
                       "max_failures": kills + 1, "exclude_after_failures": kills + 1,
                       "warm_standby": warm},
    }


def first_step_after(run_dir: Path, t: float) -> float | None:
    """Unix start time of the first step rank 0 ended after ``t`` (its end less its
    ``step_time_s``), or None yet."""
    try:
        lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        try:
            rec = json.loads(line)
            if float(rec["time"]) > t:
                return float(rec["time"]) - float(rec.get("step_time_s", 0.0))
        except (ValueError, KeyError, TypeError):
            continue
    return None


def run_arm(name: str, spec: dict[str, Any], *, every_s: float, kills: int, timeout_s: float,
            requeue: bool, log: Callable[[str], None]) -> dict[str, Any]:
    """Submit ``spec``, kill rank 1 ``every_s`` after each program start's first step,
    ``kills`` times (requeueing the ended job when ``requeue``), follow the job to its end.

    Returns:
        The figures: ``job_id``, ``kill_times``, ``restart_s`` (one per kill), ``lost_steps``
        (one per failure), ``goodput``, ``goodput_holding_nodes``, ``wall_s``, ``pending_s``,
        ``training_s``, ``lost_s``, ``endings``.

    Raises:
        SystemExit: the job did not finish within ``timeout_s`` (it is cancelled), or it ended
            in a way the benchmark did not cause.
    """
    run_dir = Path(spec["run_dir"])
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir.parent / f"{run_dir.name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    job_id = str(service.submit(path).job_id)
    log(f"{name}: submitted job {job_id}")
    deadline = time.monotonic() + timeout_s
    kill_times: list[float] = []
    restart_s: list[float] = []
    since: float | None = 0.0  # the current program start is the first to step after this time
    killed: int | None = None
    requeued = 0
    try:
        while True:
            if time.monotonic() > deadline:
                raise SystemExit(f"{name}: job {job_id} did not finish in {timeout_s:.0f} s")
            if since is None:  # after a kill: wait for rank 1 in a new process
                pid = rank_pid(job_id, 1, TRAIN)
                if pid is not None and pid != killed:
                    since = time.time()
            first = first_step_after(run_dir, since) if since is not None else None
            if first is not None and len(restart_s) < len(kill_times):
                restart_s.append(first - kill_times[-1])
                log(f"{name}: training again {restart_s[-1]:.1f} s after the kill")
            if first is not None and len(kill_times) < kills and time.time() >= first + every_s:
                killed = rank_pid(job_id, 1, TRAIN)
                if killed is not None:
                    os.kill(killed, signal.SIGKILL)
                    kill_times.append(time.time())
                    since = None
                    log(f"{name}: killed rank 1 (pid {killed}), kill {len(kill_times)} of {kills}")
                    continue
            events = records.job_events(run_dir, job_id)
            end = next((e for e in reversed(events) if e.get("event") == "job_end"), None)
            if end is not None and end.get("reason") in ("completed", "completed_after_done"):
                break
            if end is not None and requeue and int(end.get("restart", 0)) == requeued \
                    and service.job_status(job_id).finished:
                if requeued >= kills:
                    raise SystemExit(f"{name}: job {job_id} ended {end.get('reason')} after "
                                     f"{requeued} requeue(s)")
                subprocess.run(["scontrol", "requeue", job_id], check=True,
                               capture_output=True, text=True)
                requeued += 1
                log(f"{name}: job ended {end.get('reason')}; scontrol requeue {job_id}")
            elif end is not None and not requeue:
                raise SystemExit(f"{name}: job {job_id} ended {end.get('reason')}")
            time.sleep(0.2)
        _wait_finished(job_id, deadline)
    except BaseException:
        subprocess.run(["scancel", job_id], check=False, capture_output=True)
        raise
    rep, _ = load_report(job_id)
    return {
        "job_id": job_id, "kill_times": kill_times, "restart_s": restart_s,
        "startups": startup_records(job_id),
        "lost_steps": [f.lost_steps for f in rep.failures], "goodput": rep.goodput,
        "goodput_holding_nodes": rep.goodput_holding_nodes(), "wall_s": rep.wall_s,
        "pending_s": rep.totals["pending"], "training_s": rep.totals["training"],
        "lost_s": rep.totals["lost"], "endings": [a.ending for a in rep.attempts],
        "failures": [f.kind for f in rep.failures],
    }


def startup_records(job_id: str) -> list[dict[str, Any]]:
    """Rank 0's ``hpcflow-startup`` records of ``job_id``, in the order of the log: one per
    program start (after an in-job restart its phases run from the new step's start)."""
    from hpcflow.jobs.joblog import read_text, split_log
    from hpcflow.protocol import TAG_STARTUP

    rec = records.find_job(job_id)
    if rec is None:
        return []
    return [payload for _, lines in sorted(split_log(read_text(rec.log_path), job_id).items())
            for tag, payload in lines if tag == TAG_STARTUP]


def restart_parts(result: dict[str, Any]) -> list[dict[str, float]]:
    """Where each in-job restart went: ``stop`` (the kill to the new step's start: srun ending
    the step, the watchdog's stop and the supervisor's decision), then the new step's
    ``launch``, ``imports``, ``join`` (what the floor pays too) and ``build``, ``restore``
    (the program's): from the restarted rank 0's ``hpcflow-startup`` record."""
    parts = []
    for restart, rec in zip(result["restart_s"], result["startups"][1:], strict=False):
        phases = {k[:-2]: rec.get(k) or 0.0 for k in ("launch_s", "imports_s", "join_s",
                                                      "build_s", "restore_s")}
        parts.append({"stop": restart - sum(phases.values()), **phases})
    return parts


def _wait_finished(job_id: str, deadline: float) -> None:
    while time.monotonic() < deadline and not service.job_status(job_id).finished:
        time.sleep(0.5)


def _runs_of(words: list[str]) -> str:
    """``a, a, b`` -> ``a x2, b``."""
    out: list[list[Any]] = []
    for word in words:
        if out and out[-1][0] == word:
            out[-1][1] += 1
        else:
            out.append([word, 1])
    return ", ".join(w if n == 1 else f"{w} x{n}" for w, n in out)


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def print_side_by_side(results: dict[str, dict[str, Any]], every_s: float) -> None:
    """One table, one column per arm, then the ratios."""
    arms = [results[name] for name, _, _ in ARMS]

    def num(v: float | None, fmt: str = ".1f") -> str:
        return "-" if v is None else format(v, fmt)

    rows: list[tuple[str, list[str]]] = [
        ("job", [a["job_id"] for a in arms]),
        ("kills", [str(len(a["kill_times"])) for a in arms]),
        ("attempt endings", [_runs_of(a["endings"]) for a in arms]),
        ("wall s", [num(a["wall_s"], ".0f") for a in arms]),
        ("pending s", [num(a["pending_s"], ".0f") for a in arms]),
        ("training s", [num(a["training_s"]) for a in arms]),
        ("lost s (steps redone)", [num(a["lost_s"]) for a in arms]),
        ("lost steps per failure", [str(a["lost_steps"]) for a in arms]),
        ("restart s per kill", [", ".join(num(x) for x in a["restart_s"]) for a in arms]),
        ("restart s, median", [num(median(a["restart_s"])) for a in arms]),
        ("goodput (training / wall)", [num(a["goodput"], ".3f") for a in arms]),
        ("goodput holding nodes", [num(a["goodput_holding_nodes"], ".3f") for a in arms]),
    ]
    print(f"a rank killed (kill -9) {every_s:g} s after each program start's first step:")
    print(f"  {'':26}" + "".join(f"{name:>28}" for name, _, _ in ARMS))
    for label, cells in rows:
        print(f"  {label:26}" + "".join(f"{c:>28}" for c in cells))
    cold, warm, requeue = (median(a["restart_s"]) for a in arms)
    if cold and requeue:
        print(f"  restart time, requeue / in-job restart (medians): {requeue / cold:.2f}")
    if cold and warm:
        print(f"  restart time, warm standby / in-job restart (medians): {warm / cold:.2f}")
    if arms[0]["goodput"] and arms[2]["goodput"]:
        print(f"  goodput, in-job restart / requeue: {arms[0]['goodput'] / arms[2]['goodput']:.2f}")
    if arms[0]["goodput"] and arms[1]["goodput"]:
        print(f"  goodput, warm standby / in-job restart: "
              f"{arms[1]['goodput'] / arms[0]['goodput']:.2f}")


#: Goal: an in-job restart (the kill to training again) within 1.2 x the floor of a bare srun
#: step of the same layout.
GOAL_RESTART_RATIO = 1.2


def print_against_floor(results: dict[str, dict[str, Any]], floors: list[float]) -> None:
    """Each arm's median restart time as a ratio of the floor (:mod:`floor`, 2 nodes x 1 rank)."""
    from machine import verdict

    floor = statistics.median(floors)
    print(f"restart floor (bare srun of the same layout in an allocation: python, import torch, "
          f"init_process_group, barrier, exit): {', '.join(f'{f:.1f}' for f in floors)} s, "
          f"median {floor:.1f} s")
    for name, in_job, _ in ARMS:
        restart = median(results[name]["restart_s"])
        if restart is None or floor <= 0:
            continue
        goal = (f"   {verdict(restart / floor, GOAL_RESTART_RATIO, at_least=False)}"
                if in_job else "")
        print(f"  {name}: restart {restart:.1f} s = {restart / floor:.2f} x floor{goal}")
    for name, in_job, _ in ARMS:
        parts = restart_parts(results[name]) if in_job else []
        if not parts:
            continue
        print(f"  where each restart of '{name}' went (s): stop = kill to the new step's start "
              "(srun ends the step, the supervisor decides); then the new step's phases")
        for i, p in enumerate(parts, 1):
            floors_part = p["launch"] + p["imports"] + p["join"]
            print(f"    kill {i}: stop {p['stop']:.2f}, launch {p['launch']:.2f}, imports "
                  f"{p['imports']:.2f}, join {p['join']:.2f}, build {p['build']:.2f}, restore "
                  f"{p['restore']:.2f}; the floor's part (launch + imports + join) "
                  f"{floors_part:.2f} = {floors_part / floor:.2f} x floor")


def main(args: Any, run_root: Path) -> dict[str, dict[str, Any]]:
    """Run both arms with ``args`` (``kill_every_s``, ``kills``, ``steps``, ``interval``,
    ``step_time_s``, ``timeout_s``) under ``run_root``, with the floor of their layout measured
    before; print and return their figures."""
    from floor import floor_s

    floors = floor_s(2, 1, 2 if args.small else 3)
    results: dict[str, Any] = {}
    for name, in_job, warm in ARMS:
        run_dir = run_root / name.replace(" ", "-")
        spec = failure_spec(run_dir, steps=args.steps, step_time_s=args.step_time_s,
                            interval=args.interval, kills=args.kills, in_job=in_job, warm=warm)
        results[name] = run_arm(name, spec, every_s=args.kill_every_s, kills=args.kills,
                                timeout_s=args.timeout_s, requeue=not in_job,
                                log=lambda line: print(line, flush=True))
    print_side_by_side(results, args.kill_every_s)
    print_against_floor(results, floors)
    results["floor_s"] = floors
    return results
