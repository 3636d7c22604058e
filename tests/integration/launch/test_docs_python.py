"""docs/python.md says only what the code does: its two files, saved under the names their
first line gives, and its commands, run word for word in an empty folder on the local cluster."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[3]
DOC = (REPO / "docs" / "python.md").read_text()


def blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", DOC, re.M | re.S)


def test_quickstart_runs_word_for_word(launch_cluster, launch_env, tmp_path):
    folder = tmp_path / "quickstart"
    folder.mkdir()
    files = blocks("python")
    assert len(files) == 2
    for text in files:
        name = text.splitlines()[0].removeprefix("# ").strip()
        (folder / name).write_text(text)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(REPO)}
    [bash] = blocks("bash")
    out = {}
    for line in bash.strip().splitlines():
        print("+", line)
        if line.startswith("hpcflow status"):  # the newest job: give its batch script a moment
            for _ in range(30):
                probe = subprocess.run(["hpcflow", "status", "--json"], cwd=folder, env=env,
                                       capture_output=True, text=True)
                if json.loads(probe.stdout)["data"]["finished"]:
                    break
                time.sleep(1)
        proc = subprocess.run(shlex.split(line), cwd=folder, env=env, capture_output=True,
                              text=True, timeout=400)
        assert proc.returncode == 0, f"{line}\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
        out[line] = proc.stdout
    assert out["python submit.py"].rstrip().endswith("same result: True")
    status = subprocess.run(["hpcflow", "status", "--json"], cwd=folder, env=env,
                            capture_output=True, text=True, check=True)
    st = json.loads(status.stdout)["data"]
    assert (st["state"], st["attempts"], st["restarts"]) == ("COMPLETED", 2, 1), st
    assert "COMPLETED" in out["hpcflow status"]
    job_ids = re.findall(r"^job (\d+) ->", out["python submit.py"], re.M)
    assert len(job_ids) == 2 and all(j in out["hpcflow list"] for j in job_ids)
    log = subprocess.run(["hpcflow", "logs", job_ids[1]], cwd=folder, env=env,
                         capture_output=True, text=True, check=True).stdout
    assert "hpcflow-checkpoint" in log and "requeueing" in log and "hpcflow-resume" in log
