"""docs/remote.md says only what the code does: every line of its command block runs, from a
"laptop" (its own HOME: default key and known_hosts in ~/.ssh) against a head node on loopback
sshd and the local Slurm cluster."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slurm, pytest.mark.sshd]

REPO = Path(__file__).resolve().parents[3]
REMOTE_HPCFLOW = f"PYTHONPATH={REPO} {sys.executable} -m hpcflow"

DOC = (REPO / "docs" / "remote.md").read_text()


def test_the_commands_of_the_doc_run(local_cluster, start_sshd, ssh_client_key, tmp_path):
    remote_home = tmp_path / "head-home"
    remote_home.mkdir()
    sshd = start_sshd("head", {"HOME": str(remote_home), "HPCFLOW_HOME": str(remote_home / "state"),
                               "OMP_NUM_THREADS": "1"})
    laptop = tmp_path / "laptop"
    (laptop / ".ssh").mkdir(parents=True)
    shutil.copy(ssh_client_key, laptop / ".ssh" / "id_ed25519")
    env = {k: v for k, v in os.environ.items() if k not in ("SSH_AUTH_SOCK", "HPCFLOW_HOME")}
    env.update(HOME=str(laptop), HEAD=f"root@127.0.0.1:{sshd.port}",
               HPCFLOW_REMOTE_HPCFLOW=REMOTE_HPCFLOW,
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    [block] = re.findall(r"^```bash\n(.*?)^```", DOC, re.M | re.S)
    lines = block.strip().splitlines()
    assert [ln.split('"$HEAD"')[1].split()[0] for ln in lines] == [
        "--accept-new-host-keys", "--code", "status", "logs", "report", "cancel"]
    out: list[subprocess.CompletedProcess[str]] = []
    job_id = ""
    try:
        for line in lines:
            line = line.replace("JOBID", job_id)
            print("+", line)
            proc = subprocess.run(["bash", "-c", line], cwd=REPO, env=env, capture_output=True,
                                  text=True, timeout=400)
            print(proc.stdout[-3000:], proc.stderr[-3000:])
            assert proc.returncode == 0, line
            out.append(proc)
            if not job_id and (m := re.search(r"^submitted job (\d+)", proc.stdout, re.M)):
                job_id = m[1]
    finally:
        if job_id:
            subprocess.run(["scancel", job_id], check=False)
    listed, submitted, status, follow, report, cancel = out
    # first contact saved the head node's key; the run folder went under the remote $HOME
    assert sshd.host_pub.split()[1] in (laptop / ".local/state/hpcflow/known_hosts").read_text()
    assert not (laptop / ".ssh" / "known_hosts").exists()  # the user's file is only read
    assert listed.stdout.strip() and job_id
    assert re.search(rf"uploaded code [0-9a-f]{{12}} and the spec \(\d+ bytes\) to "
                     rf"root@127.0.0.1:{sshd.port}:{re.escape(str(remote_home))}/hpcflow-remote/"
                     r"my-loop-\d{8}T\d{6}Z-\w{6}$", submitted.stderr, re.M)
    assert job_id in status.stdout
    assert "hpcflow-step " in follow.stdout and f"job {job_id} COMPLETED" in follow.stderr
    assert "goodput" in report.stdout
    assert f"job {job_id} had already ended (COMPLETED)" in cancel.stdout
