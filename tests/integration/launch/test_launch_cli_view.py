"""Python submissions appear in ``hpcflow list/status/logs/report`` like CLI ones: the same
run-directory layout (job.yaml, job.sbatch, submissions.jsonl, .hpcflow/events.jsonl, the job
log) and the same per-user index."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from launch_programs import add, linear_train

from hpcflow.launch import Executor

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(600)]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpcflow", *args], capture_output=True,
                          text=True, timeout=120)


def test_python_jobs_are_listed_followed_and_reported_by_the_cli(launch_cluster, launch_env):
    executor = Executor(launch_env, time_limit="00:03:00")
    single = executor.submit(linear_train, {"seed": 0, "steps": 3})
    assert single.result()["step"] == 3
    elements = executor.map_array(add, [1, 2], [10, 20])
    assert [j.result() for j in elements] == [11, 22]

    listed = cli("list", "--json")
    assert listed.returncode == 0, listed.stderr
    ids = {row["job_id"] for row in json.loads(listed.stdout)["data"]}
    assert {single.job_id, *(j.job_id for j in elements)} <= ids

    for job in (single, elements[1]):
        status = cli("status", job.job_id, "--json")
        assert status.returncode == 0, status.stderr
        st = json.loads(status.stdout)["data"]
        assert st["finished"] is True and st["attempts"] == 1, st
        logs = cli("logs", job.job_id)
        assert logs.returncode == 0 and "Job completed successfully" in logs.stdout, logs.stderr

    report = cli("report", single.job_id, "--json")
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["ok"] is True and single.job_id in report.stdout
