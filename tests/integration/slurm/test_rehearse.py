"""`hpcflow local-cluster rehearse`: the quickstart's path, through the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slurm]

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "tiny-dp.yaml"


def test_rehearsal_preempts_requeues_and_completes(local_cluster, hpcflow_home, tmp_path):
    cmd = [sys.executable, "-m", "hpcflow", "local-cluster", "rehearse", str(EXAMPLE),
           "--set", f"run_dir={tmp_path / 'run'}",
           "--set", "program.args=[--steps, '16', --step-time-s, '0.3']",
           "--preemptions", "1", "--preempt-after-s", "2", "--timeout-s", "400", "--json"]
    print("+", " ".join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=450)
    print(proc.stdout, proc.stderr)
    assert proc.returncode == 0
    out = json.loads(proc.stdout)["data"]
    assert out["preemptions_sent"] == 1 and out["requeues"] == 1
    assert out["status"]["state"] == "COMPLETED" and out["status"]["attempts"] == 2
    assert "job requeued itself" in proc.stderr and "resumed from step" in proc.stderr


def test_rehearsal_of_a_bad_spec_fails_cleanly(local_cluster, hpcflow_home, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "hpcflow", "local-cluster", "rehearse",
                           str(EXAMPLE), "--set", "nodes=0"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and "nodes" in proc.stderr and "Traceback" not in proc.stderr
