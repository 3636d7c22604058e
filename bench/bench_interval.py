"""Benchmark: ``checkpoint.interval: auto`` against a fixed interval that is too short and one
that is too long, under the same seeded Poisson failures, on the real (local) Slurm cluster;
and what ``hpcflow plan goodput`` predicts for each, from costs measured in a warm-up job.

Goals (issue "Plan before you pay"): auto's goodput at least the better fixed arm's minus 0.02;
``plan goodput``'s prediction within 0.05 (absolute) of each arm's measured goodput. It prints
predicted against measured; it never fails on a goal.

The jobs: 2 nodes x 1 rank of ``hpcflow.examples.train`` (``--step-time-s`` per step), in-job
restarts on (the default ``resilience``, with bounds above the number of kills), one after the
other.

1. Warm-up: ``--warmup-steps`` steps with a checkpoint every 10 steps and one kill. ``hpcflow
   report --json`` of this job gives the save cost, the restart cost (kill to training again)
   and the start-up: the costs ``plan goodput --from-job`` reads.
2. Three arms of ``--steps`` steps each: ``interval_steps: --short``, ``interval_steps:
   --long``, and ``interval: auto`` with ``failures_per_node_hour`` set to the rate the
   benchmark injects. The failures: ``kill -9`` of rank 1 at ``t0 + s_i``, where ``t0`` is the
   arm's first training step and ``s_i`` the same seeded Poisson times (mean gap ``--mtbf-s``)
   in every arm; a kill due while no rank 1 trains (during a restart) lands as soon as the new
   one does, as a failure during a restart would start it over.
3. For each arm: measured goodput = training / held time (``hpcflow report``'s goodput holding
   nodes: the sum of each step's last run, over the wall time less the queue wait); predicted =
   ``hpcflow plan goodput --from-job <warm-up> --failure-rate F --interval-s T --hours H``, where
   ``T`` is the arm's interval in training seconds (steps x the warm-up's mean step time; auto:
   the interval it chose last) and ``H`` the arm's held hours. Both the closed form and the
   seeded simulation (mean, 5th-95th percentile of single jobs) are printed: with restarts
   not short against the MTBF only the simulation's assumptions hold, so its mean is the
   prediction the goal is about. The same plan from the arm's own measured costs (``--from-job
   <arm>``) is printed beside it, to tell the model's error apart from costs that differed
   between the warm-up and the arm.

A single job's goodput scatters around the expectation (the number of failures is Poisson,
and where each lands in an interval is chance); the simulation's 5th-95th percentiles say by
how much. So each arm is also planned at the failure rate it met (its kills over its held
node-hours), which takes the count's chance out; and the model is replayed at the very kill
times the arm met (``hpcflow.plan.simulate.replay``, the arm's own costs and step time), which
takes out where they landed too: the replay against the measured goodput is the model's own
error, the replay against the plan from the arm's own costs is the draw's. With ``--seeds``
each arm runs once per seed (one warm-up), each seed its own kill times, and the goal is
judged on the means over the seeds.

Usage: python bench/bench_interval.py [--small] [--mtbf-s 60] [--steps 1500]
       [--step-time-s 0.2] [--short 1] [--long 150] [--warmup-steps 150] [--seeds 0 [1 ...]]
       [--timeout-s 3600] [--json FILE]
       python bench/bench_interval.py --replan FILE   # again from the jobs FILE recorded
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

import yaml
from goodput_failures import first_step_after
from machine import header, verdict

from hpcflow.jobs import records, service
from hpcflow.jobs.report_load import load_report
from hpcflow.local_cluster.processes import rank_pid
from hpcflow.plan.goodput import GoodputInputs
from hpcflow.plan.simulate import replay

TRAIN = "hpcflow.examples.train"
NODES = 2
GOAL_AUTO_MARGIN = 0.02
GOAL_PREDICTION = 0.05
#: Any instance type of the catalog: it prices the plan, and goodput does not depend on it.
PLAN_INSTANCE = "p4d.24xlarge"


def spec(run_dir: Path, *, steps: int, step_time_s: float, checkpoint: dict[str, Any],
         kills: int) -> dict[str, Any]:
    """One job of the benchmark; only ``checkpoint`` differs between the arms."""
    bound = kills + 2
    return {
        "name": "interval-bench", "nodes": NODES, "tasks_per_node": 1, "time_limit": "01:00:00",
        "run_dir": str(run_dir),
        "program": {"module": TRAIN,
                    "args": ["--steps", str(steps), "--step-time-s", str(step_time_s)]},
        "env": {"OMP_NUM_THREADS": "1"},
        "checkpoint": {"keep": 2, **checkpoint},
        "preemption": {"max_requeues": 0},
        # the kills hit rank 1 on the same node: keep that node (no spare to move to)
        "resilience": {"max_in_job_restarts": bound, "max_failures": bound,
                       "exclude_after_failures": bound},
    }


def schedule(seed: int, mtbf_s: float, horizon_s: float) -> list[float]:
    """Seeded Poisson failure times in seconds after the first step, up to ``horizon_s``."""
    rng = random.Random(seed)
    out, t = [], 0.0
    while True:
        t += rng.expovariate(1.0 / mtbf_s)
        if t > horizon_s:
            return out
        out.append(t)


def run_job(name: str, job_spec: dict[str, Any], kills_at: list[float], timeout_s: float
            ) -> dict[str, Any]:
    """Submit, kill rank 1 at ``t0 + kills_at[i]``, follow the job to its end; its figures."""
    run_dir = Path(job_spec["run_dir"])
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir.parent / f"{run_dir.name}.yaml"
    path.write_text(yaml.safe_dump(job_spec))
    job_id = str(service.submit(path).job_id)
    print(f"{name}: submitted job {job_id}", flush=True)
    deadline = time.monotonic() + timeout_s
    t0: float | None = None
    done_kills: list[float] = []
    last_killed: int | None = None
    try:
        while True:
            if time.monotonic() > deadline:
                raise SystemExit(f"{name}: job {job_id} did not finish in {timeout_s:.0f} s")
            if t0 is None:
                t0 = first_step_after(run_dir, 0.0)
            elif len(done_kills) < len(kills_at) and time.time() >= t0 + kills_at[len(done_kills)]:
                pid = rank_pid(job_id, 1, TRAIN)
                if pid is not None and pid != last_killed:
                    os.kill(pid, signal.SIGKILL)
                    last_killed = pid
                    done_kills.append(time.time() - t0)
                    print(f"{name}: kill {len(done_kills)} at {done_kills[-1]:.1f} s "
                          f"(due at {kills_at[len(done_kills) - 1]:.1f} s)", flush=True)
            events = records.job_events(run_dir, job_id)
            end = next((e for e in reversed(events) if e.get("event") == "job_end"), None)
            if end is not None:
                if end.get("reason") not in ("completed", "completed_after_done"):
                    raise SystemExit(f"{name}: job {job_id} ended {end.get('reason')}")
                break
            time.sleep(0.2)
        while time.monotonic() < deadline and not service.job_status(job_id).finished:
            time.sleep(0.5)
    except BaseException:
        subprocess.run(["scancel", job_id], check=False, capture_output=True)
        raise
    return job_figures(job_id, done_kills)


def job_figures(job_id: str, kill_times_s: list[float]) -> dict[str, Any]:
    """One finished job's figures, from ``hpcflow report``'s view of its ledger and log."""
    rep, _ = load_report(job_id)
    steps = {s for a in rep.attempts for seg in a.segments for s in seg}  # each step once
    chosen = [c for a in rep.attempts for c in a.intervals]
    held_s = rep.wall_s - rep.totals["pending"]
    starts = sum(len(a.segments) for a in rep.attempts)
    return {
        "job_id": job_id, "kills": len(kill_times_s), "kill_times_s": kill_times_s,
        "step_s": rep.totals["training"] / max(1, len(steps)),
        "startup_s_per_start": rep.totals["startup"] / max(1, starts),
        "goodput": rep.goodput_holding_nodes(), "held_s": held_s,
        "training_s": rep.totals["training"], "checkpointing_s": rep.totals["checkpointing"],
        "lost_s": rep.totals["lost"], "steps": len(steps),
        "chosen_interval_steps": [c["interval_steps"] for c in chosen],
        "chosen_interval_s": [c["interval_s"] for c in chosen],
    }


def plan(warmup_job: str, rate: float, interval_s: float, hours: float) -> dict[str, Any]:
    """``hpcflow plan goodput --json`` for one arm (see the module docstring)."""
    cmd = [sys.executable, "-m", "hpcflow", "plan", "goodput", "--from-job", warmup_job,
           "--nodes", str(NODES), "--instance", PLAN_INSTANCE, "--hours", f"{hours:.6f}",
           "--failure-rate", f"{rate:.6g}", "--interval-s", f"{interval_s:.4f}",
           "--price-source", "table", "--runs", "400", "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"plan goodput failed ({out.returncode}): {out.stderr or out.stdout}")
    return json.loads(out.stdout)["data"]


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--small", action="store_true",
                   help="--steps 600 --mtbf-s 40 --warmup-steps 100 (about 12 minutes)")
    p.add_argument("--mtbf-s", type=float, default=60.0, help="mean seconds between failures")
    p.add_argument("--steps", type=int, default=1500, help="training steps of each arm")
    p.add_argument("--step-time-s", type=float, default=0.2, help="seconds each step sleeps")
    p.add_argument("--short", type=int, default=1, help="the short fixed interval, in steps")
    p.add_argument("--long", type=int, default=150, help="the long fixed interval, in steps")
    p.add_argument("--warmup-steps", type=int, default=150)
    p.add_argument("--seeds", type=int, nargs="+", default=[0],
                   help="seeds of the failure times: each arm runs once per seed")
    p.add_argument("--timeout-s", type=float, default=3600.0, help="per job")
    p.add_argument("--json", type=Path, default=None, help="also write the figures here")
    p.add_argument("--replan", type=Path, default=None, metavar="FILE",
                   help="recompute the figures and plans of the jobs a --json FILE recorded")
    args = p.parse_args(argv)
    if args.small:
        args.steps, args.mtbf_s, args.warmup_steps = 600, 40.0, 100
    if min(args.steps, args.short, args.long, args.warmup_steps) < 1 or args.mtbf_s <= 0 \
            or args.step_time_s < 0 or args.short >= args.long:
        p.error("--steps, --short, --long, --warmup-steps at least 1, --short below --long, "
                "--mtbf-s above 0, --step-time-s at least 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    if args.replan is not None:
        return replan(args.replan)
    print("\n".join(header("checkpoint interval: auto against fixed, under seeded failures")))
    rate = 3600.0 / (args.mtbf_s * NODES)  # failures per node-hour the kills amount to
    root = Path(tempfile.mkdtemp(prefix="hpcflow-bench-interval-"))
    warm = run_job("warm-up", spec(root / "warmup", steps=args.warmup_steps,
                                   step_time_s=args.step_time_s,
                                   checkpoint={"interval_steps": 10}, kills=1),
                   [args.warmup_steps * args.step_time_s / 2], args.timeout_s)
    rounds = []
    for seed in args.seeds:
        # Kills over three times the failure-free length: enough for the slowest arm.
        kills_at = schedule(seed, args.mtbf_s, 3 * args.steps * warm["step_s"] + 600)
        results: dict[str, Any] = {}
        for name, ckpt in arms(args, rate).items():
            results[name] = run_job(
                f"{name} (seed {seed})",
                spec(root / f"{name}-{seed}", steps=args.steps, step_time_s=args.step_time_s,
                     checkpoint=ckpt, kills=len(kills_at)), kills_at, args.timeout_s)
        rounds.append({"seed": seed, "arms": results})
    record = {"args": {k: v for k, v in vars(args).items() if k not in ("json", "replan")},
              "rate": rate, "warmup": warm, "rounds": rounds}
    analyse(record, args)
    if args.json is not None:
        args.json.write_text(json.dumps(record, indent=2))
    return 0


def arms(args: argparse.Namespace, rate: float) -> dict[str, dict[str, Any]]:
    """The ``checkpoint`` block of each arm."""
    return {"short": {"interval_steps": args.short}, "long": {"interval_steps": args.long},
            "auto": {"interval": "auto", "failures_per_node_hour": round(rate, 6)}}


def analyse(record: dict[str, Any], args: argparse.Namespace) -> None:
    """Each arm's interval in training seconds, its plans (from the warm-up's costs and from its
    own) and its replay, then a table per seed and the means over the seeds."""
    warm, rate = record["warmup"], record["rate"]
    for round_ in record["rounds"]:
        for name, ckpt in arms(args, rate).items():
            plan_arm(round_["arms"][name], ckpt, name, warm, rate)
        print_table(round_["arms"], warm, rate, round_["seed"], args)
    print_means(record["rounds"])


def plan_arm(got: dict[str, Any], ckpt: dict[str, Any], name: str, warm: dict[str, Any],
             rate: float) -> None:
    """Add the plans and the replay of one arm's job to ``got``."""
    interval_s = (got["chosen_interval_s"][-1] if name == "auto" and got["chosen_interval_s"]
                  else ckpt.get("interval_steps", 0) * warm["step_s"])
    got["interval_s"] = interval_s
    hours = got["held_s"] / 3600.0
    got["plan"] = plan(warm["job_id"], rate, interval_s, hours)
    # The same model with this arm's own measured costs: tells the model's error apart from
    # costs that differ between the warm-up and the arm.
    got["plan_own_costs"] = plan(got["job_id"], rate, interval_s, hours)
    # At the failures this arm met (its kills over its held time): a Poisson count scatters
    # by its square root, so one job's count is not the rate.
    got["realized_rate"] = realized_rate(got["kills"], got["held_s"])
    got["plan_realized_rate"] = plan(warm["job_id"], got["realized_rate"], interval_s, hours)
    # At the very kill times it met, with its own costs and step time: the model without the
    # draw. Where a kill lands against the saves decides what it loses, so a few per cent of
    # step time moves a kill near a save across it: only the arm's own figures will do.
    # Kill times count from the arm's first step, which the model places after one start-up.
    inputs = got["plan_own_costs"]["inputs"]
    names = {f.name for f in fields(GoodputInputs)}
    model = GoodputInputs(**{k: v for k, v in inputs.items() if k in names})
    own_interval_s = (interval_s if name == "auto"
                      else ckpt.get("interval_steps", 0) * got["step_s"])
    got["replay"] = replay(model, own_interval_s,
                           [model.startup_s + t for t in got["kill_times_s"]])


def realized_rate(kills: int, held_s: float) -> float:
    """Failures per node-hour one job met: its kills over its held node-hours (``NODES``
    nodes). A job with no kill gets a tenth of one over its held time (the plan needs a rate
    above 0)."""
    return max(kills, 0.1) * 3600.0 / (max(held_s, 1.0) * NODES)


def replan(path: Path) -> int:
    """``--replan FILE``: the figures and plans again from the jobs a ``--json`` run recorded
    (their ledgers and logs must still be there), without running them again. A file of one
    seed from before ``--seeds`` is read as one round."""
    record = json.loads(path.read_text())
    if "arms" in record:
        record["rounds"] = [{"seed": record["args"].pop("seed", 0),
                             "arms": record.pop("arms")}]
        record["args"]["seeds"] = [record["rounds"][0]["seed"]]
    args = argparse.Namespace(**record["args"])
    record["warmup"] = job_figures(record["warmup"]["job_id"], record["warmup"]["kill_times_s"])
    for round_ in record["rounds"]:
        for name, got in round_["arms"].items():
            round_["arms"][name] = job_figures(got["job_id"], got["kill_times_s"])
    analyse(record, args)
    return 0


def _chosen(steps: list[int]) -> str:
    """auto's chosen intervals: ``auto 16 .. 11 (6)``: the first, the last, how many."""
    if not steps:
        return "auto (none chosen)"
    return f"auto {steps[0]} .. {steps[-1]} ({len(steps)})"


def print_table(results: dict[str, Any], warm: dict[str, Any], rate: float, seed: int,
                args: argparse.Namespace) -> None:
    """Predicted against measured for one seed, one column per arm, then the goals."""
    costs = next(iter(results.values()))["plan"]["inputs"]
    print(f"\nwarm-up job {warm['job_id']}: mean step {warm['step_s']:.3f} s; measured save "
          f"{costs['save_s']:.3f} s, restart {costs['restart_s']:.1f} s, start-up "
          f"{costs['startup_s']:.1f} s; failures injected: mean gap {args.mtbf_s:g} s "
          f"({rate:.1f} per node-hour on {NODES} nodes), seed {seed}")
    names = list(results)

    def row(label: str, values: list[Any]) -> None:
        print(f"  {label:34}" + "".join(f"{v!s:>22}" for v in values))

    print()
    row("", names)
    row("job", [results[n]["job_id"] for n in names])
    row("interval (steps)", [
        _chosen(results[n]["chosen_interval_steps"]) if n == "auto"
        else args.short if n == "short" else args.long for n in names])
    row("interval (training s)", [f"{results[n]['interval_s']:.2f}" for n in names])
    row("kills", [results[n]["kills"] for n in names])
    row("held s", [f"{results[n]['held_s']:.0f}" for n in names])
    row("step s / start-up s per start", [
        f"{results[n]['step_s']:.3f} / {results[n]['startup_s_per_start']:.1f}" for n in names])
    row("checkpointing s / lost s", [
        f"{results[n]['checkpointing_s']:.1f} / {results[n]['lost_s']:.1f}" for n in names])
    measured = {n: results[n]["goodput"] for n in names}
    closed = {n: results[n]["plan"]["closed_form"]["goodput"] for n in names}
    sim = {n: results[n]["plan"]["simulation"] for n in names}
    row("measured goodput", [f"{measured[n]:.3f}" for n in names])
    row("plan: closed form", [f"{closed[n]:.3f}" for n in names])
    row("plan: simulation mean", [f"{sim[n]['goodput']:.3f}" for n in names])
    row("plan: simulation p05-p95", [
        f"{sim[n]['goodput_p05']:.3f}-{sim[n]['goodput_p95']:.3f}" for n in names])
    row("|simulation - measured|", [f"{abs(sim[n]['goodput'] - measured[n]):.3f}"
                                    for n in names])
    own = {n: results[n]["plan_own_costs"]["simulation"]["goodput"] for n in names}
    row("plan from the arm's own costs", [f"{own[n]:.3f}" for n in names])
    met = {n: results[n]["plan_realized_rate"]["simulation"]["goodput"] for n in names}
    row("failures met (per node-hour)", [f"{results[n]['realized_rate']:.1f}" for n in names])
    row("plan at the failures met", [f"{met[n]:.3f}" for n in names])
    row("|plan at the failures met - measured|", [f"{abs(met[n] - measured[n]):.3f}"
                                                  for n in names])
    rep = {n: results[n]["replay"] for n in names}
    row("replay at the kills met, own costs", [f"{rep[n]['goodput']:.3f}" for n in names])
    row("replay: lost s / restarts s", [
        f"{rep[n]['lost_work']:.1f} / {rep[n]['restarts']:.1f}" for n in names])
    row("|replay - measured| (the model's)", [f"{abs(rep[n]['goodput'] - measured[n]):.3f}"
                                              for n in names])
    row("|own-cost plan - replay| (the draw's)", [
        f"{abs(own[n] - rep[n]['goodput']):.3f}" for n in names])
    best_fixed = max(measured["short"], measured["long"])
    print(f"\nauto - better fixed arm: {measured['auto'] - best_fixed:+.3f} "
          f"({verdict(measured['auto'] - best_fixed, -GOAL_AUTO_MARGIN, at_least=True)})")
    for n in names:
        err = abs(sim[n]["goodput"] - measured[n])
        err_met = abs(met[n] - measured[n])
        print(f"prediction error, {n}: {err:.3f} at the injected rate "
              f"({verdict(err, GOAL_PREDICTION, at_least=False)}); {err_met:.3f} at the "
              f"failures the arm met ({verdict(err_met, GOAL_PREDICTION, at_least=False)})")


def print_means(rounds: list[dict[str, Any]]) -> None:
    """Over the seeds, per arm: the mean measured goodput, the mean plan (at the injected rate,
    at the failures met) and replay, and the goal on the means."""
    names = list(rounds[0]["arms"])

    def mean(name: str, pick) -> float:
        return statistics.fmean(pick(r["arms"][name]) for r in rounds)

    print(f"\nmeans over {len(rounds)} seed(s) ({', '.join(str(r['seed']) for r in rounds)}):")
    for n in names:
        measured = mean(n, lambda a: a["goodput"])
        planned = mean(n, lambda a: a["plan"]["simulation"]["goodput"])
        met = mean(n, lambda a: a["plan_realized_rate"]["simulation"]["goodput"])
        replayed = mean(n, lambda a: a["replay"]["goodput"])
        err = abs(planned - measured)
        print(f"  {n}: measured {measured:.3f}; plan {planned:.3f} (error {err:.3f}, "
              f"{verdict(err, GOAL_PREDICTION, at_least=False)}); plan at the failures met "
              f"{met:.3f} (error {abs(met - measured):.3f}); replay {replayed:.3f} "
              f"(error {abs(replayed - measured):.3f})")
    auto = statistics.fmean(r["arms"]["auto"]["goodput"] for r in rounds)
    best = max(statistics.fmean(r["arms"][n]["goodput"] for r in rounds)
               for n in ("short", "long"))
    print(f"  auto - better fixed arm, means: {auto - best:+.3f} "
          f"({verdict(auto - best, -GOAL_AUTO_MARGIN, at_least=True)})")


if __name__ == "__main__":
    sys.exit(main())
