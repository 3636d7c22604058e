"""The start-up phases of ``hpcflow-startup`` (hpcflow.runtime.startup): the clocks they come
from, and how the marks become phases."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from hpcflow.runtime.startup import (
    PHASES,
    StartupClock,
    attempt_start_time,
    process_start_time,
)


def test_a_new_process_knows_when_it_started():
    before = time.time()
    out = subprocess.run(
        [sys.executable, "-c", "import time; time.sleep(0.3)\n"
         "from hpcflow.runtime.startup import process_start_time; print(process_start_time())"],
        capture_output=True, text=True, check=True, timeout=60).stdout
    after = time.time()
    started = float(out)
    # Clock ticks are 10 ms (SC_CLK_TCK 100): the start is before the 0.3 s sleep, not after.
    assert before - 0.05 <= started <= after - 0.25


def test_the_command_name_may_hold_spaces_and_parentheses(tmp_path):
    ticks = os.sysconf("SC_CLK_TCK")
    boot_s = time.clock_gettime(time.CLOCK_BOOTTIME)
    start_ticks = int((boot_s - 5.0) * ticks)  # 5 s ago
    fields = ["S"] + ["0"] * 18 + [str(start_ticks)] + ["0"] * 20
    stat = tmp_path / "stat"
    stat.write_text(f"4242 (my (odd) name) {' '.join(fields)}\n")
    started = process_start_time(stat, now=1000.0)
    assert started == pytest.approx(995.0, abs=0.1)


@pytest.mark.parametrize("text", ["", "4242 (x) S 1 2", "no parentheses at all", "4242 (x) " + "y " * 30])
def test_a_garbled_stat_file_gives_none(tmp_path, text):
    stat = tmp_path / "stat"
    stat.write_text(text)
    assert process_start_time(stat) is None
    assert process_start_time(tmp_path / "missing") is None


@pytest.mark.parametrize(("raw", "expected"), [
    ("1733222111.250000", 1733222111.25),
    ("1733222111,250000", 1733222111.25),  # a locale with a decimal comma
    (" 12.5 ", 12.5),
    ("", None), ("soon", None), ("-1", None), ("0", None),
])
def test_the_attempt_start_from_the_batch_script(raw, expected):
    assert attempt_start_time({"HPCFLOW_ATTEMPT_T0": raw}) == expected
    assert attempt_start_time({}) is None


def clock(marks: dict[str, float], t0: float | None = 100.0, p0: float | None = 101.0):
    c = StartupClock(t0, p0)
    for name, at in marks.items():
        c.mark(name, at)
    return c.phases()


ALL = {"from_env": 104.0, "joined": 105.5, "restore": 107.0, "restored": 107.25,
       "first_step": 108.0}


@pytest.mark.parametrize(("marks", "t0", "p0", "expected"), [
    pytest.param(ALL, 100.0, 101.0,
                 {"launch_s": 1.0, "imports_s": 3.0, "join_s": 1.5, "build_s": 1.5,
                  "restore_s": 0.25, "first_step_s": 0.75, "total_s": 8.0}, id="every-phase"),
    pytest.param({k: v for k, v in ALL.items() if k not in ("restore", "restored")}, 100.0,
                 101.0, {"launch_s": 1.0, "imports_s": 3.0, "join_s": 1.5, "build_s": 2.5,
                         "restore_s": None, "first_step_s": None, "total_s": 8.0},
                 id="no-restore: building runs to the first step"),
    pytest.param(ALL, None, 101.0,
                 {"launch_s": None, "imports_s": 3.0, "join_s": 1.5, "build_s": 1.5,
                  "restore_s": 0.25, "first_step_s": 0.75, "total_s": 7.0},
                 id="outside-a-job: from the process start"),
    pytest.param(ALL, None, None,
                 {"launch_s": None, "imports_s": None, "join_s": 1.5, "build_s": 1.5,
                  "restore_s": 0.25, "first_step_s": 0.75, "total_s": None}, id="no-proc"),
    pytest.param(ALL, 101.5, 101.0,
                 {"launch_s": 0.0, "imports_s": 3.0, "join_s": 1.5, "build_s": 1.5,
                  "restore_s": 0.25, "first_step_s": 0.75, "total_s": 6.5},
                 id="clocks-a-little-apart: no negative phase"),
])
def test_marks_become_phases(marks, t0, p0, expected):
    assert clock(marks, t0, p0) == expected
    assert list(expected)[:-1] == list(PHASES)


def test_a_mark_is_kept_the_first_time():
    c = StartupClock(100.0, 101.0)
    c.mark("from_env", 102.0)
    c.mark("from_env", 150.0)
    assert c.marks["from_env"] == 102.0


def test_the_record_is_given_once_at_the_first_step():
    c = StartupClock(100.0, 101.0)
    c.mark("from_env", 102.0)
    first = c.first_step()
    assert first is not None and first["total_s"] is not None and first["total_s"] >= 0
    assert c.first_step() is None and c.first_step() is None
