"""The watchdog's per-section timeouts and its verdict from heartbeats (pure)."""

from __future__ import annotations

import dataclasses

import pytest

from hpcflow.watchdog.hang import (
    CLEAR,
    KILL,
    SUSPECT,
    WAIT,
    Hang,
    Timeouts,
    find_hang,
    next_action,
    section_timeout,
    step_timeout,
)

T = Timeouts(startup_s=30, checkpoint_s=20, step_floor_s=5, step_factor=3, warmup_steps=4,
             step_s=None, interval_s=1, kill_after_s=0)


def beat(section: str = "step", time: float = 100.0, step: int = 10, timed: int = 10,
         p99: float | None = 0.5, save: float = 0.0) -> dict:
    return {"section": section, "time": time, "step": step, "steps_timed": timed,
            "step_p99_s": p99, "save_max_s": save}


@pytest.mark.parametrize(("beats", "expected"), [
    pytest.param({0: beat(p99=0.5), 1: beat(p99=0.5)}, 5.0, id="floor-wins"),
    pytest.param({0: beat(p99=4.0), 1: beat(p99=1.0)}, 12.0, id="3x-largest-p99"),
    pytest.param({0: beat(timed=3, p99=4.0), 1: beat(p99=4.0)}, 30.0, id="before-warmup-startup"),
])
def test_step_timeout_is_derived_after_warmup(beats: dict, expected: float) -> None:
    assert step_timeout(beats, T) == expected


def test_fixed_step_timeout_wins() -> None:
    assert step_timeout({0: beat(p99=100.0)}, dataclasses.replace(T, step_s=7)) == 7


def test_checkpoint_timeout_covers_the_longest_save_seen() -> None:
    assert section_timeout("checkpoint", {0: beat(save=2.0)}, T) == 20
    assert section_timeout("checkpoint", {0: beat(save=10.0)}, T) == 30
    assert section_timeout("startup", {0: beat()}, T) == 30
    assert section_timeout("end", {0: beat()}, T) == 30


def test_ranks_in_time_are_not_a_hang() -> None:
    beats = {0: beat(time=100.0), 1: beat(time=96.5)}
    assert find_hang(beats, 2, now=102.0, armed_at=50.0, t=T) is None


def test_a_silent_rank_is_a_hang_and_the_lowest_step_is_named_first() -> None:
    beats = {0: beat(time=100.0, step=12), 1: beat(time=90.0, step=11),
             2: beat(time=100.0, step=12)}
    hang = find_hang(beats, 3, now=106.5, armed_at=50.0, t=T)
    assert hang is not None
    assert (hang.section, hang.ranks, hang.first, hang.step, hang.timeout_s) == (
        "step", [0, 1, 2], 1, 11, 5.0)
    hang = find_hang(beats, 3, now=100.5, armed_at=50.0, t=T)
    assert hang is not None and hang.ranks == [1] and hang.first == 1


def test_a_rank_that_never_reported_is_stale_after_startup() -> None:
    beats = {0: beat(time=100.0)}
    assert find_hang(beats, 2, now=100.0, armed_at=80.0, t=T) is None
    hang = find_hang(beats, 2, now=100.0, armed_at=60.0, t=T)
    assert hang is not None and hang.ranks == [1] and hang.section == "startup"


def test_checkpoint_section_gets_its_own_timeout() -> None:
    beats = {0: beat(section="checkpoint", time=100.0), 1: beat(time=119.0)}
    assert find_hang(beats, 2, now=120.0, armed_at=0.0, t=T) is None
    hang = find_hang(beats, 2, now=121.5, armed_at=0.0, t=T)
    assert hang is not None and (hang.section, hang.ranks) == ("checkpoint", [0])


def test_lowest_step_wins_over_the_oldest_heartbeat() -> None:
    # rank 0 wrote its last (throttled) heartbeat earlier, but rank 1 is a step behind
    beats = {0: beat(time=90.0, step=15), 1: beat(time=95.0, step=14)}
    hang = find_hang(beats, 2, now=110.0, armed_at=0.0, t=T)
    assert hang is not None and hang.first == 1 and hang.step == 14


HANG = Hang(section="step", ranks=[0, 1], first=1, timeout_s=5.0, step=12)


@pytest.mark.parametrize(("hang", "since", "now", "kill_after", "expected"), [
    pytest.param(None, None, 100.0, 540, WAIT, id="quiet"),
    pytest.param(HANG, None, 100.0, 540, SUSPECT, id="new-hang-suspected-first"),
    pytest.param(HANG, None, 100.0, 0, KILL, id="kill-after-0-ends-at-once"),
    pytest.param(HANG, 100.0, 639.9, 540, WAIT, id="suspected-not-long-enough"),
    pytest.param(HANG, 100.0, 640.0, 540, KILL, id="suspected-for-kill-after"),
    pytest.param(None, 100.0, 300.0, 540, CLEAR, id="ranks-report-again"),
])
def test_a_hang_is_suspected_then_ended_or_cleared(hang: Hang | None, since: float | None,
                                                   now: float, kill_after: float,
                                                   expected: str) -> None:
    assert next_action(hang, since, now, kill_after) == expected
