"""`hpcflow --host` on the real local Slurm cluster, through a real sshd on loopback: submit with
a code snapshot, status, logs, `logs -f` across a requeue, cancel; Ctrl-C on `logs -f` leaves no
follower on the head node."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml
from polling import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.sshd]

PROG = """import os, time
n = os.environ.get("SLURM_RESTART_COUNT", "0")
print(f"prog attempt {n}", flush=True)
time.sleep(600 if n == "0" else 1)
print("prog done", flush=True)
"""


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                   check=True, capture_output=True)


def make_project(root: Path) -> Path:
    """A git repository with a program and its spec; the spec is edited after the commit and
    an untracked file lies beside it."""
    root.mkdir()
    (root / "prog.py").write_text(PROG)
    spec = {"name": "old-name", "nodes": 1, "tasks_per_node": 1, "time_limit": "10",
            "run_dir": "runs/remote", "program": {"argv": [sys.executable, "prog.py"], "workdir": "."}}
    (root / "job.yaml").write_text(yaml.safe_dump(spec))
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "project")
    (root / "job.yaml").write_text(yaml.safe_dump({**spec, "name": "remote"}))
    (root / "notes.txt").write_text("not committed\n")
    return root / "job.yaml"


def remote_status(head, job_id: str) -> dict:  # noqa: ANN001
    proc = head.hpcflow("status", job_id, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["data"]


class Follower:
    """`hpcflow --host ... logs -f JOB` run here, its stdout read as it streams."""

    def __init__(self, head, job_id: str) -> None:  # noqa: ANN001
        cmd = [sys.executable, "-m", "hpcflow", *head.args(), "logs", "-f", job_id]
        print("+", " ".join(cmd))
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self.out: list[str] = []
        self.thread = threading.Thread(target=lambda: self.out.extend(iter(self.proc.stdout.readline, "")),
                                       daemon=True)
        self.thread.start()

    def text(self) -> str:
        return "".join(self.out)


def remote_followers(job_id: str) -> list[int]:
    """Pids of `hpcflow logs -f JOB` processes started by the head node (not by this side)."""
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [w.decode(errors="replace") for w in argv]
        if "logs" in words and "-f" in words and job_id in words and "--host" not in words:
            pids.append(int(proc.name))
    return pids


def test_submit_status_logs_follow_across_a_requeue(local_cluster, head, tmp_path):
    spec = make_project(tmp_path / "project")
    proc = head.hpcflow("submit", str(spec), "--json", global_args=("--code",))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)["data"]
    job_id, run_dir = data["job_id"], Path(data["run_dir"])
    try:
        # the run folder: the commit's tree, the spec as on disk, nothing uncommitted
        folder = run_dir.parents[1]
        assert folder.parent == head.remote_dir and run_dir == folder / "runs/remote"
        assert (folder / "prog.py").read_text() == PROG
        assert yaml.safe_load((folder / "job.yaml").read_text())["name"] == "remote"
        assert not (folder / "notes.txt").exists()
        code = json.loads((folder / ".hpcflow-code.json").read_text())
        assert code["uncommitted_not_sent"] == ["notes.txt"] and len(code["commit"]) == 40
        assert "uncommitted changes are NOT sent" in proc.stderr and "notes.txt" in proc.stderr
        wait_for(lambda: remote_status(head, job_id)["state"] == "RUNNING", 240, "RUNNING")
        wait_for(lambda: "prog attempt 0" in head.hpcflow("logs", job_id).stdout, 120, "the log")
        follower = Follower(head, job_id)
        wait_for(lambda: "prog attempt 0" in follower.text(), 60, "the line streamed by logs -f")
        subprocess.run(["scontrol", "requeue", job_id], check=True)
        follower.proc.wait(timeout=400)
        follower.thread.join(10)
        err = follower.proc.stderr.read()
        print(follower.text(), err)
        assert follower.proc.returncode == 0, err
        out = follower.text()
        assert out.index("prog attempt 0") < out.index("prog attempt 1") < out.index("prog done")
        assert f"job {job_id} COMPLETED" in err
        final = remote_status(head, job_id)
        assert final["state"] == "COMPLETED" and final["restarts"] == 1
    finally:
        subprocess.run(["scancel", job_id], check=False)


def test_cancel_and_an_interrupted_follower(local_cluster, head, tmp_path):
    spec = tmp_path / "sleep.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "sleeper", "nodes": 1, "tasks_per_node": 1, "time_limit": "5",
        "run_dir": str(tmp_path / "run"),
        "program": {"argv": [sys.executable, "-c", "import time; print('up', flush=True); "
                                                   "time.sleep(300)"]}}))
    proc = head.hpcflow("submit", str(spec), "--json")
    assert proc.returncode == 0, proc.stderr
    job_id = json.loads(proc.stdout)["data"]["job_id"]
    try:
        wait_for(lambda: remote_status(head, job_id)["state"] == "RUNNING", 240, "RUNNING")
        follower = Follower(head, job_id)
        wait_for(lambda: "up" in follower.text(), 60, "the streamed log")
        assert remote_followers(job_id)
        os.kill(follower.proc.pid, signal.SIGINT)  # Ctrl-C on the laptop
        assert follower.proc.wait(15) == 130
        assert "interrupted" in follower.proc.stderr.read()
        wait_for(lambda: not remote_followers(job_id), 20, "the head node's follower to end")
        proc = head.hpcflow("cancel", job_id)
        assert proc.returncode == 0 and f"cancelled job {job_id}" in proc.stdout
        final = wait_for(lambda: (s := remote_status(head, job_id))["finished"] and s, 60,
                         "the cancelled job to end")
        assert final["state"] == "CANCELLED"
        again = head.hpcflow("cancel", job_id)
        assert again.returncode == 0 and "already ended (CANCELLED)" in again.stdout
    finally:
        subprocess.run(["scancel", job_id], check=False)
    # the remote hpcflow's exit code comes back as it is: 4, Slurm does not know the job
    unknown = head.hpcflow("cancel", "999999")
    assert unknown.returncode == 4 and "unknown to Slurm" in unknown.stderr
