"""``python -m hpcflow.examples.train`` as a real process: exit codes and the files it writes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from runtime_launch import base_env

TRAIN = [sys.executable, "-m", "hpcflow.examples.train"]


def run(args: list[str], env: dict[str, str], timeout_s: float = 90) -> subprocess.CompletedProcess:
    print("$", " ".join(TRAIN + args))
    return subprocess.run(TRAIN + args, env=env, capture_output=True, text=True, timeout=timeout_s)


def test_garbled_slurm_variable_exits_2_naming_it():
    env = {**base_env(), "SLURM_PROCID": "zero", "SLURM_NTASKS": "4", "SLURM_LOCALID": "0",
           "SLURM_NODEID": "0", "SLURM_JOB_NODELIST": "n1", "SLURM_JOB_ID": "5"}
    result = run(["--steps", "2"], env)
    assert result.returncode == 2, result.stderr
    assert "SLURM_PROCID='zero' is not a non-negative integer" in result.stderr


def test_bad_argument_exits_2():
    result = run(["--steps", "0"], base_env())
    assert result.returncode == 2
    assert "--steps must be at least 1" in result.stderr


@pytest.mark.dist
@pytest.mark.timeout(120)
def test_single_process_preempted_by_flag_exits_75_after_commit(tmp_path):
    flag = tmp_path / ".hpcflow" / "preempt-1-0.flag"
    committed = tmp_path / ".hpcflow" / "committed-1-0.json"
    flag.parent.mkdir()
    flag.write_text("")
    env = {**base_env(), "HPCFLOW_RUN_DIR": str(tmp_path), "HPCFLOW_PREEMPT_FLAG": str(flag),
           "HPCFLOW_PREEMPT_COMMITTED": str(committed)}
    result = run(["--steps", "5"], env)
    assert result.returncode == 75, result.stdout + result.stderr
    assert json.loads(committed.read_text())["step"] == 1
    assert (tmp_path / "checkpoints" / "step_1" / "hpcflow-commit.json").is_file()
    assert result.stdout.splitlines()[-1] == 'hpcflow-preempted {"step": 1}'
