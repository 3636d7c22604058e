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


def test_rehearsal_preempts_a_program_that_prints_no_steps(local_cluster, hpcflow_home, tmp_path):
    from hpcflow.runtime.env import free_port

    program = Path(__file__).resolve().parents[2] / "programs" / "plain_ddp.py"
    spec = {
        "name": "plain", "nodes": 2, "tasks_per_node": 2, "time_limit": "00:20:00",
        "run_dir": str(tmp_path / "run"),
        "program": {"argv": [sys.executable, str(program), "--steps", "40",
                             "--ckpt", str(tmp_path / "plain.pt")]},
        "env": {"OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(free_port())},
    }
    path = tmp_path / "plain.yaml"
    path.write_text(json.dumps(spec))  # JSON is YAML
    cmd = [sys.executable, "-m", "hpcflow", "local-cluster", "rehearse", str(path),
           "--preemptions", "1", "--preempt-after-s", "15", "--notice-s", "40",
           "--timeout-s", "500", "--json"]
    print("+", " ".join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=550)
    print(proc.stdout, proc.stderr)
    assert proc.returncode == 0
    out = json.loads(proc.stdout)["data"]
    assert out["preemptions_sent"] == 1 and out["requeues"] == 1
    assert out["status"]["state"] == "COMPLETED" and out["status"]["attempts"] == 2
    assert "reports no training steps" in proc.stderr
    assert "requeued without an hpcflow checkpoint" in proc.stderr


def test_rehearsal_sends_the_spec_s_own_signal(local_cluster, hpcflow_home, tmp_path):
    program = Path(__file__).resolve().parents[2] / "programs" / "fsdp_loop.py"
    spec = {
        "name": "usr2", "nodes": 1, "tasks_per_node": 2, "time_limit": "00:20:00",
        "run_dir": str(tmp_path / "run"),
        "program": {"argv": [sys.executable, str(program), "--steps", "30",
                             "--step-time-s", "0.3"]},
        "env": {"OMP_NUM_THREADS": "1"},
        "preemption": {"signal": "USR2"},
    }
    path = tmp_path / "usr2.yaml"
    path.write_text(json.dumps(spec))
    cmd = [sys.executable, "-m", "hpcflow", "local-cluster", "rehearse", str(path),
           "--preemptions", "1", "--preempt-after-s", "2", "--timeout-s", "500", "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=550)
    print(proc.stdout, proc.stderr)
    assert proc.returncode == 0
    assert "sent USR2 to the batch shell" in proc.stderr and "job requeued itself" in proc.stderr
    out = json.loads(proc.stdout)["data"]
    assert out["requeues"] == 1 and out["status"]["state"] == "COMPLETED"
