"""The goodput a job should expect: closed form, lost GPU-hours split by cause. Pure.

The model (:mod:`hpcflow.plan.interval`): the job holds ``nodes`` nodes for ``hours``; it
starts once (``startup_s``), then trains in segments of ``interval_s`` followed by a blocking save
of ``save_s``. Failures arrive as a Poisson process at ``failures_per_node_hour * nodes`` per
hour; each loses the work since the last committed save, ``detection_s`` until it is noticed and
``restart_s`` until training resumes (requeue or in-job restart, checkpoint load included).

Closed form per segment, ``L = interval_s + save_s``, ``M`` the job's MTBF,
``n = exp(L/M) - 1`` failures expected per committed segment:

    useful        interval_s
    checkpointing save_s                        (the saves that committed)
    lost work     n * (M + detection_s) - L     (work and partial saves lost, detection time)
    restarts      n * restart_s
    total         (M + detection_s + restart_s) * n

It holds when the job lasts many segments, ``restart_s`` and ``startup_s`` are small against
``M`` (no failure during a restart), and failures are independent (a bad node that fails
again and again breaks that). :mod:`hpcflow.plan.simulate` drops the first two assumptions.

Default failure rate: Llama 3 pre-training saw 419 unexpected interruptions in a 54-day
snapshot on 16,384 H100 GPUs (2,048 nodes of 8), 466 with the 47 planned ones (Dubey et al.,
"The Llama 3 Herd of Models", arXiv:2407.21783, section 3.3.4, table 5).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from hpcflow.plan.interval import (
    availability_optimal_interval,
    daly_interval,
    segment_time,
    young_interval,
)

#: Where the planner's default failure rate comes from (the number itself is
#: :data:`hpcflow.protocol.DEFAULT_FAILURES_PER_NODE_HOUR`, one for the planner, the spec and the
#: runtime).
FAILURE_RATE_SOURCE = ("Llama 3 pre-training: 419 unexpected interruptions in 54 days on 2,048 "
                       "nodes of 8 H100 (Dubey et al. 2024, arXiv:2407.21783, section 3.3.4)")
_EXP_LIMIT = 700.0  # exp(700) is near the largest float; beyond it the goodput is 0 anyway
CATEGORIES = ("useful", "checkpointing", "lost_work", "restarts", "startups")


@dataclass(frozen=True)
class GoodputInputs:
    """What the prediction needs (seconds unless named otherwise).

    Attributes:
        nodes: nodes the job holds (>= 1).
        gpus_per_node: GPUs per node (>= 1).
        hours: hours the job holds them (> 0).
        failures_per_node_hour: unwarned failures per node-hour (>= 0).
        save_s: blocking seconds of one save (the blocking part of an async save).
        restart_s: seconds from a noticed failure to training again.
        startup_s: seconds from the job's start to its first step.
        detection_s: seconds from a failure to its detection (a hang timeout, say).
        interval_s: training seconds between saves; None = the availability-optimal one.
    """

    nodes: int
    gpus_per_node: int
    hours: float
    failures_per_node_hour: float
    save_s: float
    restart_s: float
    startup_s: float
    detection_s: float = 0.0
    interval_s: float | None = None

    @property
    def mtbf_s(self) -> float:
        """The job's mean time between failures, in seconds (inf without failures)."""
        rate = self.failures_per_node_hour * self.nodes
        return math.inf if rate == 0 else 3600.0 / rate

    def problems(self) -> list[str]:
        """One line per invalid field (empty when all are valid)."""
        out = []
        for name in ("nodes", "gpus_per_node"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                out.append(f"{name}: {value!r} is not allowed; give a whole number >= 1")
        if not (math.isfinite(self.hours) and self.hours > 0):
            out.append(f"hours: {self.hours!r} is not allowed; give a number of hours above 0")
        for name in ("failures_per_node_hour", "save_s", "restart_s", "startup_s",
                     "detection_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                out.append(f"{name}: {value!r} is not allowed; give a finite number >= 0")
        if self.interval_s is not None and not (math.isfinite(self.interval_s)
                                                and self.interval_s > 0):
            out.append(f"interval_s: {self.interval_s!r} is not allowed; give a number of "
                       "seconds above 0, or leave it out for the best interval")
        if self.interval_s is None and self.save_s == 0 and self.failures_per_node_hour > 0:
            out.append("save_s: 0 leaves no best interval (saving would be free, so every step "
                       "would save); give the measured save cost or an interval")
        return out


@dataclass
class GoodputPrediction:
    """The closed-form expectation for one job.

    Attributes:
        inputs: what it was computed from.
        interval_s: training seconds between saves used.
        interval_source: ``given`` or ``availability-optimal``.
        intervals_s: ``young``, ``daly`` and ``availability_optimal`` intervals, in seconds.
        mtbf_s: the job's MTBF, in seconds (inf without failures).
        goodput: useful time over held time (0..1).
        gpu_hours: GPU-hours per category (:data:`CATEGORIES`) and ``total``.
        expected_failures: failures expected over the job.
        notes: where the model is out of its depth for these inputs.
    """

    inputs: GoodputInputs
    interval_s: float
    interval_source: str
    intervals_s: dict[str, float]
    mtbf_s: float
    goodput: float
    gpu_hours: dict[str, float]
    expected_failures: float
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (infinities as None)."""
        def clean(v: Any) -> Any:
            if isinstance(v, float) and not math.isfinite(v):
                return None
            if isinstance(v, dict):
                return {k: clean(x) for k, x in v.items()}
            return v

        return clean(asdict(self))


def shares(interval_s: float, save_s: float, mtbf_s: float, restart_s: float,
           detection_s: float) -> dict[str, float]:
    """Fraction of training wall time (after the start-up) per category but ``startups``;
    the four add up to 1. See the module docstring for the expressions.

    Raises:
        ValueError: ``interval_s + save_s`` is 0.
    """
    length = interval_s + save_s
    if length <= 0:
        raise ValueError("interval_s + save_s must be above 0")
    if length / mtbf_s > _EXP_LIMIT:  # a segment far longer than the MTBF: it never commits
        down = mtbf_s + detection_s + restart_s
        return {"useful": 0.0, "checkpointing": 0.0, "lost_work": (mtbf_s + detection_s) / down,
                "restarts": restart_s / down}
    total = segment_time(length, mtbf_s, restart_s + detection_s)
    if math.isinf(mtbf_s):
        n = lost = 0.0
    else:
        n = math.expm1(length / mtbf_s)
        lost = max(0.0, n * (mtbf_s + detection_s) - length)
    return {"useful": interval_s / total, "checkpointing": save_s / total,
            "lost_work": lost / total, "restarts": n * restart_s / total}


def predict(inputs: GoodputInputs) -> GoodputPrediction:
    """The expected goodput and lost GPU-hours of ``inputs`` (closed form).

    Raises:
        ValueError: an input is invalid (:meth:`GoodputInputs.problems`, joined).
    """
    if problems := inputs.problems():
        raise ValueError("; ".join(problems))
    m = inputs.mtbf_s
    intervals = {"young": young_interval(inputs.save_s, m), "daly": daly_interval(inputs.save_s, m),
                 "availability_optimal": availability_optimal_interval(inputs.save_s, m)}
    interval, source = inputs.interval_s, "given"
    if interval is None:
        interval, source = intervals["availability_optimal"], "availability-optimal"
    if math.isinf(interval):  # no failures and no interval given: save once, at the end
        interval = inputs.hours * 3600.0
    wall_s = inputs.hours * 3600.0
    startup = min(inputs.startup_s, wall_s)
    frac = shares(interval, inputs.save_s, m, inputs.restart_s, inputs.detection_s)
    gpus = inputs.nodes * inputs.gpus_per_node
    train_h = (wall_s - startup) / 3600.0
    gpu_hours = {k: gpus * train_h * v for k, v in frac.items()}
    gpu_hours["startups"] = gpus * startup / 3600.0
    gpu_hours["total"] = gpus * inputs.hours
    # n failures per segment of (M + D + R) * n seconds: one per M + D + R of held time
    failures = 0.0 if math.isinf(m) else (wall_s - startup) / (
        m + inputs.detection_s + inputs.restart_s)
    pred = GoodputPrediction(inputs, interval, source, intervals, m,
                             gpu_hours["useful"] / gpu_hours["total"], gpu_hours, failures)
    pred.notes.extend(_notes(inputs, interval, m, wall_s))
    return pred


def _notes(inputs: GoodputInputs, interval: float, mtbf_s: float, wall_s: float) -> list[str]:
    """Where the closed form's assumptions do not hold for these inputs."""
    notes = []
    if math.isinf(mtbf_s):
        return ["no failures: the goodput is the start-up and the saves only"]
    if inputs.save_s > mtbf_s / 10:
        notes.append(f"the save cost ({inputs.save_s:g} s) is above a tenth of the MTBF "
                     f"({mtbf_s:.0f} s): the first-order formulas (Young, Daly) are off, and "
                     "the job spends much of its time failing")
    if inputs.restart_s + inputs.startup_s > mtbf_s / 10:
        notes.append("restart or start-up is above a tenth of the MTBF: failures during them, "
                     "which the closed form ignores, matter; see the simulation")
    if wall_s < 10 * (interval + inputs.save_s) or wall_s < 3 * mtbf_s:
        notes.append("the job lasts fewer than 10 intervals or 3 MTBFs: the long-run "
                     "expectation is a rough guide; see the simulation's spread")
    return notes
