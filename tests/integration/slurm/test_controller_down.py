"""``hpcflow status`` while slurmctld is down, on the real local cluster: a bounded answer that
says the controller is unreachable, exit 4; never a guessed UNKNOWN with exit 0.

slurmctld is stopped (TERM, by the pid the local cluster recorded) and started again with
``manager.up``, which reuses the running slurmds; slurmctld reloads its saved job state, so the
running job survives. This is the only test that stops a daemon of the local cluster.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from slurm_helpers import wait_for

from hpcflow.local_cluster import manager
from hpcflow.local_cluster import processes as procs

pytestmark = [pytest.mark.slurm, pytest.mark.cluster_alone]


def test_status_with_slurmctld_stopped_says_unreachable_within_the_budget(submit_job,
                                                                          local_cluster):
    job = submit_job({"name": "ctld-down", "nodes": 1, "time_limit": "00:05:00",
                      "program": {"argv": ["sleep", "240"]}})
    wait_for(lambda: job.status().state == "RUNNING" and job.event("attempt_start"), 120,
             "the job to run")
    records_path = manager.records_path(local_cluster)
    ctld = procs.load_records(records_path)["slurmctld"]
    os.kill(ctld.pid, signal.SIGTERM)
    try:
        wait_for(lambda: not procs.is_alive(ctld), 30, "slurmctld to stop")
        env = {**os.environ, "HPCFLOW_SLURM_QUERY_TIMEOUT_S": "4"}
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "hpcflow", "status", job.job_id],
                              capture_output=True, text=True, timeout=120, env=env)
        took = time.monotonic() - started
    finally:
        manager.up(local_cluster, install=False)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "the Slurm controller" in proc.stderr and (
        "did not answer within 4 s" in proc.stderr or "unreachable" in proc.stderr), proc.stderr
    assert "ledger last recorded 'attempt_start'" in proc.stderr
    assert "UNKNOWN" not in proc.stdout + proc.stderr
    assert "no longer knows" not in proc.stdout + proc.stderr
    # The budget (4 s) plus the interpreter's start; slurm's own client alone takes ~18 s.
    assert took < 12, took
    # Back up: Slurm still knows the job, and status says so.
    assert wait_for(lambda: job.status().state == "RUNNING", 60, "status to answer again")
