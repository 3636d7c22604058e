"""``hpcflow local-cluster status | head``: a reader that leaves early is no error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_local_cluster_status_into_a_closed_pipe_exits_141_silently(local_cluster, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "ERR": str(tmp_path / "stderr")}
    script = (f"{sys.executable} -m hpcflow local-cluster status 2>\"$ERR\" | true; "
              'echo "${PIPESTATUS[0]}"; cat "$ERR"')
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120,
                          env=env)
    status, _, stderr = proc.stdout.partition("\n")
    assert status == "141", proc.stdout
    assert stderr == "", stderr
    shown = subprocess.run([sys.executable, "-m", "hpcflow", "local-cluster", "status"], env=env,
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0 and "n1" in shown.stdout, shown.stdout + shown.stderr
