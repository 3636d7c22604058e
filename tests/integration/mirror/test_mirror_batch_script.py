"""The batch script's mirror block, run with bash and a fake ``srun`` against moto: the pull
into an empty checkpoint folder before the program, the drain of the newest commit before the
job ends, and the kill at the deadline that leaves no complete mirror behind."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mirror_helpers import child_env, commit_fake, read_events, s3_env

from hpcflow.mirror import local, store, watch
from hpcflow.slurm.render import render_sbatch
from hpcflow.spec.job import JobSpec
from hpcflow.spec.s3uri import parse_s3_uri

pytestmark = [pytest.mark.moto]

SRUN = """#!/usr/bin/env bash
while [[ $# -gt 0 && $1 == --* ]]; do shift; done
exec "$@"
"""

# The program: reports what the checkpoint folder held at start, commits a checkpoint of
# PROG_MIB MiB, and with PROG_WAIT_START waits until the mirror has started uploading it, then
# freezes the mirror (SIGSTOP): an upload too slow to end before the deadline, whatever the
# machine's speed.
PROGRAM = """
import json, os, signal, sys, time
sys.path.insert(0, os.environ["TEST_HELPERS"])
from mirror_helpers import commit_fake
from hpcflow.mirror import local
root = __import__("pathlib").Path(os.environ["HPCFLOW_CHECKPOINT_DIR"])
print("start-units", json.dumps([u.name for u in local.scan_units(root)]), flush=True)
commit_fake(root, 9, {"__0_0.distcp": int(os.environ["PROG_MIB"]) * 2**20}, seed=3)
if os.environ.get("PROG_WAIT_START"):
    ledger = os.path.join(os.environ["HPCFLOW_RUN_DIR"], ".hpcflow", "events.jsonl")
    deadline = time.time() + 60
    while time.time() < deadline and '"mirror_start"' not in open(ledger).read():
        time.sleep(0.02)
    frozen = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")
        except OSError:
            continue
        if b"hpcflow.mirror" in argv and b"watch" in argv and os.getppid() != int(pid):
            os.kill(int(pid), signal.SIGSTOP)
            frozen += 1
    print("frozen-mirrors", frozen, flush=True)
"""


def run_job(tmp_path: Path, moto_url: str, uri: str, *, mib: int, end_in_s: int | None = None,
            wait_start: bool = False) -> tuple[subprocess.CompletedProcess, Path]:
    shims = tmp_path / "shims"
    shims.mkdir(exist_ok=True)
    (shims / "srun").write_text(SRUN)
    (shims / "srun").chmod(0o755)
    (tmp_path / "prog.py").write_text(PROGRAM)
    run_dir = tmp_path / "run"
    spec = JobSpec.model_validate({
        "name": "mirrorjob", "time_limit": "00:10:00", "run_dir": str(run_dir),
        "program": {"argv": [sys.executable, str(tmp_path / "prog.py")]},
        "env": {"PROG_MIB": str(mib), "PROG_WAIT_START": "1" if wait_start else "",
                "TEST_HELPERS": str(Path(__file__).parent)},
        "checkpoint": {"keep": 2, "s3_uri": uri},
    })
    script = tmp_path / "job.sbatch"
    script.write_text(render_sbatch(spec))
    env = {k: v for k, v in child_env(moto_url).items() if not k.startswith("SLURM_")}
    env.update(PATH=f"{shims}{os.pathsep}{env['PATH']}", SLURM_JOB_ID="4243",
               SLURM_JOB_NODELIST="n1")
    if end_in_s is not None:
        env["SLURM_JOB_END_TIME"] = str(int(time.time()) + end_in_s)
    proc = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=240)
    print(proc.stdout, proc.stderr)
    return proc, run_dir


@pytest.fixture
def s3(moto_url, monkeypatch):  # noqa: ANN001, ANN201
    for name, value in s3_env(moto_url).items():
        monkeypatch.setenv(name, value)
    client = store.make_client()
    bucket = f"script-{time.monotonic_ns()}"
    client.create_bucket(Bucket=bucket)
    return client, parse_s3_uri(f"s3://{bucket}/run")


def test_pull_before_the_program_and_drain_before_the_end(tmp_path, s3, moto_url):
    client, uri = s3
    source = tmp_path / "elsewhere"
    commit_fake(source, 4, {"__0_0.distcp": 5000})
    watch.Mirror(source, uri, 2, client, watch.Ledger(None)).mirror(local.scan_units(source)[0])
    proc, run_dir = run_job(tmp_path, moto_url, str(uri), mib=1)
    assert proc.returncode == 0, proc.stderr
    assert 'start-units ["step_4"]' in proc.stdout  # pulled before the program started
    names = [e["event"] for e in read_events(run_dir / ".hpcflow" / "events.jsonl")]
    assert names.index("mirror_pull") < names.index("mirror_done") < names.index("job_end")
    complete, _ = store.list_mirrors(client, uri)
    assert [m.name for m in complete] == ["step_4", "step_9"]  # the final commit was drained


def test_the_deadline_stops_the_mirror_and_its_copy_is_never_complete(tmp_path, s3, moto_url):
    client, uri = s3
    # The job's end is 5 s away: the budget (deadline less 10 s) is spent, the mirror is killed
    # while it uploads step_9.
    proc, run_dir = run_job(tmp_path, moto_url, str(uri), mib=64, end_in_s=5, wait_start=True)
    assert proc.returncode == 0, proc.stderr
    assert "frozen-mirrors 1" in proc.stdout
    assert "the S3 mirror did not finish before the deadline: stopped" in proc.stderr
    events = read_events(run_dir / ".hpcflow" / "events.jsonl")
    names = [e["event"] for e in events]
    assert "mirror_start" in names and "mirror_abandoned" in names and "mirror_done" not in names
    complete, _ = store.list_mirrors(client, uri)
    assert complete == []
    time.sleep(1)  # nothing of the killed mirror writes a record later
    assert store.list_mirrors(client, uri)[0] == []
