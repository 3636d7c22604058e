"""MaxWaitTimeInSeconds of a managed spot job from its time limit and the planner's expected
spot interruptions: the formula of hpcflow/plan/spot_wait.py against cases worked by hand."""

from __future__ import annotations

import math

import pytest

from hpcflow.plan.spot_wait import (
    MAX_INTERRUPTIONS,
    MAX_WAIT_S,
    SPOT_INTERRUPTIONS_PER_NODE_HOUR,
    poisson_quantile,
    spot_max_wait,
)

H = 3600


def _cdf(mean: float, k: int) -> float:
    return sum(math.exp(-mean) * mean**i / math.factorial(i) for i in range(k + 1))


@pytest.mark.parametrize(("mean", "k"), [
    pytest.param(0.0, 0, id="no-interruptions"),
    pytest.param(0.05, 0, id="cdf0-0.951"),        # exp(-0.05) = 0.9512
    pytest.param(0.3, 1, id="cdf1-0.963"),         # 0.7408 + 0.2222 = 0.9631
    pytest.param(5.0, 9, id="cdf8-0.932-cdf9-0.968"),
    pytest.param(800.0, 847, id="large-mean-no-underflow"),  # normal: 800 + 1.645 * 28.3
])
def test_poisson_quantile(mean, k):
    assert poisson_quantile(mean, 0.95, 10_000) == k
    if 0 < mean < 100:
        assert _cdf(mean, k) >= 0.95 > (_cdf(mean, k - 1) if k else 0)


def test_the_quantile_stops_at_its_cap():
    assert poisson_quantile(800.0, 0.95, 100) == 100


# rate r = 0.2 / 730 per node-hour; lam = nodes * hours * r
@pytest.mark.parametrize(("nodes", "hours", "k", "wait_h"), [
    pytest.param(2, 10, 1, 20, id="small-job-at-least-one"),        # lam 0.0055
    pytest.param(16, 72, 1, 144, id="16-nodes-3-days"),              # lam 0.316, cdf(1)=0.959
    pytest.param(64, 240, 8, 2160, id="64-nodes-10-days"),           # lam 4.21
    pytest.param(128, 672, 32, 33 * 672, id="128-nodes-28-days"),    # lam 23.6
    pytest.param(2048, 672, MAX_INTERRUPTIONS, 101 * 672, id="capped-at-100"),
])
def test_spot_max_wait_table(nodes, hours, k, wait_h):
    wait = spot_max_wait(hours * H, nodes)
    assert wait.interruptions == k
    assert wait.max_wait_s == wait_h * H >= hours * H
    assert wait.expected == pytest.approx(nodes * hours * 0.2 / 730)


def test_never_below_the_run_time_and_never_above_the_services_integer():
    assert spot_max_wait(1, 1, 0.0).max_wait_s == 2  # one interruption allowed at least
    assert spot_max_wait(30_000_000, 1, 1.0).max_wait_s == MAX_WAIT_S


def test_the_default_rate_is_twenty_percent_a_month():
    assert SPOT_INTERRUPTIONS_PER_NODE_HOUR * 730 == pytest.approx(0.20)


@pytest.mark.parametrize(("args", "message"), [
    pytest.param((0, 2), "must be at least 1", id="no-time"),
    pytest.param((3600, 0), "must be at least 1", id="no-nodes"),
    pytest.param((3600, 2, -1.0), "interruptions_per_node_hour", id="negative-rate"),
    pytest.param((3600, 2, math.nan), "interruptions_per_node_hour", id="nan-rate"),
])
def test_bad_input_is_refused_naming_it(args, message):
    with pytest.raises(ValueError, match=message):
        spot_max_wait(*args)
