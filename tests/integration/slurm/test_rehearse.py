"""`hpcflow local-cluster rehearse`: the quickstart's path, through the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slurm]

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "tiny-dp.yaml"


def test_rehearsal_of_a_bad_spec_fails_cleanly(local_cluster, hpcflow_home, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "hpcflow", "local-cluster", "rehearse",
                           str(EXAMPLE), "--set", "nodes=0"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and "nodes" in proc.stderr and "Traceback" not in proc.stderr


def rehearse(path: Path, *options: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "hpcflow", "local-cluster", "rehearse", str(path),
           "--preemptions", "1", "--timeout-s", "500", "--json", *options]
    print("+", " ".join(cmd))
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finished(proc: subprocess.Popen) -> tuple[dict, str]:
    out, err = proc.communicate(timeout=550)
    print(out, err)
    assert proc.returncode == 0, err[-4000:]
    return json.loads(out)["data"], err


def test_rehearsals_of_a_protocol_program_and_of_one_that_prints_no_steps(
        local_cluster, hpcflow_home, tmp_path):
    """Two rehearsals side by side (2 + 4 of the local cluster's 2 x 4 CPUs): a program on the
    protocol, preempted with the spec's own signal (USR2), and a plain DDP script that reports
    no steps and has no hpcflow checkpoint, with a notice that the nodes go away."""
    from hpcflow.runtime.env import free_port

    programs = Path(__file__).resolve().parents[2] / "programs"
    own = {
        "name": "usr2", "nodes": 1, "tasks_per_node": 2, "time_limit": "00:20:00",
        "run_dir": str(tmp_path / "run-usr2"),
        "program": {"argv": [sys.executable, str(programs / "fsdp_loop.py"), "--steps", "30",
                             "--step-time-s", "0.3"]},
        "env": {"OMP_NUM_THREADS": "1"},
        "preemption": {"signal": "USR2"},
    }
    plain = {
        "name": "plain", "nodes": 2, "tasks_per_node": 2, "time_limit": "00:20:00",
        "run_dir": str(tmp_path / "run-plain"),
        "program": {"argv": [sys.executable, str(programs / "plain_ddp.py"), "--steps", "40",
                             "--ckpt", str(tmp_path / "plain.pt")]},
        "env": {"OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(free_port())},
    }
    paths = {}
    for name, spec in (("usr2", own), ("plain", plain)):
        paths[name] = tmp_path / f"{name}.yaml"
        paths[name].write_text(json.dumps(spec))  # JSON is YAML
    own_proc = rehearse(paths["usr2"], "--preempt-after-s", "2")
    plain_proc = rehearse(paths["plain"], "--preempt-after-s", "15", "--notice-s", "40")

    out, err = finished(own_proc)
    assert "sent USR2 to the batch shell" in err and "job requeued itself" in err
    assert "resumed from step" in err
    assert out["preemptions_sent"] == 1 and out["requeues"] == 1
    assert out["status"]["state"] == "COMPLETED" and out["status"]["attempts"] == 2
    # checkpoint.interval: auto, the default for a program on the runtime API: the resumed
    # attempt chose its interval again after its own warm-up (the first attempt, preempted about
    # 2 s in, chose one only if it got through its warm-up first).
    from hpcflow import protocol

    events = [json.loads(x) for x in
              protocol.ledger_path(tmp_path / "run-usr2").read_text().splitlines()]
    chosen = [e for e in events if e["event"] == protocol.EVENT_INTERVAL_CHOSEN]
    [resumed] = [e for e in events if e["event"] == "requeue"]
    again = [e for e in chosen if e["restart"] == 1]
    assert [e["reason"] for e in again] == [protocol.INTERVAL_REASON_RESTART]
    assert all(e["reason"] == protocol.INTERVAL_REASON_WARMUP for e in chosen if e["restart"] == 0)
    assert again[0]["step"] > resumed["step"] and again[0]["interval_steps"] >= 1
    assert again[0]["restart_s"] is not None and again[0]["restart_s"] > 0

    out, err = finished(plain_proc)
    assert out["preemptions_sent"] == 1 and out["requeues"] == 1
    assert out["status"]["state"] == "COMPLETED" and out["status"]["attempts"] == 2
    assert "reports no training steps" in err
    assert "requeued without an hpcflow checkpoint" in err
