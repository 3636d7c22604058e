"""apt-install.sh, the one apt-get installer (scripts/install.sh and `local-cluster up` call it):
shellcheck-clean, and it refuses clearly before running apt-get."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from hpcflow.local_cluster.system import APT_INSTALL

REPO = Path(__file__).resolve().parents[3]


def test_both_callers_use_the_one_installer() -> None:
    assert f'bash "${{repo}}/{APT_INSTALL.relative_to(REPO)}"' in (REPO / "scripts/install.sh").read_text()
    assert "apt-get install" not in (REPO / "scripts/install.sh").read_text()


def test_it_is_shellcheck_clean() -> None:
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck not found (scripts/install.sh --dev installs it)"
    proc = subprocess.run([shellcheck, str(APT_INSTALL)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def test_no_package_is_a_usage_error() -> None:
    proc = subprocess.run(["bash", str(APT_INSTALL)], capture_output=True, text=True)
    assert proc.returncode == 1 and "no package named" in proc.stderr


def test_without_apt_get_it_says_so(tmp_path: Path) -> None:
    proc = subprocess.run(["/bin/bash", str(APT_INSTALL), "munge"], capture_output=True, text=True,
                          env={"PATH": str(tmp_path)})
    assert proc.returncode == 1 and "missing munge and no apt-get" in proc.stderr
