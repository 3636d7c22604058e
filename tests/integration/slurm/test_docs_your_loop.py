"""docs/your-training-loop.md says only what the code does: its commands run, its spec is the
example's, and its code excerpt is the example's code."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slurm]

REPO = Path(__file__).resolve().parents[3]
DOC = (REPO / "docs" / "your-training-loop.md").read_text()


def blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", DOC, re.M | re.S)


def test_the_spec_in_the_doc_is_the_example_spec():
    [block] = blocks("yaml")
    example = (REPO / "examples" / "my-loop.yaml").read_text()
    body = "".join(ln + "\n" for ln in example.splitlines() if not ln.startswith("#"))
    assert block == body


def test_every_hpcflow_line_of_the_excerpt_is_in_the_example():
    [block] = blocks("python")
    code = (REPO / "examples" / "my_loop.py").read_text()
    marked = [ln.strip() for ln in block.splitlines() if "# hpcflow" in ln]
    assert len(marked) == 4
    assert all(line in code for line in marked)


def test_the_example_runs_alone_as_one_process():
    proc = subprocess.run([sys.executable, str(REPO / "examples" / "my_loop.py"), "--steps", "5"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert len(re.findall(r"^hpcflow-step ", proc.stdout, re.M)) == 5


def test_the_commands_of_the_doc_run(local_cluster, hpcflow_home):
    [block] = blocks("bash")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    outputs = []
    for line in block.strip().splitlines():
        print("+", line)
        proc = subprocess.run(shlex.split(line), cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=900)
        print(proc.stdout[-2000:], proc.stderr[-4000:])
        assert proc.returncode == 0, line
        outputs.append(proc)
    rehearsal = outputs[-1].stderr
    assert "job requeued itself" in rehearsal and "COMPLETED" in rehearsal
    assert "resumed from step" in rehearsal
