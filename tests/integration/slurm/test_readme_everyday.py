"""The README's everyday-use block, run on the local cluster as a user types it.

`job.yaml` is a spec whose program is the README's own `Run` snippet (40 steps of 0.25 s on one
rank); `JOBID` is the job the line before submitted; each `[optional]` part runs both without and
with it; `up|down|status` runs all three (status, down, then up, so that the cluster is up again
for the tests after this one). The lines run in an order in which each makes sense: a run
directory whose job still runs is refused, so the second submission waits for the first job to
end, and the job to cancel is one that is running.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from batch_script import ranks_env
from readme_text import everyday_lines, run_program
from slurm_helpers import wait_for

from hpcflow.protocol import TAG_STARTUP, TAG_STEP
from hpcflow.runtime.startup import PHASES

pytestmark = [pytest.mark.slurm, pytest.mark.cluster_alone]

STEPS = 40


def line_for(prefix: str, exact: bool = False) -> str:
    """The block's one line that starts with (or, ``exact``, is) ``hpcflow <prefix>``."""
    whole = f"hpcflow {prefix}"
    [line] = [ln for ln in everyday_lines() if ln == whole or not exact and ln.startswith(whole)]
    return line


def variants(line: str, job_id: str | None = None) -> list[list[str]]:
    """``line`` as argv lists: JOBID filled in; each ``[...]`` group left out, then kept (the
    first group varying fastest); each ``a|b`` word as ``a``, then as ``b``."""
    out: list[list[str]] = [[]]
    for part in re.split(r"(\[[^\]]*\])", line.replace("JOBID", job_id or "JOBID")):
        if part.startswith("["):
            words = shlex.split(part[1:-1])
            out = [[*w, *extra] for extra in ([], words) for w in out]
            continue
        for word in shlex.split(part):
            alternatives = word.split("|") if "|" in word and not word.startswith("-") else [word]
            out = [[*w, alt] for w in out for alt in alternatives]
    return out


def run(argv: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    print("+", shlex.join(argv))
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ,
                               "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    print(proc.stdout[-3000:], proc.stderr[-3000:])
    return proc


def ok(argv: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    proc = run(argv, cwd, timeout)
    assert proc.returncode == 0, f"`{shlex.join(argv)}` exited {proc.returncode}: {proc.stderr}"
    return proc


def submitted(proc: subprocess.CompletedProcess[str]) -> str:
    [job_id] = re.findall(r"^submitted job (\d+)", proc.stdout, re.M)
    return job_id


def status(job_id: str, cwd: Path) -> dict:
    return json.loads(ok(["hpcflow", "status", job_id, "--json"], cwd).stdout)["data"]


def test_the_everyday_block_runs_as_written(local_cluster, hpcflow_home, tmp_path):
    (tmp_path / "loop.py").write_text(run_program(STEPS, 0.25))
    (tmp_path / "job.yaml").write_text(yaml.safe_dump({
        "name": "everyday", "nodes": 1, "tasks_per_node": 1, "time_limit": "10",
        "run_dir": "run", "env": {"OMP_NUM_THREADS": "1"},
        "program": {"argv": [sys.executable, str(tmp_path / "loop.py")]},
    }))
    run_dir = tmp_path / "run"
    submit = line_for("submit job.yaml", exact=True)
    dry_run, with_sets = line_for("submit job.yaml --dry-run"), line_for("submit job.yaml --set")

    # --dry-run prints the batch script and writes nothing.
    [argv] = variants(dry_run)
    script = ok(argv, tmp_path).stdout
    assert script.startswith("#!/usr/bin/env bash") and "--signal=B:USR1@" in script
    assert not run_dir.exists() and not hpcflow_home.exists()

    # submit keeps the spec, the script and the job id in run_dir; logs -f follows to the end.
    [argv] = variants(submit)
    first = submitted(ok(argv, tmp_path))
    assert (run_dir / "job.yaml").is_file() and (run_dir / "job.sbatch").is_file()
    assert json.loads((run_dir / "submissions.jsonl").read_text())["job_id"] == first
    logs, follow = variants(line_for("logs"), first)
    followed = ok(follow, tmp_path, timeout=240)
    assert follow[-1] == "-f"
    steps = [int(s) for s in re.findall(rf"^{TAG_STEP} .*\"step\": (\d+)", followed.stdout, re.M)]
    assert steps == list(range(1, STEPS + 1)), followed.stdout[-2000:]
    assert f"{TAG_STEP}" in ok(logs, tmp_path).stdout
    # Where the attempt's start-up went, from the batch script's start (bash's EPOCHREALTIME).
    [startup] = [json.loads(ln.split(" ", 1)[1]) for ln in followed.stdout.splitlines()
                 if ln.startswith(f"{TAG_STARTUP} ")]
    assert all(startup[p] is not None and startup[p] >= 0 for p in PHASES), startup
    assert sum(startup[p] for p in PHASES) == pytest.approx(startup["total_s"], abs=0.01)
    newest, given, newest_json, given_json = variants(line_for("status"), first)
    assert "COMPLETED" in ok(newest, tmp_path).stdout and "COMPLETED" in ok(given, tmp_path).stdout
    for argv in (newest_json, given_json):
        data = json.loads(ok(argv, tmp_path).stdout)["data"]
        assert (data["job_id"], data["state"], data["attempts"], data["restarts"]) == (
            first, "COMPLETED", 1, 0)
    text, with_svg = variants(line_for("report"), first)
    report = ok(text, tmp_path).stdout
    assert "goodput" in report
    # ... and the report says so, from the same record.
    assert f"attempt 1 start-up (rank 0): launch {startup['launch_s']:.1f} s" in report, report
    ok(with_svg, tmp_path)
    assert (tmp_path / with_svg[-1]).read_text().lstrip().startswith("<svg")

    # --set overrides spec fields; cancel ends a running job, which is not requeued.
    [argv] = variants(with_sets)
    second = submitted(ok(argv, tmp_path))
    sbatch = (run_dir / "job.sbatch").read_text()
    assert "#SBATCH --nodes=2" in sbatch and ranks_env(sbatch)["HPCFLOW_MAX_REQUEUES"] == "5"
    try:
        wait_for(lambda: status(second, tmp_path)["state"] == "RUNNING", 120, "RUNNING")
        [listed] = variants(line_for("list"))
        table = ok(listed, tmp_path).stdout
        assert second in table and first in table
        assert [j["job_id"] for j in json.loads(ok([*listed, "--json"], tmp_path).stdout)["data"]
                ] == [second, first]
    finally:
        [cancel] = variants(line_for("cancel"), second)
        ok(cancel, tmp_path)
    final = wait_for(lambda: (d := status(second, tmp_path))["finished"] and d, 60,
                     "the cancelled job to end")
    assert (final["state"], final["restarts"]) == ("CANCELLED", 0)

    # rehearse: the job is warned, checkpoints, requeues itself and resumes, as often as asked.
    [argv] = variants(line_for("local-cluster rehearse"))
    rehearsed = ok(argv, tmp_path, timeout=400)
    preemptions = int(argv[argv.index("--preemptions") + 1])
    assert rehearsed.stderr.count("job requeued itself") == preemptions
    job = re.findall(r"submitted job (\d+)", rehearsed.stderr)[0]
    data = status(job, tmp_path)
    assert (data["state"], data["attempts"]) == ("COMPLETED", preemptions + 1)

    # local-cluster status, down, up: the cluster stops and comes back.
    up, down, state = variants(line_for("local-cluster up"))
    assert "healthy" in ok(state, tmp_path).stdout
    try:
        ok(down, tmp_path)
        stopped = run(state, tmp_path)
        assert stopped.returncode != 0 and "the local cluster is not started" in stopped.stdout
    finally:
        ok(up, tmp_path)
    assert "healthy" in ok(state, tmp_path).stdout
