"""The supervisor's attempt loop, the parts that are pure: the shell's status of a step, and the
warnings the batch shell's trap left in the signals file (hpcflow.supervisor.attempt)."""

from __future__ import annotations

import pytest

from hpcflow.supervisor.attempt import warning_lines
from hpcflow.supervisor.commands import step_status


@pytest.mark.parametrize(("returncode", "status"), [
    pytest.param(0, 0, id="success"),
    pytest.param(75, 75, id="preempted"),
    pytest.param(-15, 143, id="term"),
    pytest.param(-9, 137, id="kill"),
])
def test_a_step_status_reads_as_the_shell_gives_it(returncode, status):
    assert step_status(returncode) == status


@pytest.mark.parametrize(("text", "count"), [
    pytest.param("", 0, id="none"),
    pytest.param("USR1 1796400000\n", 1, id="one"),
    pytest.param("USR1 1796400000\nUSR1 1796400001\n", 2, id="two"),
    pytest.param("USR1 1796400000\nUSR1 17964", 1, id="the-last-line-still-being-written"),
    pytest.param("USR2 1796400000\n", 0, id="another-signal"),
    pytest.param("\n \nUSR1\n", 1, id="blank-lines-and-no-time"),
    pytest.param("USR1x 1\nxUSR1 2\n", 0, id="not-the-name"),
])
def test_warnings_are_the_whole_lines_of_the_jobs_signal(text, count):
    assert warning_lines(text, "USR1") == count
