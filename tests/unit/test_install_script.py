"""scripts/install.sh: which torch build each `--torch` choice installs, read from `--dry-run`
(the commands it would run, printed and not run), its argument errors, and that CI's call
(`install.sh --dev`, from tests/run.sh) is still the plain install from pip's configured index."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "install.sh"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def install(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "HPCFLOW_TORCH_INDEX"}
    base["HPCFLOW_VENV"] = str(tmp_path / "a venv")  # a space: every word must be quoted
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          env={**base, **env}, timeout=60)


def planned(proc: subprocess.CompletedProcess[str]) -> list[list[str]]:
    """The commands a --dry-run printed, as argv lists."""
    assert proc.returncode == 0, proc.stderr
    return [shlex.split(line[2:]) for line in proc.stdout.splitlines() if line.startswith("+ ")]


def pip_installs(cmds: list[list[str]]) -> list[list[str]]:
    return [c[c.index("install") + 1:] for c in cmds if c[1:4] == ["-m", "pip", "install"]]


@pytest.mark.parametrize(("args", "env", "torch_install"), [
    pytest.param([], {}, ["-q", "torch==2.13.0"], id="default-is-the-configured-index"),
    pytest.param(["--dev"], {}, ["-q", "torch==2.13.0"], id="ci-call-unchanged"),
    pytest.param(["--torch", "index"], {}, ["-q", "torch==2.13.0"], id="index"),
    pytest.param(["--torch", "cpu"], {}, ["-q", "--index-url", CPU_INDEX, "torch==2.13.0"],
                 id="cpu-from-pytorch-cpu-index"),
    pytest.param(["--torch=cpu"], {"HPCFLOW_TORCH_INDEX": "file:///mirror/cpu"},
                 ["-q", "--index-url", "file:///mirror/cpu", "torch==2.13.0"], id="cpu-own-index"),
    pytest.param(["--torch", "cuda"], {}, ["-q", "torch==2.13.0"], id="cuda-configured-index"),
    pytest.param(["--torch", "cuda"], {"HPCFLOW_TORCH_INDEX": "https://example.org/cu128"},
                 ["-q", "--index-url", "https://example.org/cu128", "torch==2.13.0"],
                 id="cuda-own-index"),
])
def test_each_choice_installs_torch_2_13_from_its_index(tmp_path, args, env, torch_install):
    proc = install(tmp_path, *args, "--dry-run", **env)
    cmds = planned(proc)
    venv = str(tmp_path / "a venv")
    assert ["python3", "-m", "venv", venv] in cmds
    installs = pip_installs(cmds)
    assert installs[0] == ["-q", "--upgrade", "pip"]
    assert installs[1] == torch_install
    extras = "train,aws,ssh,hf,lightning,resilience,dev" if "--dev" in args else "train"
    assert installs[2] == ["-q", "-e", f"{REPO}[{extras}]"]
    assert len(installs) == 3
    # The build is probed after torch and before the extras (which would pull the index's torch).
    probe = next(i for i, c in enumerate(cmds) if c[:2] == [f"{venv}/bin/python", "-c"])
    assert cmds.index([f"{venv}/bin/python", "-m", "pip", "install", *torch_install]) < probe
    assert probe < cmds.index([f"{venv}/bin/python", "-m", "pip", "install", *installs[2]])
    assert proc.stdout.splitlines()[-1] == venv
    assert not (tmp_path / "a venv").exists()  # a dry run changes nothing


def test_a_dry_run_says_it_creates_nothing(tmp_path):
    proc = install(tmp_path, "--torch", "cpu", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert f"would create {tmp_path / 'a venv'} (dry run: nothing is created)" in proc.stderr
    assert "creating" not in proc.stderr
    assert not (tmp_path / "a venv").exists()


def test_the_readme_install_block_is_the_choices_tested_here(tmp_path):
    """README.md, "Quickstart": each line of its install block is a choice whose --dry-run the
    tests above read (cpu, cuda, skip), and its last line runs here as written: it prints the
    commands and creates nothing."""
    readme = (REPO / "README.md").read_text()
    block = readme.split("```bash\nbash scripts/install.sh", 1)[1].split("```", 1)[0]
    lines = [("bash scripts/install.sh" + ln if i == 0 else ln).split("#")[0].split()
             for i, ln in enumerate(block.splitlines()) if ln.strip()]
    assert lines == [["bash", "scripts/install.sh", "--torch", "cpu"],
                     ["bash", "scripts/install.sh", "--torch", "cuda"],
                     ["bash", "scripts/install.sh", "--torch", "skip"],
                     ["bash", "scripts/install.sh", "--torch", "cpu", "--dry-run"]]
    cmds = planned(install(tmp_path, *lines[3][2:]))
    assert ["python3", "-m", "venv", str(tmp_path / "a venv")] in cmds
    assert not (tmp_path / "a venv").exists()


def test_skip_installs_no_torch_and_checks_first(tmp_path):
    cmds = planned(install(tmp_path, "--torch", "skip", "--dry-run"))
    assert not any("torch==2.13.0" in word for c in cmds for word in c)
    assert cmds[0][1] == "-c" and "import torch" in cmds[0][2]


def test_skip_without_torch_in_the_venv_fails_before_installing_anything(tmp_path):
    proc = install(tmp_path, "--torch", "skip")
    assert proc.returncode == 1
    assert "--torch skip: no torch in" in proc.stderr and "install the build you want" in proc.stderr
    assert not (tmp_path / "a venv").exists()


@pytest.mark.parametrize(("args", "message"), [
    pytest.param(["--torch", "gpu"], "--torch: 'gpu' is not known; use index, cpu, cuda or skip",
                 id="unknown-build"),
    pytest.param(["--torch"], "--torch needs a value: index, cpu, cuda or skip", id="no-value"),
    pytest.param(["--devv"], "unknown argument '--devv'", id="unknown-argument"),
])
def test_bad_arguments_are_usage_errors_that_change_nothing(tmp_path, args, message):
    proc = install(tmp_path, *args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "usage: install.sh" in proc.stderr
    assert proc.stdout == "" and not (tmp_path / "a venv").exists()


def test_ci_calls_the_install_without_a_torch_choice():
    assert 'venv="$(bash scripts/install.sh --dev)"' in (REPO / "tests" / "run.sh").read_text()


def test_it_is_shellcheck_clean():
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck not found (scripts/install.sh --dev installs it)"
    proc = subprocess.run([shellcheck, str(SCRIPT)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout
