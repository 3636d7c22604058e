"""The warm standby rank (hpcflow.runtime.standby): its rules, and the process itself run as the
supervisor's standby step runs it, without Slurm."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from hpcflow import protocol as P
from hpcflow.runtime import standby as sb


@pytest.mark.parametrize(("words", "module", "script", "args"), [
    (["-m", "pkg.train", "--steps", "3"], "pkg.train", None, ("--steps", "3")),
    (["-m", "pkg.train"], "pkg.train", None, ()),
    (["train.py", "-m", "x"], None, "train.py", ("-m", "x")),
    (["/abs/train.py"], None, "/abs/train.py", ()),
])
def test_the_program_words_after_the_interpreter(words, module, script, args) -> None:
    assert sb.parse_program(words) == sb.Program(module=module, script=script, args=args)


@pytest.mark.parametrize(("words", "says"), [
    ([], "no program"),
    (["-m"], "'-m' needs a module name"),
    (["-u", "train.py"], "interpreter option '-u'"),
])
def test_program_words_it_cannot_run_are_refused_by_name(words, says) -> None:
    with pytest.raises(ValueError, match=says):
        sb.parse_program(words)


def _module(path: str | None) -> types.ModuleType:
    mod = types.ModuleType("m")
    if path is not None:
        mod.__file__ = path
    return mod


def test_only_installed_modules_are_listed_in_import_order(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    (site / "lib").mkdir(parents=True)
    (site / "lib" / "__init__.py").write_text("")
    (site / "lib" / "core.py").write_text("")
    own = tmp_path / "project" / "model.py"
    own.parent.mkdir()
    own.write_text("")
    modules = {
        "lib": _module(str(site / "lib" / "__init__.py")),
        "model": _module(str(own)),            # the program's own module: never imported ahead
        "sys": _module(None),                   # built in: nothing to import
        "__main__": _module(str(site / "lib" / "core.py")),
        "lib.core": _module(str(site / "lib" / "core.py")),
    }
    assert sb.loaded_package_modules(modules, (os.path.join(str(site), ""),)) == ["lib", "lib.core"]


def test_a_folder_that_only_starts_like_a_root_is_not_under_it(tmp_path: Path) -> None:
    root = tmp_path / "site"
    other = tmp_path / "site-extra" / "x.py"
    other.parent.mkdir()
    other.write_text("")
    assert sb.loaded_package_modules({"x": _module(str(other))},
                                     (os.path.join(str(root), ""),)) == []


def test_the_module_list_is_written_only_when_asked(tmp_path: Path) -> None:
    target = tmp_path / "warm-modules"
    assert sb.record_loaded_modules({}) is False
    assert not target.exists()
    assert sb.record_loaded_modules({P.ENV_WARM_MODULES: str(target)}) is True
    names = target.read_text().split()
    assert "pytest" in names  # installed, and loaded in this process
    assert not any(n.startswith("tests.") or n == "tests" for n in names)  # the project's own
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_preload_imports_what_it_can_and_skips_the_rest() -> None:
    sys.modules.pop("colorsys", None)
    imported, skipped = sb.preload(["json", "colorsys", "no_such_module_hpcflow", ""])
    assert (imported, skipped) == (1, 1)
    assert "colorsys" in sys.modules


def test_the_programs_own_module_is_never_imported_ahead() -> None:
    module = sb.Program(module="pkg.train", script=None, args=())
    assert sb.preload_names(["numpy", "pkg.train", "pkg.model"], module) == [
        *sb.ALWAYS, "numpy", "pkg.model"]
    script = sb.Program(module=None, script="train.py", args=())
    assert sb.preload_names(["pkg.train"], script) == [*sb.ALWAYS, "pkg.train"]


@pytest.mark.parametrize(("text", "go"), [
    ('{"env": {"A": "1", "B": 2}}', sb.Go(env={"A": "1", "B": "2"}, quit=False)),
    ('{"quit": true}', sb.Go(env={}, quit=True)),
    ('{"env": {"A"', None),       # not whole yet
    ("[]", None),
    ('{"env": "x"}', None),
    ("", None),
])
def test_the_go_record(text, go) -> None:
    assert sb.read_go(text) == go


# ---- the process ----------------------------------------------------------------------------

SCRIPT = """\
import json, os, signal, sys
out = {
    "name": __name__, "argv": sys.argv, "path0": sys.path[0], "file": __file__,
    "from_go": os.environ.get("FROM_GO"), "warm_t0": os.environ.get("HPCFLOW_WARM_T0"),
    "usr1_default": signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL,
    "term_default": signal.getsignal(signal.SIGTERM) == signal.SIG_DFL,
    "urg_blocked": signal.SIGURG in signal.pthread_sigmask(signal.SIG_BLOCK, []),
    "comm": open("/proc/self/comm").read().strip(),
    "torch_loaded": "torch" in sys.modules,
}
with open(os.environ["OUT"], "w") as f:
    json.dump(out, f)
sys.exit(3)
"""


def _start(tmp_path: Path, words: list[str], *, cwd: Path | None = None,
           env: dict[str, str] | None = None,
           modules: list[str] = ()) -> tuple[subprocess.Popen[str], Path]:
    go = tmp_path / "standby.go"
    listed = []
    if modules:
        (tmp_path / "modules").write_text("".join(f"{m}\n" for m in modules))
        listed = ["--modules", str(tmp_path / "modules")]
    full = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "HPCFLOW_"))}
    full.update({"OUT": str(tmp_path / "out.json"), "SLURM_PROCID": "0",
                 "SLURM_STEP_ID": "7", **(env or {})})
    proc = subprocess.Popen(
        [sys.executable, "-m", "hpcflow.runtime.standby", "--go", str(go), *listed, "--",
         *words],
        cwd=cwd or tmp_path, env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, go


def _wait_ready(go: Path, proc: subprocess.Popen[str]) -> None:
    step = go.with_name(go.name + ".step")
    deadline = time.monotonic() + 60
    while not step.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the standby never said it was ready"
        time.sleep(0.05)
    assert step.read_text() == "7"


def _comm(pid: int) -> str:
    return Path(f"/proc/{pid}/comm").read_text().strip()


def test_a_script_runs_as_python_would_run_it_with_the_go_environment(tmp_path: Path) -> None:
    folder = tmp_path / "code"
    folder.mkdir()
    (folder / "train.py").write_text(SCRIPT)
    proc, go = _start(tmp_path, ["code/train.py", "--lr", "0.1"])  # relative, as given
    _wait_ready(go, proc)
    assert _comm(proc.pid) == sb.WAITING_NAME
    assert not (tmp_path / "out.json").exists()  # nothing runs before go
    go.write_text(json.dumps({"env": {"FROM_GO": "yes"}}))
    os.kill(proc.pid, signal.SIGURG)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err  # the program's own status
    seen = json.loads((tmp_path / "out.json").read_text())
    assert seen["name"] == "__main__"
    assert seen["argv"] == ["code/train.py", "--lr", "0.1"]  # as python keeps it
    assert seen["file"] == str(folder / "train.py")  # absolute, as python (>= 3.9) makes it
    assert seen["path0"] == str(folder)
    assert seen["from_go"] == "yes" and float(seen["warm_t0"]) > 0
    assert seen["usr1_default"] and seen["term_default"] and not seen["urg_blocked"]
    assert seen["comm"] != sb.WAITING_NAME
    assert seen["torch_loaded"]  # imported ahead
    assert out == ""


def test_a_module_runs_as_python_dash_m_would_run_it(tmp_path: Path) -> None:
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "train.py").write_text(SCRIPT)
    proc, go = _start(tmp_path, ["-m", "mypkg.train", "a", "b"], modules=["mypkg"])
    _wait_ready(go, proc)
    go.write_text(json.dumps({"env": {}}))
    _, err = proc.communicate(timeout=60)  # no wake-up signal: found at the next look
    assert proc.returncode == 3, err
    seen = json.loads((tmp_path / "out.json").read_text())
    assert seen["name"] == "__main__"
    assert seen["argv"] == [str(tmp_path / "mypkg" / "train.py"), "a", "b"]


@pytest.mark.parametrize("how", ["quit", "term"])
def test_a_standby_not_used_leaves_with_status_0_and_says_nothing(tmp_path: Path, how) -> None:
    (tmp_path / "train.py").write_text(SCRIPT)
    proc, go = _start(tmp_path, ["train.py"])
    _wait_ready(go, proc)
    if how == "quit":
        go.write_text(json.dumps({"quit": True}))
        os.kill(proc.pid, signal.SIGURG)
    else:
        os.kill(proc.pid, signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out, err) == (0, "", "")
    assert not (tmp_path / "out.json").exists()


def test_a_warning_before_go_does_not_kill_the_standby(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(SCRIPT)
    proc, go = _start(tmp_path, ["train.py"])
    _wait_ready(go, proc)
    os.kill(proc.pid, signal.SIGUSR1)
    go.write_text(json.dumps({"env": {}}))
    os.kill(proc.pid, signal.SIGURG)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err


def test_a_standby_with_words_it_cannot_run_fails_at_once(tmp_path: Path) -> None:
    proc, _ = _start(tmp_path, ["-u", "train.py"])
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "interpreter option '-u'" in err


SLOW = """\
import os, time
with open(os.environ["IMPORTED"], "a") as f:
    f.write(__name__ + "\\n")
time.sleep(1.0)
"""


@pytest.mark.parametrize("record", [{"env": {}}, {"quit": True}])
def test_a_hand_over_or_a_quit_while_importing_ends_the_imports(tmp_path: Path, record) -> None:
    names = [f"slow_{i}" for i in range(20)]
    for name in names:
        (tmp_path / f"{name}.py").write_text(SLOW)
    (tmp_path / "modules").write_text("".join(f"{n}\n" for n in names))
    (tmp_path / "train.py").write_text(SCRIPT)
    imported = tmp_path / "imported"
    go = tmp_path / "standby.go"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "HPCFLOW_"))}
    env.update({"OUT": str(tmp_path / "out.json"), "IMPORTED": str(imported),
                "SLURM_PROCID": "0", "SLURM_STEP_ID": "7"})
    proc = subprocess.Popen(
        [sys.executable, "-m", "hpcflow.runtime.standby", "--go", str(go), "--modules",
         str(tmp_path / "modules"), "--", "train.py"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not imported.exists():  # into the list's imports
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    go.write_text(json.dumps(record))
    os.kill(proc.pid, signal.SIGURG)
    _, err = proc.communicate(timeout=60)
    assert len(imported.read_text().split()) < len(names)  # it did not import the whole list
    if "quit" in record:
        assert (proc.returncode, err) == (0, "")
        assert not (tmp_path / "out.json").exists()
    else:
        assert proc.returncode == 3, err
        assert json.loads((tmp_path / "out.json").read_text())["name"] == "__main__"


def test_an_uncaught_exception_reads_as_the_programs_own(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("def step():\n    raise ValueError('boom at 32')\nstep()\n")
    proc, go = _start(tmp_path, ["train.py"])
    _wait_ready(go, proc)
    go.write_text(json.dumps({"env": {}}))
    os.kill(proc.pid, signal.SIGURG)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    lines = err.strip().splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert str(tmp_path / "train.py") in lines[1]  # the program's frame comes first
    assert lines[-1] == "ValueError: boom at 32"
    assert "runpy" not in err and "standby" not in err


PLANTED = 'import os\nopen(os.environ["PLANTED"], "a").write(__name__ + "\\n")\n'


@pytest.mark.parametrize("program", [
    pytest.param(["code/train.py"], id="script"),
    pytest.param(["-m", "mypkg.train"], id="module"),
])
def test_modules_planted_in_the_working_folder_are_not_imported_ahead(tmp_path: Path,
                                                                       program) -> None:
    """Another user who can write the step's working folder plants ``torch.py``, ``hpcflow/``
    and ``argparse.py`` there: the standby, started as the supervisor starts it, imports none
    of them (torch comes from where it is installed) and still runs the program, as its own
    start would."""
    from hpcflow.supervisor.standby import standby_argv

    work = tmp_path / "shared work"
    (work / "hpcflow").mkdir(parents=True)
    for planted in ("torch.py", "argparse.py", "hpcflow/__init__.py"):
        (work / planted).write_text(PLANTED)
    (work / "code").mkdir()
    (work / "code" / "train.py").write_text(SCRIPT)
    (work / "mypkg").mkdir()
    (work / "mypkg" / "__init__.py").write_text("")
    (work / "mypkg" / "train.py").write_text(SCRIPT)
    go = tmp_path / "standby.go"
    argv = standby_argv({"step": {"srun": [], "program": [sys.executable, *program]}},
                        exclude=[], go_file=go, modules_file=tmp_path / "none")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "HPCFLOW_"))}
    env.update({"OUT": str(tmp_path / "out.json"), "PLANTED": str(tmp_path / "planted"),
                "SLURM_PROCID": "0", "SLURM_STEP_ID": "7"})
    proc = subprocess.Popen(argv[argv.index("--overlap") + 1:], cwd=work, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_ready(go, proc)
    go.write_text(json.dumps({"env": {}}))
    os.kill(proc.pid, signal.SIGURG)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    assert not (tmp_path / "planted").exists()
    seen = json.loads((tmp_path / "out.json").read_text())
    assert seen["name"] == "__main__" and seen["torch_loaded"]
    # sys.path[0] is what `python code/train.py` or `python -m mypkg.train` has.
    assert seen["path0"] == str(work / "code" if program[0] == "code/train.py" else work)


@pytest.mark.parametrize(("program", "env", "ignore", "first"), [
    pytest.param(sb.Program(None, "/a/b/t.py", ()), {}, False, "/a/b", id="script"),
    pytest.param(sb.Program("m", None, ()), {}, False, "CWD", id="module"),
    pytest.param(sb.Program(None, "/a/t.py", ()), {"PYTHONSAFEPATH": "1"}, False, None,
                 id="safe-path"),
    pytest.param(sb.Program(None, "/a/t.py", ()), {"PYTHONSAFEPATH": "1"}, True, "/a",
                 id="safe-path-ignored-under-E"),
])
def test_the_first_path_is_the_programs_own(program, env, ignore, first) -> None:
    want = os.getcwd() if first == "CWD" else first
    assert sb.first_path(program, env, ignore) == want
