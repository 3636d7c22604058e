"""The interval formulas and the closed-form goodput against cases worked by hand."""

from __future__ import annotations

import math

import pytest

from hpcflow.plan.goodput import GoodputInputs, predict, shares
from hpcflow.plan.interval import (
    availability,
    availability_optimal_interval,
    daly_interval,
    young_interval,
)
from hpcflow.protocol import DEFAULT_FAILURES_PER_NODE_HOUR as LLAMA3_FAILURES_PER_NODE_HOUR

DAY = 86_400.0


@pytest.mark.parametrize(("save_s", "mtbf_s", "young", "daly"), [
    # sqrt(2 * 60 * 86400) = sqrt(10,368,000) = 3219.94; Daly: d/2M = 60/172800 = 3.4722e-4,
    # sqrt = 0.018634, 1 + 0.018634/3 + 3.4722e-4/9 = 1.0062499, * 3219.94 - 60 = 3180.06.
    pytest.param(60.0, DAY, 3219.94, 3180.06, id="one-minute-save-one-day-mtbf"),
    # sqrt(2 * 300 * 3600) = sqrt(2,160,000) = 1469.69; d/2M = 1/24 = 0.041667, sqrt = 0.204124,
    # 1 + 0.068041 + 0.0046296 = 1.0726706, * 1469.69 - 300 = 1276.50.
    pytest.param(300.0, 3600.0, 1469.69, 1276.50, id="five-minute-save-one-hour-mtbf"),
])
def test_young_and_daly_match_hand_worked_values(save_s, mtbf_s, young, daly):
    assert young_interval(save_s, mtbf_s) == pytest.approx(young, abs=0.01)
    assert daly_interval(save_s, mtbf_s) == pytest.approx(daly, abs=0.01)


def test_daly_is_the_mtbf_once_the_save_costs_twice_the_mtbf():
    assert daly_interval(2000.0, 1000.0) == 1000.0


def test_the_availability_optimum_solves_its_stationarity_condition():
    save_s, mtbf_s = 120.0, 7200.0
    t = availability_optimal_interval(save_s, mtbf_s)
    u = t / mtbf_s
    assert (1 - u) * math.exp(u + save_s / mtbf_s) == pytest.approx(1.0, abs=1e-12)
    # and it is a maximum: a step either side gives less
    best = availability(t, save_s, mtbf_s, recovery_s=60)
    assert best > availability(t * 0.9, save_s, mtbf_s, recovery_s=60)
    assert best > availability(t * 1.1, save_s, mtbf_s, recovery_s=60)


@pytest.mark.parametrize("ratio", [pytest.param(1e-6, id="1e-6"), pytest.param(1e-4, id="1e-4"),
                                   pytest.param(1e-2, id="1e-2")])
def test_small_saves_make_the_three_formulas_agree(ratio):
    mtbf_s = 100_000.0
    save_s = ratio * mtbf_s
    opt = availability_optimal_interval(save_s, mtbf_s)
    young = young_interval(save_s, mtbf_s)
    # Young is first order: off by about 2d/3; Daly is second order: off by O(d^1.5 / M^0.5).
    assert abs(opt - young) == pytest.approx(2 * save_s / 3, rel=0.2)
    assert abs(opt - daly_interval(save_s, mtbf_s)) < 0.05 * save_s


def test_recovery_and_detection_scale_availability_but_do_not_move_its_optimum():
    args = (900.0, 60.0, 20_000.0)
    plain = availability(*args)
    slow = availability(*args, recovery_s=600.0, detection_s=300.0)
    assert slow == pytest.approx(plain * 20_000.0 / 20_900.0)


def test_no_failures_leaves_start_up_and_saves():
    # 10 h held, 600 s start-up, 1800 s of training per 60 s save:
    # (36000 - 600) / 36000 * 1800 / 1860 = 0.983333 * 0.967742 = 0.951613
    pred = predict(GoodputInputs(nodes=2, gpus_per_node=8, hours=10, failures_per_node_hour=0,
                                 save_s=60, restart_s=300, startup_s=600, interval_s=1800))
    assert pred.goodput == pytest.approx(0.951613, abs=1e-6)
    assert pred.gpu_hours["total"] == 160
    assert pred.gpu_hours["startups"] == pytest.approx(16 * 600 / 3600)
    assert pred.gpu_hours["lost_work"] == 0 and pred.gpu_hours["restarts"] == 0
    assert pred.expected_failures == 0


def test_failures_with_free_saves_and_restarts_lose_half_an_interval_each():
    # MTBF 10 h, 1800 s interval, nothing else: E = 36000 * (e^0.05 - 1) = 1845.76 s per segment,
    # useful 1800 / 1845.76 = 0.975208 (first order: 1 - 1800 / 72000 = 0.975).
    frac = shares(1800.0, 0.0, 36_000.0, 0.0, 0.0)
    assert frac["useful"] == pytest.approx(0.975208, abs=1e-6)
    assert frac["lost_work"] == pytest.approx(1 - 0.975208, abs=1e-6)


def test_the_shares_add_up_and_gpu_hours_add_up_to_the_total():
    pred = predict(GoodputInputs(nodes=64, gpus_per_node=8, hours=72,
                                 failures_per_node_hour=1e-3, save_s=45, restart_s=240,
                                 startup_s=300, detection_s=30))
    parts = sum(v for k, v in pred.gpu_hours.items() if k != "total")
    assert parts == pytest.approx(pred.gpu_hours["total"])
    assert pred.interval_source == "availability-optimal"
    assert pred.interval_s == pytest.approx(pred.intervals_s["availability_optimal"])
    # 64 nodes at 1e-3 per node-hour: MTBF 3600 / 0.064 = 56,250 s; failures ~ 72 h * 0.064
    assert pred.mtbf_s == pytest.approx(56_250.0)
    assert pred.expected_failures == pytest.approx(72 * 0.064, rel=0.05)


def test_the_default_failure_rate_is_llama3s_unexpected_interruptions():
    # 419 in 54 days on 16,384 GPUs = 2,048 nodes of 8: 1.58e-4 per node-hour.
    assert LLAMA3_FAILURES_PER_NODE_HOUR == pytest.approx(1.5786e-4, rel=1e-3)


@pytest.mark.parametrize(("field", "value"), [
    pytest.param("nodes", 0, id="no-nodes"),
    pytest.param("hours", -1.0, id="negative-hours"),
    pytest.param("hours", math.nan, id="nan-hours"),
    pytest.param("save_s", math.inf, id="infinite-save"),
    pytest.param("interval_s", 0.0, id="zero-interval"),
])
def test_invalid_inputs_are_named(field, value):
    base = {"nodes": 1, "gpus_per_node": 8, "hours": 1.0, "failures_per_node_hour": 1e-3,
            "save_s": 10.0, "restart_s": 1.0, "startup_s": 1.0}
    inputs = GoodputInputs(**{**base, field: value})
    with pytest.raises(ValueError, match=f"^{field}: "):
        predict(inputs)


def test_the_formulas_the_runtime_uses_import_only_math():
    import ast
    from pathlib import Path

    import hpcflow.plan

    folder = Path(hpcflow.plan.__file__).parent
    for name in ("interval.py", "goodput.py"):
        tree = ast.parse((folder / name).read_text())
        mods = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        mods |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert {m for m in mods if m.startswith("hpcflow")} <= {"hpcflow.plan.interval"}, name
