"""`hpcflow doctor` on this machine (no GPU, no EFA, no /fsx): clear lines, never a traceback."""

from __future__ import annotations

import json
import re
import subprocess
import sys


def _doctor(*args):
    return subprocess.run([sys.executable, "-m", "hpcflow", "doctor", *args], capture_output=True,
                          text=True, timeout=120)


def test_doctor_without_gpus_fails_cleanly_with_fixes(tmp_path):
    proc = _doctor("--instance-type", "p5.48xlarge", "--shared-dir", str(tmp_path / "nofsx"))
    out = proc.stdout
    assert proc.returncode == 1
    assert "Traceback" not in out + proc.stderr
    for line in out.splitlines()[:-1]:
        assert re.match(r"^(PASS|WARN|FAIL)  \S+|^ {6}\s+fix: \S", line), line
    assert re.search(r"^FAIL  gpus +nvidia-smi not found", out, re.M)
    assert re.search(r"^FAIL  shared-fs +.*nofsx is not a mount point", out, re.M)
    assert re.search(r"^doctor: \d+ passed, \d+ warnings, \d+ failed$", out, re.M)


def test_doctor_json_lists_every_check(tmp_path):
    proc = _doctor("--json", "--shared-dir", str(tmp_path), "--checkpoint-dir", str(tmp_path))
    doc = json.loads(proc.stdout)
    names = [c["name"] for c in doc["data"]["checks"]]
    assert names == ["instance", "gpus", "efa", "nccl", "nccl-plugin", "env-preset", "nccl-ifname",
                     "slurm", "preempt-signal", "requeue", "shared-fs", "checkpoint-dir"]
    by_name = {c["name"]: c for c in doc["data"]["checks"]}
    assert by_name["checkpoint-dir"]["level"] == "pass"
    assert all(c["fix"] for c in doc["data"]["checks"] if c["level"] != "pass")
    failed = doc["data"]["failed"]
    assert failed > 0 and proc.returncode == 1  # no GPU here
    assert doc["ok"] is False and doc["error"]["exit_code"] == 1
    assert doc["error"]["message"] == f"{failed} check(s) failed"
