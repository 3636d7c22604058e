"""The code keeps to the lint rules of pyproject.toml ([tool.ruff]): a change that adds an
unused import, an unsorted import block or an over-long line fails here, not in review."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ruff_finds_nothing_in_the_package_tests_and_benchmarks():
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache",
                          "hpcflow", "tests", "bench"],
                         cwd=ROOT, capture_output=True, text=True, check=False, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
