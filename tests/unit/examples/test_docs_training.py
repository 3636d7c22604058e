"""docs/training.md's command block: the lines are the ones documented, and the job spec it
submits renders (``--dry-run``) into the 2-node x 4-rank pp=2 dp=2 tp=2 job the doc describes.
Submitting it and following it needs the local Slurm cluster: the slurm test
tests/integration/slurm/test_3d_resume.py runs the block word for word, then preempts the same
spec."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from batch_script import step_command

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "training.md"


def bash_blocks(text: str) -> list[list[str]]:
    return [[ln.split("#")[0].strip() for ln in block.strip().splitlines()]
            for block in re.findall(r"^```bash\n(.*?)^```", text, re.M | re.S)]


def test_the_block_is_the_documented_commands():
    assert bash_blocks(DOC.read_text()) == [
        ["hpcflow local-cluster up", "hpcflow submit examples/tiny-3d.yaml --follow"]]


def test_the_spec_of_the_block_renders_the_documented_layout(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "HPCFLOW_HOME": str(tmp_path / "home")}
    proc = subprocess.run(
        [sys.executable, "-m", "hpcflow", "submit", "examples/tiny-3d.yaml", "--dry-run",
         "--set", f"run_dir={tmp_path / 'run'}"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    script = proc.stdout
    assert "#SBATCH --nodes=2\n" in script and "#SBATCH --ntasks-per-node=4\n" in script
    words = step_command(script)
    assert "hpcflow.examples.train" in words
    layout = {flag: words[words.index(flag) + 1] for flag in ("--pp", "--dp", "--tp", "--model")}
    assert layout == {"--pp": "2", "--dp": "2", "--tp": "2", "--model": "lm"}
