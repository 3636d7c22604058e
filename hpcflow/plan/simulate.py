"""A seeded Monte-Carlo simulation of the goodput model, failures anywhere. Pure.

Same job as :mod:`hpcflow.plan.goodput` (start-up, segments of training then a blocking save,
Poisson failures, detection and restart after each), but failures may also strike during the
start-up, the detection wait and a restart (each then starts over), and the job ends at its
wall time: the work of an unfinished segment counts as useful, because hpcflow saves it on the
deadline warning (docs/protocol.md). The closed form leaves both effects out, so the two agree
when restarts and start-up are short against the MTBF and the job lasts many segments.
:func:`replay` runs the same model at given failure times instead of drawn ones.

Cost: one pass per failure and per segment; 200 runs of a 720-hour job with a 2-hour MTBF and
a 30-minute interval take about 0.1 s.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hpcflow.plan.goodput import CATEGORIES, GoodputInputs


@dataclass(frozen=True)
class Simulation:
    """Monte-Carlo estimate.

    Attributes:
        runs: number of simulated jobs.
        seed: the seed of :class:`random.Random`.
        goodput: mean useful fraction of held time.
        goodput_stderr: standard error of that mean (0 with one run).
        goodput_p05, goodput_p95: 5th and 95th percentiles over the runs.
        gpu_hours: mean GPU-hours per category (:data:`~hpcflow.plan.goodput.CATEGORIES`).
        failures: mean failures per job.
    """

    runs: int
    seed: int
    goodput: float
    goodput_stderr: float
    goodput_p05: float
    goodput_p95: float
    gpu_hours: dict[str, float]
    failures: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dict(self.__dict__)


def simulate(inputs: GoodputInputs, interval_s: float, *, runs: int = 200,
             seed: int = 0) -> Simulation:
    """Simulate ``runs`` jobs of ``inputs`` with ``interval_s`` training seconds between saves.

    Raises:
        ValueError: an invalid input, ``interval_s`` not above 0, or ``runs`` below 1.
    """
    if problems := inputs.problems():
        raise ValueError("; ".join(problems))
    if not (math.isfinite(interval_s) and interval_s > 0):
        raise ValueError(f"interval_s={interval_s!r} must be a number of seconds above 0")
    if runs < 1:
        raise ValueError(f"runs={runs} must be at least 1")
    rng = random.Random(seed)
    rate = inputs.failures_per_node_hour * inputs.nodes / 3600.0

    def next_failure(t: float) -> float:
        return t + rng.expovariate(rate) if rate > 0 else math.inf

    results = [_one_job(next_failure, inputs, interval_s) for _ in range(runs)]
    wall = inputs.hours * 3600.0
    goodputs = sorted(r[0]["useful"] / wall for r in results)
    gpus = inputs.nodes * inputs.gpus_per_node
    mean_s = {k: statistics.fmean(r[0][k] for r in results) for k in CATEGORIES}
    stderr = statistics.stdev(goodputs) / math.sqrt(runs) if runs > 1 else 0.0
    return Simulation(runs, seed, statistics.fmean(goodputs), stderr,
                      goodputs[int(0.05 * (runs - 1))], goodputs[int(0.95 * (runs - 1))],
                      {k: gpus * v / 3600.0 for k, v in mean_s.items()},
                      statistics.fmean(r[1] for r in results))


def replay(inputs: GoodputInputs, interval_s: float,
           failure_times_s: list[float]) -> dict[str, float]:
    """One job of the same model, its failures at ``failure_times_s`` (seconds from the job's
    start; sorted or not) instead of drawn: what the model says a job that met exactly those
    failures spends. Against a measured job it checks the model's mechanics (work since the
    last save lost, restart and start-up costs) apart from the chance of where failures land.

    Returns:
        Seconds per category (:data:`~hpcflow.plan.goodput.CATEGORIES`), ``failures`` (those
        that struck before the end) and ``goodput`` (useful over ``inputs.hours``).

    Raises:
        ValueError: an invalid input, ``interval_s`` not above 0, or a failure time that is not
            a finite number of seconds at least 0.
    """
    if problems := inputs.problems():
        raise ValueError("; ".join(problems))
    if not (math.isfinite(interval_s) and interval_s > 0):
        raise ValueError(f"interval_s={interval_s!r} must be a number of seconds above 0")
    bad = [x for x in failure_times_s if not (math.isfinite(x) and x >= 0)]
    if bad:
        raise ValueError(f"failure_times_s: {bad[0]!r} is not allowed; give seconds >= 0")
    times = sorted(failure_times_s)

    def next_failure(t: float) -> float:
        return next((x for x in times if x > t), math.inf)

    acc, failures = _one_job(next_failure, inputs, interval_s)
    return {**acc, "failures": float(failures), "goodput": acc["useful"] / (inputs.hours * 3600)}


def _one_job(next_failure: Callable[[float], float], inputs: GoodputInputs,
             interval_s: float) -> tuple[dict[str, float], int]:
    """Seconds per category of one job, and its failure count; ``next_failure(t)`` gives the
    time of the first failure after ``t`` (``math.inf``: none)."""
    wall = inputs.hours * 3600.0
    acc = dict.fromkeys(CATEGORIES, 0.0)
    t, failures = 0.0, 0
    fail = next_failure(t)

    def run(kind: str, duration: float) -> str:
        """Spend up to ``duration`` in ``kind``: ``done``, ``failed`` or ``end``."""
        nonlocal t
        stop = min(t + duration, fail, wall)
        acc[kind] += stop - t
        outcome = "done" if stop == t + duration else ("end" if stop == wall else "failed")
        t = stop
        return outcome

    def recover(first_kind: str, first_s: float) -> str:
        """Run ``first_kind`` (start-up), or detection then restart, until it completes."""
        nonlocal fail, failures
        kind, duration = first_kind, first_s
        while True:
            outcome = run(kind, duration)
            if outcome != "failed":
                return outcome
            failures += 1
            fail = next_failure(t)
            if run("lost_work", inputs.detection_s) == "end":
                return "end"
            kind, duration = "restarts", inputs.restart_s

    if recover("startups", inputs.startup_s) == "end":
        return acc, failures
    while True:
        start_t = t
        outcome = run("useful", interval_s)
        if outcome == "done":
            outcome = run("checkpointing", inputs.save_s)
        if outcome == "end":
            return acc, failures  # the deadline save keeps the segment's work
        if outcome == "failed":
            failures += 1
            work = min(t - start_t, interval_s)
            acc["useful"] -= work
            acc["checkpointing"] -= t - start_t - work
            acc["lost_work"] += t - start_t
            fail = next_failure(t)
            if run("lost_work", inputs.detection_s) == "end" or \
                    recover("restarts", inputs.restart_s) == "end":
                return acc, failures


#: Events (failures and segments) the simulation may step through in one call: about a second.
EVENT_BUDGET = 2_000_000


def affordable_runs(inputs: GoodputInputs, interval_s: float, runs: int,
                    budget: int = EVENT_BUDGET) -> int:
    """How many of ``runs`` fit in ``budget`` events (0: not even one job fits), from the
    expected failures and segments of one job."""
    wall = inputs.hours * 3600.0
    rate = inputs.failures_per_node_hour * inputs.nodes / 3600.0
    per_job = wall * rate + wall / (interval_s + inputs.save_s) + 1
    return max(0, min(runs, int(budget // per_job)))
