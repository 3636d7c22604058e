"""`hpcflow doctor nccl` on the local Slurm cluster (2 nodes, no GPUs): the job is rendered,
submitted and waited for for real; the program it runs is a stub that prints nccl-tests output
(all_reduce_perf_2x_p5.txt: nccl-tests' format, illustrative figures, not a measurement)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SAMPLE = Path(__file__).with_name("all_reduce_perf_2x_p5.txt")
pytestmark = pytest.mark.slurm


def _stub(tmp_path: Path, text: str) -> Path:
    sample = tmp_path / "sample.txt"
    sample.write_text(text)
    stub = tmp_path / "all_reduce_perf"
    # rank 0 prints the table, as nccl-tests does; every rank records its arguments
    stub.write_text("#!/usr/bin/env bash\n"
                    f'echo "$SLURM_PROCID $*" >> "{tmp_path}/calls"\n'
                    f'if [ "$SLURM_PROCID" = 0 ]; then cat "{sample}"; fi\n')
    stub.chmod(0o755)
    return stub


def _doctor_nccl(tmp_path, stub, *extra):
    cmd = [sys.executable, "-m", "hpcflow", "doctor", "nccl", "--nodes", "2",
           "--instance-type", "p5.48xlarge", "--gpus-per-node", "1", "--no-gpus", "--mpi", "none",
           "--binary", str(stub), "--workdir", str(tmp_path / "work"), "--timeout", "300",
           "--json", *extra]
    print("+", " ".join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
    print(proc.stdout, proc.stderr, sep="\n")
    return proc


def test_nccl_job_runs_across_two_nodes_and_is_judged(tmp_path):
    stub = _stub(tmp_path, SAMPLE.read_text())
    proc = _doctor_nccl(tmp_path, stub)
    assert proc.returncode == 0
    doc = json.loads(proc.stdout)["data"]
    checks = {c["name"]: c for c in doc["checks"]}
    assert checks["nccl-tests"]["level"] == "pass"
    assert checks["nccl-transport"]["level"] == "pass"
    assert checks["busbw"]["level"] == "pass"
    assert "356.94 GB/s = 89% of the 400 GB/s EFA line rate of p5.48xlarge" in checks["busbw"]["message"]
    calls = sorted((tmp_path / "calls").read_text().splitlines())
    assert [c.split()[0] for c in calls] == ["0", "1"]  # one rank on each of the two nodes
    assert calls[0].split()[1:] == ["-b", "8", "-e", "8G", "-f", "2", "-g", "1"]
    script = (tmp_path / "work/nccl-tests.sbatch").read_text()
    assert "export FI_EFA_USE_HUGE_PAGE=0" in script and "NCCL_IB_" not in script


def test_socket_fallback_and_wrong_values_fail(tmp_path):
    text = SAMPLE.read_text().replace("Using network Libfabric", "Using network Socket")
    text = text.replace("  243.98      0", "  243.98     12", 1)
    stub = _stub(tmp_path, text)
    proc = _doctor_nccl(tmp_path, stub)
    assert proc.returncode == 1
    checks = {c["name"]: c for c in json.loads(proc.stdout)["data"]["checks"]}
    assert checks["nccl-transport"]["level"] == "fail"
    assert checks["nccl-tests"]["level"] == "fail"
    assert "size 134217728 B: wrong results (out-of-place 12" in checks["nccl-tests"]["message"]
