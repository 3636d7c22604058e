"""``checkpoint.interval: auto``: the checkpoint interval chosen from measured costs. Pure: no
torch, no collectives; :class:`~hpcflow.runtime.run.Run` feeds it and broadcasts rank 0's
choice so every rank saves at the same steps.

Each program start (the first, and every one after a requeue or an in-job restart) runs a
warm-up of :data:`WARMUP_STEPS` steps and saves at its end, which measures the save cost (the
blocking part: the whole of a synchronous save, the staging of an asynchronous one). Then it
chooses the interval that maximises availability under exponential failures
(:func:`hpcflow.plan.interval.availability_optimal_interval`, docs/plan.md) with the job's MTBF
``3600 / (failures_per_node_hour * nodes)`` seconds, turns it into steps with the median step
time of the warm-up (its first step left out: compilation, allocator warm-up), and saves every
that many steps from there on. The choice and its inputs go to the ledger as
:data:`~hpcflow.protocol.EVENT_INTERVAL_CHOSEN`.

The restart cost does not move the optimum (it scales the availability); it is measured for
the expected goodput in the event: on a restart, from the end of the last step before this
program started (the ledger's last ``step_end``) to the end of this program's first step, less
that step's time; on a first start, this program's own start-up (a lower bound).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hpcflow.protocol as P
from hpcflow.ledger import append_event as append_line
from hpcflow.ledger import read_events
from hpcflow.plan.interval import availability, availability_optimal_interval

WARMUP_STEPS = 10
#: An interval too long to reach (no failures expected): only the preemption save remains.
NEVER_STEPS = 2**62
FORMULA = "availability-optimal, exponential failures (arXiv:2410.18124; docs/plan.md)"
_LEDGER_TAIL_BYTES = 1 << 20  # bounded read: the ledger's last MiB


@dataclass
class AutoInterval:
    """The interval state of one program start.

    Args:
        failures_per_node_hour: unwarned failures per node-hour (>= 0).
        nodes: nodes of the job (>= 1).
        restarted: this program start follows a failure, requeue or in-job restart.
        warmup_steps: steps before the first (measuring) save.

    Raises:
        ValueError: a negative or non-finite rate, ``nodes`` or ``warmup_steps`` below 1.
    """

    failures_per_node_hour: float
    nodes: int
    restarted: bool = False
    warmup_steps: int = WARMUP_STEPS
    interval_steps: int = 0  # 0 until chosen
    first_step: int | None = None
    last_save_step: int | None = None
    step_times: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.failures_per_node_hour) and self.failures_per_node_hour >= 0):
            raise ValueError(f"failures_per_node_hour={self.failures_per_node_hour!r} must be a "
                             "finite number >= 0")
        if self.nodes < 1 or self.warmup_steps < 1:
            raise ValueError(f"nodes={self.nodes} and warmup_steps={self.warmup_steps} must be "
                             "at least 1")

    @property
    def mtbf_s(self) -> float:
        """The job's MTBF in seconds (inf without failures)."""
        rate = self.failures_per_node_hour * self.nodes
        return math.inf if rate == 0 else 3600.0 / rate

    def observe_step(self, step: int, step_time_s: float) -> None:
        """Record a completed step and its time (seconds)."""
        if self.first_step is None:
            self.first_step = step
        if self.interval_steps == 0:
            self.step_times.append(step_time_s)

    def due(self, step: int) -> bool:
        """Whether to save after ``step``: the end of the warm-up, then every interval. The
        same on every rank, since it depends only on steps and the broadcast interval."""
        if self.first_step is None:
            return False
        if self.interval_steps == 0:
            return step - self.first_step + 1 == self.warmup_steps
        base = self.last_save_step if self.last_save_step is not None else self.first_step
        return step - base >= self.interval_steps

    def choose(self, step: int, save_s: float, restart_s: float | None) -> dict[str, Any]:
        """Choose the interval after the warm-up save of ``step`` that blocked ``save_s``.

        Returns:
            The event's fields (without ``event``, ``time``, ``job_id``, ``restart``).
        """
        times = self.step_times[1:] or self.step_times or [0.0]
        step_time = max(statistics.median(times), 1e-9)
        mtbf = self.mtbf_s
        save = max(save_s, 0.0)
        interval_s = availability_optimal_interval(save, mtbf)
        if math.isinf(interval_s):
            steps = NEVER_STEPS
        else:
            steps = max(1, round(interval_s / step_time))
        used_s = steps * step_time if steps != NEVER_STEPS else math.inf
        expected = (1.0 if math.isinf(used_s) else
                    availability(used_s, save, mtbf, recovery_s=restart_s or 0.0))
        return {
            "reason": P.INTERVAL_REASON_RESTART if self.restarted else P.INTERVAL_REASON_WARMUP,
            "step": step, "interval_steps": steps,
            "interval_s": None if math.isinf(interval_s) else round(interval_s, 3),
            "save_s": round(save, 9), "step_time_s": round(step_time, 9),
            "restart_s": None if restart_s is None else round(restart_s, 3),
            "failures_per_node_hour": self.failures_per_node_hour, "nodes": self.nodes,
            "mtbf_s": None if math.isinf(mtbf) else round(mtbf, 3),
            "formula": FORMULA, "expected_goodput": round(expected, 6),
        }

    def apply(self, step: int, interval_steps: int) -> None:
        """Adopt the chosen interval (every rank, from rank 0's broadcast)."""
        self.interval_steps = interval_steps
        self.last_save_step = step

    def saved(self, step: int) -> None:
        """An interval save of ``step`` happened."""
        self.last_save_step = step


def last_step_end(ledger: Path, before: float) -> float | None:
    """Time of the ledger's last ``step_end`` at or before ``before`` (Unix seconds), or None.

    Reads at most the ledger's last MiB through the one ledger reader
    (:func:`hpcflow.ledger.read_events`: regular files only, a FIFO in its place reads as none).
    """
    found = None
    for ev in read_events(ledger, max_bytes=_LEDGER_TAIL_BYTES):
        try:
            t = float(ev["time"])
        except (KeyError, TypeError, ValueError):
            continue
        if ev.get("event") == P.EVENT_STEP_END and t <= before:
            found = t if found is None else max(found, t)
    return found


def append_event(ledger: Path, event: dict[str, Any]) -> None:
    """Append one event (``{"event", "job_id", "restart", ...}``) through the one ledger writer
    (:func:`hpcflow.ledger.append_event`); a failed write is reported there, never raised."""
    fields = {k: v for k, v in event.items() if k not in ("event", "job_id", "restart", "time")}
    append_line(ledger, str(event["event"]), job_id=str(event.get("job_id", "")),
                restart=int(event.get("restart", 0)), **fields)
