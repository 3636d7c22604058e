"""The researcher's CLI against the real local cluster: following a job to its end, a busy run
directory, a dry run and refused specs (submit, status, logs, list and cancel run in
test_readme_everyday.py, from the README's block)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.slurm]

HPCFLOW = [sys.executable, "-m", "hpcflow"]


def hpcflow(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    cmd = [*HPCFLOW, *args]
    print("+", " ".join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    print(proc.stdout, proc.stderr)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def write_spec(tmp_path: Path, **spec) -> Path:
    base = {"name": "cli", "nodes": 1, "tasks_per_node": 1, "time_limit": "5",
            "run_dir": str(tmp_path / "run"),
            "program": {"argv": [sys.executable, "-c", "import time; print('hello', flush=True); "
                                 "time.sleep(60)"]}}
    base.update(spec)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(base))
    return path


def test_follow_returns_when_the_job_ends(local_cluster, hpcflow_home, tmp_path):
    spec = write_spec(tmp_path, program={"argv": [sys.executable, "-c", "print('bye')"]})
    proc = hpcflow("submit", str(spec), "--follow")
    assert "bye" in proc.stdout
    assert "COMPLETED" in proc.stderr


def test_follow_exits_non_zero_when_the_job_fails(local_cluster, hpcflow_home, tmp_path):
    spec = write_spec(tmp_path, program={"argv": [sys.executable, "-c", "raise SystemExit(3)"]})
    proc = hpcflow("submit", str(spec), "--follow", check=False)
    assert proc.returncode == 1 and "FAILED (exit 3" in proc.stderr


def test_a_run_dir_whose_job_still_runs_is_refused(local_cluster, hpcflow_home, tmp_path):
    spec = write_spec(tmp_path)
    first = json.loads(hpcflow("submit", str(spec), "--json").stdout)["data"]["job_id"]
    try:
        before = (tmp_path / "run" / "job.sbatch").read_text()
        proc = hpcflow("submit", str(spec), "--set", "nodes=2", check=False)
        assert proc.returncode == 3
        assert f"belongs to job {first}" in proc.stderr and "not finished" in proc.stderr
        assert (tmp_path / "run" / "job.sbatch").read_text() == before  # untouched
    finally:
        hpcflow("cancel", first, check=False)


def test_dry_run_prints_the_script_and_writes_nothing(hpcflow_home, tmp_path):
    spec = write_spec(tmp_path)
    proc = hpcflow("submit", str(spec), "--dry-run")
    assert proc.stdout.startswith("#!/usr/bin/env bash")
    assert "--signal=B:USR1@" in proc.stdout and "--requeue" in proc.stdout
    assert not (tmp_path / "run").exists()
    assert not hpcflow_home.exists()


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        pytest.param("nodes", 0, "nodes", id="zero-nodes"),
        pytest.param("launcher", "mpirun", "launcher", id="unknown-launcher"),
        pytest.param("time_limit", "soon", "time_limit", id="bad-time"),
        pytest.param("nodez", 2, "nodez", id="unknown-field"),
    ],
)
def test_bad_spec_is_refused_with_the_field_and_writes_nothing(hpcflow_home, tmp_path, field,
                                                               value, needle):
    spec = write_spec(tmp_path, **{field: value})
    proc = hpcflow("submit", str(spec), check=False)
    assert proc.returncode == 2
    assert needle in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "run").exists()
    assert not hpcflow_home.exists()


def test_bad_override_is_refused(hpcflow_home, tmp_path):
    proc = hpcflow("submit", str(write_spec(tmp_path)), "--set", "preemption.max_requeues=-1",
                   check=False)
    assert proc.returncode == 2 and "preemption.max_requeues" in proc.stderr
    assert not (tmp_path / "run").exists()
