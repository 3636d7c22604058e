"""docs/your-training-loop.md says only what the code does: its commands run, its specs are the
examples' specs, and every line its excerpts mark ``# hpcflow`` is in the example programs."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
DOC = (REPO / "docs" / "your-training-loop.md").read_text()
EXAMPLES = REPO / "examples"


def blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", DOC, re.M | re.S)


def test_the_spec_in_the_doc_is_the_example_spec():
    [block] = blocks("yaml")
    example = (EXAMPLES / "my-loop.yaml").read_text()
    body = "".join(ln + "\n" for ln in example.splitlines() if not ln.startswith("#"))
    assert block == body


def test_every_hpcflow_line_of_the_excerpts_is_in_an_example():
    code = "".join(p.read_text() for p in sorted(EXAMPLES.glob("*.py")))
    marked = [ln.strip() for block in blocks("python") for ln in block.splitlines()
              if "# hpcflow" in ln]
    assert len(marked) == 4 + 6 + 5
    assert [line for line in marked if line not in code] == []


def test_the_example_runs_alone_as_one_process():
    proc = subprocess.run([sys.executable, str(EXAMPLES / "my_loop.py"), "--steps", "5"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert len(re.findall(r"^hpcflow-step ", proc.stdout, re.M)) == 5


def test_the_commands_of_the_doc_run(local_cluster, hpcflow_home, tmp_path):
    """Every line of every bash block; the rehearsals run side by side (the three jobs fit the
    local cluster's 2 x 4 CPUs together). They run in a copy of the examples, whose run
    directories (``../runs/<name>``, relative to the spec) are then new: checkpoints of an earlier
    run in the checkout would make a job resume at its last step and finish before its warning."""
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    lines = [ln for block in blocks("bash") for ln in block.strip().splitlines()]
    rehearsals = [ln for ln in lines if " rehearse " in ln]
    assert len(rehearsals) == 3
    for line in (ln for ln in lines if ln not in rehearsals):
        print("+", line)
        proc = subprocess.run(shlex.split(line), cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, f"{line}\n{proc.stdout[-2000:]}{proc.stderr[-4000:]}"
    running = [subprocess.Popen(shlex.split(line), cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for line in rehearsals]
    for line, proc in zip(rehearsals, running, strict=True):
        out, err = proc.communicate(timeout=900)
        print("+", line, out[-2000:], err[-4000:])
        assert proc.returncode == 0, line
        assert "job requeued itself" in err and "COMPLETED" in err, line
        assert "resumed from step" in err, line
