"""The warm standby beside the step, the supervisor's side (hpcflow.supervisor.standby): its
command, when it starts, the hand-over and the quit, with processes stood in for."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from hpcflow.supervisor.standby import START_AFTER_S, Standby, standby_argv, standby_due

SRUN = ["--kill-on-bad-exit=1", "--nodes=2", "--ntasks=8", "--ntasks-per-node=4",
        "--cpus-per-task=1"]


def _cfg(program: list[str]) -> dict:
    return {"step": {"srun": SRUN, "torchrun": None, "program": program}, "warm_standby": True}


@pytest.mark.parametrize(("program", "tail"), [
    pytest.param(["/venv/bin/python", "-m", "pkg.train", "--steps", "9"],
                 ["-m", "pkg.train", "--steps", "9"], id="module"),
    pytest.param(["python3", "train.py", "-m", "x"], ["train.py", "-m", "x"], id="script"),
])
def test_the_standby_step_is_the_steps_layout_overlapping_it(program, tail, tmp_path) -> None:
    argv = standby_argv(_cfg(program), exclude=["n3", "n4"], go_file=tmp_path / "g.go",
                        modules_file=tmp_path / "m")
    assert argv == ["srun", *SRUN, "--overlap", "--exclude=n3,n4", program[0], "-P", "-m",
                    "hpcflow.runtime.standby", "--go", str(tmp_path / "g.go"), "--modules",
                    str(tmp_path / "m"), "--", *tail]


def test_interpreter_options_go_to_the_standbys_interpreter(tmp_path) -> None:
    program = ["/venv/bin/python", "-u", "-B", "-m", "submitit.core._submit", "/f"]
    argv = standby_argv(_cfg(program), exclude=[], go_file=tmp_path / "g",
                        modules_file=tmp_path / "m")
    start = argv.index("/venv/bin/python")
    assert argv[start:start + 6] == ["/venv/bin/python", "-u", "-B", "-P", "-m",
                                     "hpcflow.runtime.standby"]
    assert argv[argv.index("--", start):] == ["--", "-m", "submitit.core._submit", "/f"]


def test_without_excluded_nodes_there_is_no_exclude_option(tmp_path) -> None:
    argv = standby_argv(_cfg(["python", "t.py"]), exclude=[], go_file=tmp_path / "g",
                        modules_file=tmp_path / "m")
    assert not any(a.startswith("--exclude") for a in argv)


@pytest.mark.parametrize(("elapsed", "listed", "due"), [
    pytest.param(0.0, False, False, id="just-started"),
    pytest.param(0.0, True, True, id="rank-0-listed-its-modules"),
    pytest.param(START_AFTER_S - 0.1, False, False, id="no-list-yet"),
    pytest.param(START_AFTER_S, False, True, id="no-list-after-the-wait"),
])
def test_when_a_standby_starts(elapsed, listed, due) -> None:
    assert standby_due(elapsed, listed) is due


class FakeProc:
    """A started process: ``rc`` None while it runs."""

    def __init__(self, argv: list[str], rc: int | None = None) -> None:
        self.argv = argv
        self.returncode = rc
        self.terminated = False

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = 0
        return self.returncode

    def terminate(self) -> None:
        self.terminated = True
        self.returncode = -15

    def kill(self) -> None:
        self.returncode = -9


class Popen:
    def __init__(self) -> None:
        self.started: list[FakeProc] = []

    def __call__(self, argv, **kwargs) -> FakeProc:
        proc = FakeProc(list(argv))
        self.started.append(proc)
        return proc


@pytest.fixture
def standby(tmp_path: Path):
    popen, lines = Popen(), []
    sb = Standby(_cfg(["python", "-m", "pkg.train"]), tmp_path, job_id="42", restart=1,
                 log=lines.append, popen=popen)
    sb.sent = []  # the records written to go files, in order
    write = sb._send

    def send(record):
        sb.sent.append(dict(record))
        write(record)

    sb._send = send
    return sb, popen, lines, tmp_path


def test_not_due_nothing_starts_then_one_starts_once(standby) -> None:
    sb, popen, lines, state = standby
    sb.maybe_start(elapsed_s=1.0, exclude=[])
    assert popen.started == []
    (state / "warm-modules-42-1").write_text("torch\n")
    sb.maybe_start(elapsed_s=1.0, exclude=["n2"])
    sb.maybe_start(elapsed_s=2.0, exclude=["n2"])
    assert len(popen.started) == 1
    assert popen.started[0].argv[:1] == ["srun"] and "--exclude=n2" in popen.started[0].argv
    assert lines == ["warm standby 1 started"]


def test_the_restart_is_handed_over_with_its_environment_and_a_wake_up(standby) -> None:
    sb, popen, lines, state = standby
    sb.maybe_start(elapsed_s=START_AFTER_S, exclude=[])
    srun = popen.started[0]
    (state / "standby-42-1-1.go.step").write_text("3")
    assert sb.take({"HPCFLOW_STEP_TRY": "1"}, []) is srun
    assert json.loads((state / "standby-42-1-1.go").read_text()) == {
        "env": {"HPCFLOW_STEP_TRY": "1"}}
    assert popen.started[1].argv == ["scancel", "--signal=URG", "42.3"]
    assert sb.take({}, []) is None  # handed over: none waits now
    sb.maybe_start(elapsed_s=START_AFTER_S, exclude=[])
    assert popen.started[-1].argv[0] == "srun" and sb.go_file.name == "standby-42-1-2.go"


def test_a_standby_that_ends_while_it_waits_is_said_at_once(standby) -> None:
    sb, popen, lines, _ = standby
    sb.maybe_start(elapsed_s=START_AFTER_S, exclude=[])
    popen.started[0].returncode = 1  # e.g. an interpreter without hpcflow
    sb.maybe_start(elapsed_s=START_AFTER_S + 1, exclude=[])
    assert lines[-1] == ("the warm standby ended (status 1) before it was needed; the next "
                         "restart starts cold")
    assert len(popen.started) == 1 and sb.take({}, []) is None


def test_a_standby_that_ended_is_not_used_nor_started_again(standby) -> None:
    sb, popen, lines, _ = standby
    sb.maybe_start(elapsed_s=START_AFTER_S, exclude=[])
    popen.started[0].returncode = 1
    assert sb.take({}, []) is None
    assert "the warm standby had ended (status 1): the restart starts cold" in lines
    sb.maybe_start(elapsed_s=START_AFTER_S, exclude=[])
    assert len(popen.started) == 1


def test_a_standby_on_other_nodes_than_the_restart_quits(standby) -> None:
    sb, popen, lines, state = standby
    sb.maybe_start(elapsed_s=START_AFTER_S, exclude=[])
    (state / "standby-42-1-1.go.step").write_text("3")
    assert sb.take({}, ["n1"]) is None
    assert sb.sent == [{"quit": True}]
    assert popen.started[1].argv == ["scancel", "--signal=URG", "42.3"]
    assert popen.started[0].returncode == 0 and not popen.started[0].terminated
    assert list(state.iterdir()) == []  # its go and step files are gone


def test_quit_before_the_standby_said_its_step_ends_its_srun_after_the_wait(standby,
                                                                            monkeypatch) -> None:
    sb, popen, _, state = standby
    sb.maybe_start(elapsed_s=START_AFTER_S, exclude=[])
    srun = popen.started[0]

    def slow(timeout=None):
        if not srun.terminated:
            raise subprocess.TimeoutExpired("srun", timeout)
        return srun.returncode

    monkeypatch.setattr(srun, "wait", slow)
    sb.quit()
    assert sb.sent == [{"quit": True}]
    assert srun.terminated and len(popen.started) == 1  # no step id: no scancel


def test_a_srun_that_cannot_start_means_cold_restarts(tmp_path) -> None:
    lines = []

    def broken(argv, **kwargs):
        raise FileNotFoundError(2, "No such file or directory", argv[0])

    sb = Standby(_cfg(["python", "t.py"]), tmp_path, job_id="42", restart=0, log=lines.append,
                 popen=broken)
    sb.maybe_start(elapsed_s=START_AFTER_S, exclude=[])
    assert sb.take({}, []) is None
    assert lines[0].startswith("could not start the warm standby (srun)")
