"""The one command runner: real commands, text output, no exception on a failing status, and
error evidence with the exit status, the command and the tail of stderr."""

from __future__ import annotations

import re
import subprocess
import time

import pytest

from hpcflow.command import TAIL_LINES, evidence, run_command, run_until_line
from hpcflow.errors import LocalClusterError
from hpcflow.local_cluster.system import run_checked


def test_a_failing_command_is_returned_not_raised():
    result = run_command(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (result.returncode, result.stdout, result.stderr) == (3, "out\n", "err\n")


def test_input_and_environment_reach_the_command():
    result = run_command(["sh", "-c", 'cat; printf "%s" "$X"'], input="in:", env={"X": "x"})
    assert result.stdout == "in:x"


def test_evidence_keeps_the_status_the_command_and_the_stderr_tail():
    argv = ["sh", "-c", "for i in $(seq 1 30); do echo line$i >&2; done; exit 4"]
    text = evidence(argv, run_command(argv))
    first, *tail = text.splitlines()
    assert first == f"(exit 4): {' '.join(argv)}"
    assert tail == [f"line{i}" for i in range(31 - TAIL_LINES, 31)]


def test_a_missing_program_and_a_timeout_raise():
    with pytest.raises(FileNotFoundError):
        run_command(["hpcflow-no-such-program"])
    with pytest.raises(subprocess.TimeoutExpired):
        run_command(["sleep", "5"], timeout_s=0.2)


def test_run_until_line_stops_the_command_at_the_line_and_keeps_what_it_printed(tmp_path):
    # The line comes in two pieces, the way a pipe may deliver it.
    argv = ["sh", "-c", "echo out; printf 'first\\nJob is in trans' >&2; sleep 0.2; "
            f"echo 'itional state, retrying' >&2; sleep 30; touch {tmp_path}/retried"]
    began = time.monotonic()
    result = run_until_line(argv, re.compile(r"transitional state, retrying"), timeout_s=20)
    assert time.monotonic() - began < 10
    assert result.returncode == -9 and result.stdout == "out\n"
    assert result.stderr == "first\nJob is in transitional state, retrying\n"
    assert not (tmp_path / "retried").exists()


def test_run_until_line_returns_a_command_that_never_prints_it_whole():
    result = run_until_line(["sh", "-c", "echo a; echo b >&2; exit 3"], re.compile("never"))
    assert (result.returncode, result.stdout, result.stderr) == (3, "a\n", "b\n")
    with pytest.raises(subprocess.TimeoutExpired):
        run_until_line(["sleep", "5"], re.compile("never"), timeout_s=0.2)
    with pytest.raises(FileNotFoundError):
        run_until_line(["hpcflow-no-such-program"], re.compile("never"))


@pytest.mark.parametrize(("argv", "timeout_s", "message"), [
    pytest.param(["sh", "-c", "echo broke >&2; exit 2"], 10, r"sh failed \(exit 2\): sh -c .*\nbroke",
                 id="status"),
    pytest.param(["hpcflow-no-such-program"], 10, "hpcflow-no-such-program: command not found",
                 id="missing"),
    pytest.param(["sleep", "5"], 0.2, "sleep 5: no answer after 0 s", id="timeout"),
])
def test_run_checked_turns_each_failure_into_a_local_cluster_error(argv, timeout_s, message):
    with pytest.raises(LocalClusterError, match=message):
        run_checked(argv, timeout_s=timeout_s)
