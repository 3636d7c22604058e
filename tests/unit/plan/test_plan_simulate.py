"""The seeded simulation agrees with the closed form where the closed form holds, and parts
from it where it does not."""

from __future__ import annotations

import random

import pytest

from hpcflow.plan.goodput import GoodputInputs, predict
from hpcflow.plan.simulate import replay, simulate


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


def _small(**over):
    """100 s on one GPU: save 1 s, restart 5 s, start-up 10 s (worked by hand below)."""
    base = {"nodes": 1, "gpus_per_node": 1, "hours": 100 / 3600, "failures_per_node_hour": 0.0,
            "save_s": 1.0, "restart_s": 5.0, "startup_s": 10.0}
    return GoodputInputs(**{**base, **over})


@pytest.mark.parametrize("failures, want", [
    # start-up 0-10; train 10-30, save 30-31; train 31-45 lost at the failure; restart 45-50;
    # train 50-70, save; 71-91, save; 92-100 kept by the deadline save.
    pytest.param([45.0], {"useful": 68, "checkpointing": 3, "lost_work": 14, "restarts": 5,
                          "startups": 10, "failures": 1}, id="one-failure-mid-segment"),
    # a second failure 2 s into the restart starts it over (47-52): train 52-72, 73-93, 94-100
    pytest.param([47.0, 45.0], {"useful": 66, "checkpointing": 3, "lost_work": 14,
                                "restarts": 7, "startups": 10, "failures": 2},
                 id="a-failure-during-the-restart"),
    # at 5 s into the start-up: a restart (5-10) instead of the rest of it; then as without one
    pytest.param([5.0], {"useful": 86, "checkpointing": 4, "lost_work": 0,
                         "restarts": 5, "startups": 5, "failures": 1}, id="during-the-start-up"),
    # none before the end: train 10-30, 31-51, 52-72, 73-93 (a save after each), 94-100
    pytest.param([150.0], {"useful": 86, "checkpointing": 4, "lost_work": 0, "restarts": 0,
                           "startups": 10, "failures": 0}, id="after-the-end"),
])
def test_a_replay_spends_each_second_as_worked_by_hand(failures, want):
    got = replay(_small(), 20.0, failures)
    assert {k: got[k] for k in want} == pytest.approx(want)
    assert got["goodput"] == pytest.approx(want["useful"] / 100)


def test_one_simulated_job_is_a_replay_of_its_own_draws():
    """The simulation draws each gap from the failure before (a Poisson process): its one-run
    answer equals the replay of the same seeded draws, so the two share one model."""
    inputs = _inputs(hours=20.0, failures_per_node_hour=0.5)
    rng, times, t = random.Random(11), [], 0.0
    while t < inputs.hours * 3600:
        t += rng.expovariate(inputs.failures_per_node_hour * inputs.nodes / 3600)
        times.append(t)
    sim = simulate(inputs, 1800.0, runs=1, seed=11)
    assert replay(inputs, 1800.0, times)["goodput"] == pytest.approx(sim.goodput, abs=1e-12)
    assert sim.failures > 10


@pytest.mark.parametrize("bad", [[-1.0], [float("nan")], [float("inf")]])
def test_a_replay_refuses_a_failure_time_that_is_not_seconds(bad):
    with pytest.raises(ValueError, match="failure_times_s: .* is not allowed; give seconds"):
        replay(_small(), 20.0, bad)
