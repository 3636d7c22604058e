"""The :class:`~hpcflow.runtime.run.Run` side of ``checkpoint.interval: auto``: build the
:class:`~hpcflow.runtime.auto_interval.AutoInterval` from the settings, and after the warm-up
save choose the interval on rank 0, broadcast it (one collective, at the same step on every
rank), append the ``interval_chosen`` ledger event and log the choice."""

from __future__ import annotations

import time
from pathlib import Path

import hpcflow.protocol as P
from hpcflow.runtime import dist as hdist
from hpcflow.runtime.auto_interval import AutoInterval, append_event, last_step_end
from hpcflow.runtime.env import DistEnv
from hpcflow.runtime.lines import log
from hpcflow.runtime.runconfig import RunConfig


def make_auto(env: DistEnv, config: RunConfig) -> AutoInterval | None:
    """An :class:`AutoInterval` when ``HPCFLOW_CHECKPOINT_INTERVAL=auto`` and checkpoints are
    on, else None. Nodes: world size over ranks per node. Rate: ``config``'s, else
    :data:`hpcflow.protocol.DEFAULT_FAILURES_PER_NODE_HOUR` (the spec's default too)."""
    if not config.checkpoint_interval_auto or config.checkpoint_dir is None:
        return None
    rate = config.failures_per_node_hour
    nodes = max(1, env.world_size // max(1, env.local_world_size))
    return AutoInterval(P.DEFAULT_FAILURES_PER_NODE_HOUR if rate is None else rate, nodes,
                        restarted=env.restart_count > 0)


def interval_saved(auto: AutoInterval, env: DistEnv, step: int, blocked_s: float, *,
                   run_dir: Path | None, started_wall: float,
                   first_step_wall: float | None) -> None:
    """After the interval save of ``step`` that blocked ``blocked_s`` seconds (collective the
    first time, after the warm-up: rank 0's choice is broadcast).

    Args:
        auto: the run's interval (:func:`make_auto`); it takes the choice.
        env: this rank's place in the job (rank 0 chooses, logs and records).
        step: the step just saved.
        blocked_s: seconds the save blocked the loop.
        run_dir: the job's run directory, whose ledger gets ``interval_chosen`` (None: none).
        started_wall, first_step_wall: Unix times of the program's start and of its first
            step (:func:`restart_cost`).
    """
    if auto.interval_steps:
        auto.saved(step)
        return
    event = None
    if env.is_rank0:
        event = auto.choose(step, blocked_s, restart_cost(
            auto, run_dir=run_dir, started_wall=started_wall, first_step_wall=first_step_wall))
    event = hdist.broadcast_object(event)
    auto.apply(step, int(event["interval_steps"]))
    if not env.is_rank0:
        return
    log(env, f"checkpoint interval: every {event['interval_steps']} steps ({event['reason']}:"
             f" save {event['save_s']:.3f} s, step {event['step_time_s']:.3f} s, MTBF "
             f"{event['mtbf_s']} s; expected goodput {event['expected_goodput']:.3f})")
    if run_dir is not None:
        record = {"event": P.EVENT_INTERVAL_CHOSEN, "time": round(time.time(), 3),
                  "job_id": env.job_id or "", "restart": env.restart_count, **event}
        try:
            append_event(P.ledger_path(run_dir), record)
        except OSError as exc:  # the ledger is a record: training goes on without it
            log(env, f"could not append {P.EVENT_INTERVAL_CHOSEN} to the ledger: {exc}")


def restart_cost(auto: AutoInterval, *, run_dir: Path | None, started_wall: float,
                 first_step_wall: float | None) -> float | None:
    """Seconds this program start cost before its first step: after a restart, from the
    ledger's last ``step_end`` before the program started (``started_wall``); else from the
    program's start (a lower bound). None before the first step (``first_step_wall``)."""
    if first_step_wall is None:
        return None
    began = first_step_wall - (auto.step_times[0] if auto.step_times else 0.0)
    if auto.restarted and run_dir is not None:
        ended = last_step_end(P.ledger_path(run_dir), started_wall)
        if ended is not None:
            return max(0.0, began - ended)
    return max(0.0, began - started_wall)
