"""scripts/quickstart.sh shows the status of the job it rehearsed, not the user's newest job."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
QUICKSTART = REPO / "scripts" / "quickstart.sh"

STUB = """#!/usr/bin/env bash
printf '%s\\n' "$*" >>"{calls}"
if [[ $1 == local-cluster && $2 == rehearse ]]; then
  printf '%s\\n' '{rehearse_out}'
  exit {rehearse_rc}
fi
echo "status table"
"""


def fake_venv(tmp_path: Path, rehearse_out: str, rehearse_rc: int = 0) -> tuple[Path, Path]:
    venv, calls = tmp_path / "venv", tmp_path / "calls.txt"
    (venv / "bin").mkdir(parents=True)
    hpcflow = venv / "bin" / "hpcflow"
    hpcflow.write_text(STUB.format(calls=calls, rehearse_out=rehearse_out, rehearse_rc=rehearse_rc))
    hpcflow.chmod(0o755)
    (venv / "bin" / "python").symlink_to(sys.executable)
    return venv, calls


def run_example(venv: Path, *args: str) -> subprocess.CompletedProcess[str]:
    script = f'source "{QUICKSTART}"; cd "{REPO}"; run_example "$@"'
    return subprocess.run(["bash", "-c", script, "quickstart", str(venv), *args],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PATH": os.environ.get("PATH", "")})


def test_status_is_asked_for_the_rehearsed_job(tmp_path: Path) -> None:
    out = json.dumps({"ok": True, "data": {"job_id": "103", "requeues": 1}})
    venv, calls = fake_venv(tmp_path, out)
    proc = run_example(venv, "--preempt-after-s", "5")
    assert proc.returncode == 0, proc.stderr
    lines = calls.read_text().splitlines()
    assert lines[0].startswith("local-cluster rehearse examples/tiny-dp.yaml --set run_dir=")
    assert "--preempt-after-s 5" in lines[0]
    assert lines[1] == "status 103"
    assert "status table" in proc.stdout


@pytest.mark.parametrize("rc", [1, 2])
def test_a_failed_rehearsal_without_a_job_prints_why_and_fails(tmp_path: Path, rc: int) -> None:
    out = json.dumps({"ok": False, "data": None, "error": {"message": "nodes: 0: bad"}})
    venv, calls = fake_venv(tmp_path, out, rehearse_rc=rc)
    proc = run_example(venv)
    assert proc.returncode == rc
    assert "nodes: 0: bad" in proc.stderr
    assert len(calls.read_text().splitlines()) == 1


def test_a_rehearsal_that_did_not_complete_still_shows_the_status(tmp_path: Path) -> None:
    out = json.dumps({"ok": True, "data": {"job_id": "7"}})
    venv, calls = fake_venv(tmp_path, out, rehearse_rc=1)
    proc = run_example(venv)
    assert proc.returncode == 1
    assert calls.read_text().splitlines()[1] == "status 7"
