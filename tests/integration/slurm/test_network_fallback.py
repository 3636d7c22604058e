"""A job that would train over TCP sockets on an EFA instance stops in its first minute, on the
real local cluster (docs/protocol.md, "The network check"). The cluster has no EFA and gloo
writes no NCCL log, so the NCCL log the ranks read (``NCCL_DEBUG_FILE``, which the runtime
respects) is put where NCCL would write it, holding what NCCL prints when it falls back."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hpcflow import ending_kinds as K
from hpcflow import protocol as P

pytestmark = [pytest.mark.slurm]

PY = sys.executable
PROGRAMS = Path(__file__).resolve().parents[2] / "programs"
LINE = "n1:10:10 [0] NCCL INFO "


def test_a_fall_back_to_sockets_on_p5_ends_the_job_at_once_and_report_says_why(submit_job,
                                                                               tmp_path):
    log = tmp_path / "nccl.log"
    log.write_text(f"{LINE}Bootstrap : Using ens5:10.0.0.5<0>\n"
                   f"{LINE}NET/Plugin : No plugin found, using internal implementation\n"
                   f"{LINE}Using network Socket\n")
    job = submit_job({
        "name": "fallback", "nodes": 1, "tasks_per_node": 2, "time_limit": "00:10:00",
        "program": {"argv": [PY, str(PROGRAMS / "fsdp_loop.py"), "--steps", "200",
                             "--step-time-s", "0.3"]},
        "env": {"OMP_NUM_THREADS": "1", "NCCL_DEBUG_FILE": str(log)},
        "network": {"instance_type": "p5.48xlarge"},
    })
    final = job.wait_finished(300)
    assert final.restarts == 0, job.dump()
    start, end = job.event("attempt_start"), job.event("job_end")
    assert end["reason"] == P.REASON_NETWORK_FALLBACK and end["rc"] == P.EXIT_NETWORK_FALLBACK
    assert end["time"] - start["time"] < 60, job.dump()
    network = job.event(P.EVENT_NETWORK)
    assert network is not None and network["stopped"] is True
    assert not job.event("requeue") and "hpcflow-step" not in job.log()
    status = subprocess.run([PY, "-m", "hpcflow", "status", job.job_id, "--json"],
                            capture_output=True, text=True, timeout=120, check=False)
    assert json.loads(status.stdout)["data"]["ending"] == K.ENDING_NETWORK_FALLBACK
    report = subprocess.run([PY, "-m", "hpcflow", "report", job.job_id], capture_output=True,
                            text=True, timeout=120, check=False)
    assert report.returncode == 0, report.stderr
    assert "NCCL over TCP sockets: EFA expected on p5.48xlarge" in report.stdout, report.stdout
