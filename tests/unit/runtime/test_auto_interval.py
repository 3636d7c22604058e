"""``checkpoint.interval: auto``: the warm-up save, the interval chosen from its measured cost,
the ``interval_chosen`` ledger event, and a new choice after a restart. One process, no Slurm."""

from __future__ import annotations

import json
import math
import time

import pytest
import torch

from hpcflow import protocol as P
from hpcflow.plan.interval import availability_optimal_interval
from hpcflow.runtime import Run
from hpcflow.runtime.auto_interval import NEVER_STEPS, AutoInterval, last_step_end
from hpcflow.runtime.runconfig import RunConfig
from hpcflow.spec.job import JobSpec


def test_the_warmup_ends_with_a_save_then_the_chosen_interval_is_kept():
    auto = AutoInterval(failures_per_node_hour=0.01, nodes=2, warmup_steps=3)
    due = []
    for step in range(5, 9):  # a program that resumed at step 4
        auto.observe_step(step, 1.0)
        due.append(auto.due(step))
    assert due == [False, False, True, False]
    # MTBF 3600 / (0.01 * 2) = 180,000 s, save 10 s: sqrt(2 * 10 * 180000) - 2 * 10 / 3
    # = 1897.37 - 6.67 = 1890.7 s, at 1 s a step: 1891 steps.
    event = auto.choose(7, 10.0, restart_s=None)
    assert event["interval_steps"] == 1891 and event["mtbf_s"] == 180_000.0
    assert event["reason"] == P.INTERVAL_REASON_WARMUP
    auto.apply(7, event["interval_steps"])
    assert not auto.due(7 + 1890) and auto.due(7 + 1891)
    auto.saved(7 + 1891)
    assert auto.due(7 + 2 * 1891)


def test_the_first_step_time_is_left_out_and_no_failures_means_no_interval_saves():
    auto = AutoInterval(failures_per_node_hour=0.0, nodes=4, warmup_steps=3)
    for step, dt in ((1, 30.0), (2, 2.0), (3, 2.0)):
        auto.observe_step(step, dt)
    event = auto.choose(3, 5.0, restart_s=12.0)
    assert event["step_time_s"] == 2.0
    assert event["interval_steps"] == NEVER_STEPS and event["mtbf_s"] is None


@pytest.mark.parametrize("kwargs", [pytest.param({"failures_per_node_hour": -1.0}, id="rate"),
                                    pytest.param({"failures_per_node_hour": math.nan}, id="nan"),
                                    pytest.param({"nodes": 0}, id="nodes")])
def test_bad_settings_are_refused(kwargs):
    with pytest.raises(ValueError):
        AutoInterval(**{"failures_per_node_hour": 1e-4, "nodes": 1, **kwargs})


def test_the_settings_come_from_the_environment():
    config = RunConfig.from_environ({"HPCFLOW_CHECKPOINT_INTERVAL": "auto",
                                     "HPCFLOW_FAILURES_PER_NODE_HOUR": "0.25"})
    assert (config.checkpoint_interval_auto, config.checkpoint_interval) == (True, 0)
    assert config.failures_per_node_hour == 0.25
    with pytest.raises(ValueError, match="HPCFLOW_FAILURES_PER_NODE_HOUR='-1' must be"):
        RunConfig.from_environ({"HPCFLOW_FAILURES_PER_NODE_HOUR": "-1"})


def test_the_spec_takes_auto_and_refuses_it_beside_a_fixed_interval():
    base = {"name": "a", "time_limit": "10", "run_dir": "/tmp/r", "program": {"argv": ["true"]}}
    spec = JobSpec.model_validate({**base, "checkpoint": {"interval": "auto"}})
    assert spec.checkpoint.failures_per_node_hour == pytest.approx(1.5786e-4, rel=1e-3)
    with pytest.raises(ValueError, match="checkpoint.interval_steps"):
        JobSpec.model_validate({**base, "checkpoint": {"interval": "auto",
                                                       "interval_steps": 5}})


@pytest.mark.parametrize(("checkpoint", "interval", "steps"), [
    pytest.param(None, "auto", 0, id="no-block-auto"),
    pytest.param({"keep": 2}, "auto", 0, id="block-without-interval-auto"),
    pytest.param({"interval_steps": 0}, None, 0, id="explicit-0-only-when-preempted"),
    pytest.param({"interval_steps": 50}, None, 50, id="fixed"),
    pytest.param({"interval": None}, None, 0, id="explicit-null"),
])
def test_auto_is_the_default_unless_the_spec_gives_an_interval(checkpoint, interval, steps):
    base = {"name": "a", "time_limit": "10", "run_dir": "/tmp/r", "program": {"argv": ["true"]}}
    spec = JobSpec.model_validate({**base, **({"checkpoint": checkpoint} if checkpoint else {})})
    assert (spec.checkpoint.interval, spec.checkpoint.interval_steps) == (interval, steps)
    # The resolved spec the run directory keeps reads back the same.
    again = JobSpec.model_validate(spec.model_dump(mode="json"))
    assert (again.checkpoint.interval, again.checkpoint.interval_steps) == (interval, steps)


def test_last_step_end_reads_the_ledger_tail(tmp_path):
    ledger = tmp_path / "events.jsonl"
    ledger.write_text("\n".join([json.dumps({"event": "step_end", "time": 10}), "garbled",
                                 json.dumps({"event": "step_end", "time": 20}),
                                 json.dumps({"event": "step_end", "time": 99})]) + "\n")
    assert last_step_end(ledger, before=50) == 20
    assert last_step_end(tmp_path / "none", before=50) is None


def _environ(tmp_path):
    state = tmp_path / "run" / ".hpcflow"
    return {"HPCFLOW_RUN_DIR": str(tmp_path / "run"), "HPCFLOW_CHECKPOINT_DIR": str(tmp_path / "c"),
            "HPCFLOW_CHECKPOINT_INTERVAL": "auto", "HPCFLOW_FAILURES_PER_NODE_HOUR": "50",
            "HPCFLOW_PREEMPT_FLAG": str(state / "preempt.flag"),
            "HPCFLOW_JOINED_DIR": str(state / "joined"), "SLURM_JOB_ID": "81"}


def _train(env, steps):
    model = torch.nn.Linear(4, 2)
    state = {"model": model, "optim": torch.optim.SGD(model.parameters(), lr=0.1)}
    with Run.from_env(env) as run:
        start = run.restore(state)
        for step in range(start + 1, start + steps + 1):
            model(torch.randn(3, 4)).sum().backward()
            run.step_done(step, state)
        return run, start


def _chosen(tmp_path):
    ledger = P.ledger_path(tmp_path / "run")
    return [e for e in map(json.loads, ledger.read_text().splitlines())
            if e["event"] == P.EVENT_INTERVAL_CHOSEN]


def test_a_run_chooses_after_its_warmup_and_again_after_a_restart(tmp_path):
    env = _environ(tmp_path)
    run, _ = _train(env, 12)
    (first,) = _chosen(tmp_path)
    assert first["reason"] == P.INTERVAL_REASON_WARMUP and first["step"] == 10
    assert first["job_id"] == "81" and first["nodes"] == 1
    # 50 failures per node-hour on one node: MTBF 72 s; the interval follows from the inputs
    assert first["mtbf_s"] == 72.0
    # (the event keeps the interval to the millisecond)
    assert first["interval_s"] == pytest.approx(
        availability_optimal_interval(first["save_s"], 72.0), abs=6e-4)
    assert first["interval_steps"] * first["step_time_s"] == pytest.approx(first["interval_s"],
                                                                          rel=1e-3)
    assert run.auto.interval_steps == first["interval_steps"]
    assert run.ckpt.latest_committed() >= 10  # the warm-up save committed
    # The program dies after step 12 (the batch script records the step's end), then starts
    # again in the same run directory and resumes from the last committed save.
    ended = time.time()
    with P.ledger_path(tmp_path / "run").open("a") as fh:
        fh.write(json.dumps({"event": "step_end", "time": ended, "rc": 137}) + "\n")
    time.sleep(0.2)
    _, resumed = _train(env, 10)
    assert resumed >= 10
    first_again, second = _chosen(tmp_path)
    assert second["reason"] == P.INTERVAL_REASON_RESTART
    assert second["step"] == resumed + 10
    assert second["restart_s"] >= 0.2  # from the recorded step end to this program's first step
