"""Bootstrap step 50-spot-watch for real in a sandbox root: the unit and its settings are
written, enabled with the real ``systemctl --root`` and checked by ``systemd-analyze verify``;
the unit's own command line, with its environment file, polls a local HTTP server that
imitates IMDSv2 (tests/programs/fake_imds.py); a rerun changes nothing; bad input is refused."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[2]
UNIT = "etc/systemd/system/hpcflow-spot-watch.service"
ENV_FILE = "etc/hpcflow/spot-watch.env"


@pytest.fixture
def hpcflow_cmd(tmp_path) -> Path:
    """An ``hpcflow`` executable (this interpreter with this checkout), as a node would have."""
    exe = tmp_path / "bin" / "hpcflow"
    exe.parent.mkdir()
    exe.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m hpcflow \"$@\"\n")
    exe.chmod(0o755)
    return exe



def _settings(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line)


def test_installs_an_enabled_unit_whose_command_polls_imds(sandbox, hpcflow_cmd, imds):
    proc = sandbox.run("steps/50-spot-watch.sh", "--hpcflow", str(hpcflow_cmd), "--interval-s", "2",
                       "--endpoint", imds.url, "--node", "n2", "--slurm-bin", "/opt/slurm/bin")
    assert proc.returncode == 0, proc.stderr
    root = sandbox.root
    unit = (root / UNIT).read_text()
    assert f"ExecStart={hpcflow_cmd} spot-watch\n" in unit
    assert "EnvironmentFile=/etc/hpcflow/spot-watch.env\n" in unit and "Restart=always\n" in unit
    for hardening in ("NoNewPrivileges=yes", "ProtectSystem=full", "PrivateTmp=yes",
                      "CapabilityBoundingSet=CAP_SETUID CAP_SETGID", "RestrictSUIDSGID=yes"):
        assert f"\n{hardening}\n" in unit, hardening
    settings = _settings((root / ENV_FILE).read_text())
    assert settings["HPCFLOW_SPOT_ENDPOINT"] == imds.url
    assert settings["HPCFLOW_SPOT_INTERVAL_S"] == "2" and settings["HPCFLOW_SPOT_NODE"] == "n2"
    assert settings["PATH"].startswith("/opt/slurm/bin:")
    # enabled by the real systemctl, offline under the sandbox root
    wants = root / "etc/systemd/system/multi-user.target.wants/hpcflow-spot-watch.service"
    assert wants.is_symlink() and str(wants.readlink()).endswith("hpcflow-spot-watch.service")
    assert "enabled it under" in proc.stdout and "not started" in proc.stdout
    # Never left out: systemd-analyze comes with systemctl (Debian/Ubuntu package systemd).
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze not found: install systemd (it also ships systemctl)"
    verify = subprocess.run([analyze, "verify", str(root / UNIT)], capture_output=True, text=True)
    bad = [ln for ln in verify.stderr.splitlines() if "hpcflow-spot-watch" in ln
           and "non-existent unit" not in ln]  # targets do not exist in a sandbox root
    assert bad == [], verify.stderr
    # The unit's command line with its environment file, as systemd would run it (--once so it
    # returns): it polls the imitation and sees no notice, then a rebalance recommendation.
    argv = unit.split("ExecStart=", 1)[1].splitlines()[0].split()
    env = {**settings, "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    first = subprocess.run([*argv, "--once"], env=env, capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "node n2: no interruption notice"
    urllib.request.urlopen(urllib.request.Request(imds.url + "/_fake/rebalance", data=b"{}",
                                                  method="POST"), timeout=5).read()
    second = subprocess.run([*argv, "--once", "--json"], env=env, capture_output=True, text=True,
                            timeout=60)
    assert second.returncode == 0, second.stderr
    data = json.loads(second.stdout)["data"]
    assert data["notice"] is None and data["rebalance"] and data["node"] == "n2"
    assert "WARNING: EC2 rebalance recommendation" in second.stderr


def test_rerun_is_a_no_op_and_dry_run_writes_nothing(sandbox, hpcflow_cmd):
    dry = sandbox.run("steps/50-spot-watch.sh", "--hpcflow", str(hpcflow_cmd), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"would install: {sandbox.root / UNIT}" in dry.stdout
    assert list(sandbox.root.iterdir()) == []
    # through the entry script, the step's settings given as --env
    first = sandbox.run("hpcflow-bootstrap.sh", "--steps", "spot-watch",
                        "--env", f"HPCFLOW_SPOT_HPCFLOW={hpcflow_cmd}")
    assert first.returncode == 0, first.stderr
    assert "== 50-spot-watch" in first.stdout
    before = {p: p.lstat().st_mtime_ns for p in sandbox.root.rglob("*") if "var/log" not in str(p)}
    again = sandbox.run("steps/50-spot-watch.sh", "--hpcflow", str(hpcflow_cmd))
    assert again.returncode == 0, again.stderr
    assert "already installed, nothing to do" in again.stdout
    after = {p: p.lstat().st_mtime_ns for p in sandbox.root.rglob("*") if "var/log" not in str(p)}
    assert after == before


@pytest.mark.parametrize(("args", "message"), [
    pytest.param(["--interval-s", "5s"], "--interval-s: '5s' is not a number of seconds", id="interval"),
    pytest.param(["--endpoint", "169.254.169.254"], "is not an http(s) URL", id="endpoint"),
    pytest.param(["--hpcflow", "bin/hpcflow"], "is not an executable absolute path", id="relative"),
    pytest.param(["--node", "n1;reboot"], "is not a Slurm node name", id="node"),
    pytest.param(["--colour", "red"], "unknown argument '--colour'", id="unknown"),
])
def test_bad_input_is_refused_and_nothing_written(sandbox, hpcflow_cmd, args, message):
    proc = sandbox.run("steps/50-spot-watch.sh", "--hpcflow", str(hpcflow_cmd), *args)
    assert proc.returncode == 1
    assert message in proc.stderr
    assert not (sandbox.root / UNIT).exists()


def test_without_hpcflow_on_path_it_says_how_to_fix(sandbox):
    env = {**sandbox.env, "PATH": "/usr/bin:/bin"}
    sandbox.env = env
    proc = sandbox.run("steps/50-spot-watch.sh")
    assert proc.returncode == 1
    assert "hpcflow is not on PATH; install it on the node or give --hpcflow PATH" in proc.stderr


def _unsafe_layouts(tmp: Path, uid: int) -> dict[str, tuple[Path, str]]:
    """What a user could change under a root service: each layout's hpcflow command, and the
    part the step must name."""
    def command(path: Path, shebang: str = "/bin/sh") -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"#!{shebang}\nexit 0\n")
        path.chmod(0o755)
        return path

    open_dir = tmp / "open"
    layouts = {"world-writable-folder": (command(open_dir / "hpcflow"), f"{open_dir} is writable "
                                         "by group or others (mode 777)")}
    open_dir.chmod(0o777)
    group_file = command(tmp / "g" / "hpcflow")
    group_file.chmod(0o775)
    layouts["group-writable-command"] = (group_file, f"{group_file} is writable by group or "
                                                     "others (mode 775)")
    theirs = command(tmp / "u" / "hpcflow")
    os.chown(theirs, uid, uid)
    layouts["command-of-another-user"] = (theirs, f"{theirs} is owned by uid {uid}, not root")
    shared = tmp / "shared-bin"
    shared.mkdir()
    (shared / "python3").symlink_to("/bin/sh")
    shared.chmod(0o777)
    layouts["interpreter-in-a-world-writable-folder"] = (
        command(tmp / "i" / "hpcflow", str(shared / "python3")),
        f"--hpcflow's interpreter: '{shared / 'python3'}' is not safe")
    venv = tmp / "venv"
    (venv / "lib").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    planted = venv / "lib" / "sitecustomize.py"
    planted.write_text("")
    os.chown(planted, uid, uid)
    layouts["venv-file-of-another-user"] = (command(venv / "bin" / "hpcflow"),
                                           f"{planted} (in its environment {venv}) is owned by "
                                           f"uid {uid}, not root")
    # A root-owned environment that reaches into a user's folder: a package linked in, a .pth
    # line, an editable install's finder (setuptools >= 64) or an .egg-link.
    home = tmp / "home" / "alice"
    (home / "src" / "pkg").mkdir(parents=True)
    os.chown(home, uid, uid)
    for kind in ("linked", "pth", "finder", "egg-link"):
        env = tmp / f"venv-{kind}"
        site = env / "lib" / "python3.11" / "site-packages"
        site.mkdir(parents=True)
        (env / "pyvenv.cfg").write_text("home = /usr/bin\n")
        if kind == "linked":
            (site / "pkg").symlink_to(home / "src" / "pkg")
            why = f"the target of {site / 'pkg'} (in its environment {env})"
        elif kind == "pth":
            (site / "__editable__.pkg-1.0.pth").write_text(f"{home / 'src'}\n")
            why = f"a folder {site / '__editable__.pkg-1.0.pth'} puts on sys.path"
        elif kind == "finder":
            (site / "__editable__.pkg-1.0.pth").write_text(
                "import __editable___pkg_1_0_finder; __editable___pkg_1_0_finder.install()\n")
            (site / "__editable___pkg_1_0_finder.py").write_text(
                f"MAPPING: dict[str, str] = {{'pkg': '{home / 'src' / 'pkg'}'}}\n")
            why = f"a folder {site / '__editable___pkg_1_0_finder.py'} imports from"
        else:
            (site / "pkg.egg-link").write_text(f"{home / 'src'}\n.\n")
            why = f"a folder {site / 'pkg.egg-link'} imports from"
        layouts[f"venv-{kind}-into-a-users-folder"] = (
            command(env / "bin" / "hpcflow"), f"{why}, is under {home}, which is owned by uid {uid}")
    return layouts


UNSAFE = ["world-writable-folder", "group-writable-command", "command-of-another-user",
          "interpreter-in-a-world-writable-folder", "venv-file-of-another-user",
          "venv-linked-into-a-users-folder", "venv-pth-into-a-users-folder",
          "venv-finder-into-a-users-folder", "venv-egg-link-into-a-users-folder"]


@pytest.mark.skipif(os.geteuid() != 0, reason="root-owned layouts need root, as on a node and "
                    "in CI")
@pytest.mark.parametrize("layout", [pytest.param(n, id=n) for n in UNSAFE])
def test_an_hpcflow_others_can_change_is_refused(sandbox, tmp_path, layout):
    hpcflow, message = _unsafe_layouts(tmp_path / "t", 61999)[layout]
    proc = sandbox.run("steps/50-spot-watch.sh", "--hpcflow", str(hpcflow))
    assert proc.returncode == 1, proc.stdout
    assert message in proc.stderr, proc.stderr
    assert "is not safe for a service that runs as root" in proc.stderr
    assert not (sandbox.root / UNIT).exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="root-owned layouts need root, as on a node and "
                    "in CI")
def test_a_root_owned_sticky_folder_on_the_way_is_accepted(sandbox, tmp_path):
    sticky = tmp_path / "scratch"
    sticky.mkdir()
    sticky.chmod(0o1777)
    (sticky / "opt").mkdir(mode=0o755)
    hpcflow = sticky / "opt" / "hpcflow"
    hpcflow.write_text("#!/bin/sh\nexit 0\n")
    hpcflow.chmod(0o755)
    proc = sandbox.run("steps/50-spot-watch.sh", "--hpcflow", str(hpcflow))
    assert proc.returncode == 0, proc.stderr
    assert "Capability" in (sandbox.root / UNIT).read_text()


def _slurm_bins(tmp: Path, uid: int) -> dict[str, tuple[Path, str]]:
    """Folders a user could change that would come first on the root service's PATH: each
    --slurm-bin, and the part the step must name."""
    out = {}
    theirs = tmp / "theirs-bin"
    theirs.mkdir(parents=True)
    os.chown(theirs, uid, uid)
    out["folder-of-another-user"] = (theirs, f"is under {theirs}, which is owned by uid {uid}")
    planted = tmp / "root-bin"
    planted.mkdir()
    (planted / "squeue").write_text("#!/bin/sh\n")
    os.chown(planted / "squeue", uid, uid)
    out["a-command-of-another-user"] = (planted, f"{planted / 'squeue'} is owned by uid {uid}")
    linked = tmp / "linked-bin"
    linked.mkdir()
    home = tmp / "home" / "bob"
    home.mkdir(parents=True)
    os.chown(home, uid, uid)
    (linked / "scancel").symlink_to(home / "scancel")  # dangling: bob makes it later
    out["a-link-into-a-users-folder"] = (linked, f"is under {home}, which is owned by uid {uid}")
    out["a-missing-folder-under-theirs"] = (theirs / "bin",
                                            f"is under {theirs}, which is owned by uid {uid}")
    return out


@pytest.mark.skipif(os.geteuid() != 0, reason="root-owned layouts need root, as on a node and "
                    "in CI")
@pytest.mark.parametrize("layout", ["folder-of-another-user", "a-command-of-another-user",
                                    "a-link-into-a-users-folder", "a-missing-folder-under-theirs"])
def test_a_slurm_bin_others_can_change_is_refused(sandbox, hpcflow_cmd, tmp_path, layout):
    slurm_bin, message = _slurm_bins(tmp_path / "t", 61999)[layout]
    proc = sandbox.run("steps/50-spot-watch.sh", "--hpcflow", str(hpcflow_cmd),
                       "--slurm-bin", str(slurm_bin))
    assert proc.returncode == 1, proc.stdout
    assert "--slurm-bin" in proc.stderr and message in proc.stderr, proc.stderr
    assert "is not safe for a service that runs as root" in proc.stderr
    assert not (sandbox.root / UNIT).exists()
