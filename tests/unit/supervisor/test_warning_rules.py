"""The warning's and the deadline's rules, table by table (hpcflow.supervisor.warning)."""

from __future__ import annotations

import pytest

from hpcflow.supervisor.warning import (
    MIRROR_RESERVE_S,
    at_deadline,
    deadline,
    end_time_moved,
    mirror_budget_s,
    on_warning,
    slurm_view,
    stop_timer,
)

NOW = 10_000


@pytest.mark.parametrize(("current", "notice", "end", "expected"), [
    pytest.param(1000, None, None, 1000, id="nothing-new"),
    pytest.param(1000, 900, None, 900, id="notice-earlier"),
    pytest.param(1000, None, 700, 700, id="slurm-moved-end-time"),
    pytest.param(1000, 1200, 1100, 1000, id="never-later"),
    pytest.param(1000, None, 0, 1000, id="unknown-end-time"),
])
def test_the_deadline_is_the_earliest_known(current, notice, end, expected):
    assert deadline(current, notice_s=notice, end_time_s=end) == expected


def warn(**over):  # noqa: ANN003, ANN201
    args = dict(protocol="auto", launcher="srun", signal="USR1", joined=4, ntasks=4,
                step_running=True)
    args.update(over)
    return on_warning(**args)


# (overrides, flag, forward): the flag for every program on the protocol, the forward only once
# every rank has a handler for the signal, on srun.
@pytest.mark.parametrize(("over", "flag", "forward"), [
    pytest.param({}, True, True, id="all-joined-forwarded"),
    pytest.param({"joined": 3}, True, False, id="one-rank-not-joined-flag-only"),
    pytest.param({"joined": 0}, True, False, id="unaware-program"),
    pytest.param({"step_running": False}, True, False, id="before-srun"),
    pytest.param({"launcher": "torchrun"}, True, False, id="torchrun-polls-the-flag"),
    pytest.param({"protocol": "requeue"}, False, False, id="protocol-requeue"),
])
def test_the_warning_plan(over, flag, forward):
    plan = warn(**over)
    assert (plan.flag, plan.forward) == (flag, forward)
    text = "\n".join(plan.log)
    assert ("not forwarded" in text) == (flag and not forward)
    assert ("program.protocol is requeue" in text) == (not flag)


def test_a_warning_not_forwarded_says_how_many_ranks_joined():
    assert "USR2 not forwarded: 1 of 4 rank(s) joined the protocol" in "\n".join(
        warn(joined=1, signal="USR2").log)


def timer(**over):  # noqa: ANN003, ANN201
    args = dict(protocol="auto", joined=4, timer_armed=False, old_deadline_s=NOW + 120,
                deadline_s=NOW + 120, now_s=NOW, margin_s=30)
    args.update(over)
    return stop_timer(**args)


# (overrides, timer_s): started at the first warning, restarted only when the deadline moved
# earlier, never negative.
@pytest.mark.parametrize(("over", "timer_s"), [
    pytest.param({}, 90, id="first-warning"),
    pytest.param({"timer_armed": True}, None, id="second-warning-keeps-timer"),
    pytest.param({"timer_armed": True, "deadline_s": NOW + 60}, 30, id="moved-deadline-restarts"),
    pytest.param({"timer_armed": True, "old_deadline_s": NOW + 60}, None,
                 id="a-later-deadline-keeps-timer"),
    pytest.param({"deadline_s": NOW + 10}, 0, id="margin-already-passed"),
])
def test_the_stop_timer(over, timer_s):
    assert timer(**over).timer_s == timer_s


@pytest.mark.parametrize(("over", "words"), [
    pytest.param({}, None, id="joined-nothing-to-say"),
    pytest.param({"joined": 0}, "no rank has joined the protocol: the program is stopped in 90 s "
                 "(30 s before the deadline) unless it joins first", id="unaware"),
    pytest.param({"protocol": "requeue"}, "the program is stopped in 90 s (30 s before the "
                 "deadline), then the job is requeued", id="requeue-only"),
    pytest.param({"joined": 0, "timer_armed": True}, None, id="kept-timer-says-nothing"),
])
def test_the_stop_timer_says_when(over, words):
    log = timer(**over).log
    assert log == ((words,) if words else ())


@pytest.mark.parametrize(("protocol", "joined", "running", "action"), [
    pytest.param("auto", 2, True, "wait", id="joined-ranks-checkpoint"),
    pytest.param("auto", 0, True, "stop", id="unaware-is-stopped"),
    pytest.param("requeue", 2, True, "stop", id="requeue-only-is-stopped-even-if-joined"),
    pytest.param("auto", 0, False, "none", id="no-step"),
    pytest.param("auto", 1, False, "wait", id="joined-without-step-still-waits"),
])
def test_at_the_deadline(protocol, joined, running, action):
    got = at_deadline(protocol=protocol, joined=joined, step_running=running)
    assert got.action == action
    assert bool(got.log) == (action != "none")


@pytest.mark.parametrize(("deadline_s", "budget"), [
    pytest.param(NOW + 100, 100 - MIRROR_RESERVE_S, id="time-left"),
    pytest.param(NOW + MIRROR_RESERVE_S, 0, id="reserve-only"),
    pytest.param(NOW - 50, 0, id="past-never-negative"),
])
def test_the_mirror_drains_until_the_reserve(deadline_s, budget):
    assert mirror_budget_s(deadline_s, NOW) == budget


# ---- what Slurm is doing to the job ------------------------------------------------------------
DEADLINE = 10_000


@pytest.mark.parametrize(("state", "reason", "end", "terminated", "view"), [
    pytest.param("RUNNING", "None", DEADLINE, False, (False, False, False), id="running"),
    pytest.param("RUNNING", "None", DEADLINE - 600, False, (False, False, True),
                 id="end-time-moved-is-slurms-preemption"),
    pytest.param("RUNNING", "None", DEADLINE - 3, False, (False, False, False),
                 id="a-few-seconds-is-rounding"),
    pytest.param("COMPLETING", "None", 1_000, True, (True, False, False),
                 id="scancel-seen-as-completing-with-term"),
    pytest.param("COMPLETING", "TimeLimit", 1_000, True, (False, True, False),
                 id="time-limit"),
    pytest.param("TIMEOUT", "TimeLimit", 1_000, False, (False, True, False), id="timeout-state"),
    pytest.param("CANCELLED", "None", 1_000, False, (True, False, False), id="cancelled-state"),
    pytest.param("", "", None, True, (True, False, False),
                 id="term-while-slurm-does-not-answer"),
    pytest.param("", "", None, False, (False, False, False), id="slurm-does-not-answer"),
])
def test_slurm_view_tells_a_cancel_the_time_limit_and_a_preemption_apart(
        state, reason, end, terminated, view):
    got = slurm_view(state, reason, end, terminated=terminated, deadline_s=DEADLINE)
    assert (got.cancelled, got.time_limit, got.preempted) == view


@pytest.mark.parametrize(("end", "limit_end", "moved"), [
    pytest.param(DEADLINE - 600, DEADLINE, True, id="preemption-the-limit-stays"),
    pytest.param(DEADLINE - 600, None, True, id="preemption-limit-unknown"),
    pytest.param(DEADLINE - 600, DEADLINE - 600, False,
                 id="time-limit-shortened-by-scontrol-update"),
    pytest.param(DEADLINE - 600, DEADLINE - 602, False, id="shortened-rounding"),
    pytest.param(DEADLINE - 600, DEADLINE - 300, True,
                 id="shortened-then-preempted-before-the-new-limit"),
    pytest.param(DEADLINE, DEADLINE + 600, False, id="time-limit-lengthened"),
    pytest.param(None, DEADLINE, False, id="no-end-time"),
])
def test_a_shortened_time_limit_is_not_a_preemption(end, limit_end, moved):
    assert end_time_moved(end, deadline_s=DEADLINE, limit_end_s=limit_end) is moved
    view = slurm_view("RUNNING", "None", end, terminated=False, deadline_s=DEADLINE,
                      limit_end_s=limit_end)
    assert view.preempted is moved
