"""The seeded simulation agrees with the closed form where the closed form holds, and parts
from it where it does not."""

from __future__ import annotations

import pytest

from hpcflow.plan.goodput import GoodputInputs, predict
from hpcflow.plan.simulate import simulate


def _inputs(**over):
    base = {"nodes": 4, "gpus_per_node": 8, "hours": 500.0, "failures_per_node_hour": 0.05,
            "save_s": 30.0, "restart_s": 60.0, "startup_s": 60.0}
    return GoodputInputs(**{**base, **over})


@pytest.mark.parametrize("over", [
    pytest.param({}, id="mtbf-5h-short-restarts"),
    pytest.param({"detection_s": 120.0}, id="with-detection-latency"),
    pytest.param({"interval_s": 600.0}, id="interval-too-short"),
    pytest.param({"interval_s": 14_400.0}, id="interval-too-long"),
])
def test_the_simulation_matches_the_closed_form_when_restarts_are_short(over):
    pred = predict(_inputs(**over))
    sim = simulate(pred.inputs, pred.interval_s, runs=60, seed=7)
    assert sim.goodput == pytest.approx(pred.goodput, abs=max(4 * sim.goodput_stderr, 0.003))
    assert sim.failures == pytest.approx(pred.expected_failures, rel=0.1)
    for kind in ("checkpointing", "lost_work", "restarts"):
        assert sim.gpu_hours[kind] == pytest.approx(pred.gpu_hours[kind], rel=0.15), kind


def test_without_failures_the_two_agree_to_within_one_save():
    pred = predict(_inputs(failures_per_node_hour=0.0, interval_s=1000.0))
    sim = simulate(pred.inputs, pred.interval_s, runs=3)
    assert sim.goodput_stderr == 0.0
    assert sim.goodput == pytest.approx(pred.goodput, abs=30.0 / (500 * 3600))


def test_long_restarts_break_the_closed_form_and_the_simulation_says_so():
    # restart cost half the MTBF: failures during restarts, which the closed form ignores,
    # make the real goodput lower.
    pred = predict(_inputs(failures_per_node_hour=0.1, restart_s=4500.0))
    sim = simulate(pred.inputs, pred.interval_s, runs=40, seed=1)
    assert sim.goodput < pred.goodput - 0.02
    assert any("restart" in n for n in pred.notes)


def test_the_same_seed_gives_the_same_answer_and_another_seed_another():
    pred = predict(_inputs())
    a = simulate(pred.inputs, pred.interval_s, runs=5, seed=3)
    assert a == simulate(pred.inputs, pred.interval_s, runs=5, seed=3)
    assert a.goodput != simulate(pred.inputs, pred.interval_s, runs=5, seed=4).goodput


def test_the_best_interval_beats_a_short_and_a_long_one_in_simulation():
    pred = predict(_inputs())
    best = simulate(pred.inputs, pred.interval_s, runs=40, seed=2).goodput
    assert best > simulate(pred.inputs, pred.interval_s / 8, runs=40, seed=2).goodput
    assert best > simulate(pred.inputs, pred.interval_s * 8, runs=40, seed=2).goodput
