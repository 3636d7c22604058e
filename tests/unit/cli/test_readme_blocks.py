"""The README's code blocks against the code: the `Run` snippet runs as written (one process,
outside Slurm), and every command and flag of the everyday-use block is one the CLI has.
The everyday-use commands run on the local cluster in
tests/integration/slurm/test_readme_everyday.py."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time

import click
import pytest
from readme_text import README, REPO, everyday_lines, run_program

from hpcflow.cli.main import cli
from hpcflow.protocol import TAG_STARTUP, TAG_STEP
from hpcflow.runtime.startup import PHASES

EVERYDAY = [ln.split() for ln in everyday_lines()]


def _variants(words: list[str]) -> list[list[str]]:
    """`up|down|status` -> three command lines; `[JOBID]` and `[--json]` -> the word."""
    words = [w.strip("[]") for w in words]
    for i, w in enumerate(words):
        if "|" in w and not w.startswith("-"):
            return [v for alt in w.split("|") for v in _variants([*words[:i], alt, *words[i + 1:]])]
    return [words]


LINES = [v for words in EVERYDAY if words for v in _variants(words[1:])]


def test_the_block_is_all_hpcflow_commands():
    assert [w[0] for w in EVERYDAY if w] == ["hpcflow"] * len([w for w in EVERYDAY if w])
    assert len(LINES) >= 12


@pytest.mark.parametrize("words", [pytest.param(w, id=" ".join(w)) for w in LINES])
def test_each_everyday_command_and_flag_exists(words):
    command: click.Command = cli
    ctx = click.Context(cli)
    rest = list(words)
    while isinstance(command, click.Group) and rest and not rest[0].startswith("-"):
        sub = command.get_command(ctx, rest[0])
        assert sub is not None, f"README: `hpcflow {' '.join(words)}`: no command {rest[0]!r}"
        command, rest = sub, rest[1:]
    assert not isinstance(command, click.Group), f"README: `hpcflow {' '.join(words)}` is a group"
    flags = {opt for p in command.params if isinstance(p, click.Option) for opt in p.opts}
    used = {w.split("=")[0] for w in rest if w.startswith("-")}
    assert used <= flags, f"README: `hpcflow {' '.join(words)}`: unknown {sorted(used - flags)}"


def test_the_run_snippet_runs_as_written_outside_slurm(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "HPCFLOW_"))}
    env.update(PYTHONPATH=str(REPO), OMP_NUM_THREADS="1",
               HPCFLOW_CHECKPOINT_DIR=str(tmp_path / "ckpt"), HPCFLOW_ATTEMPT_T0=str(time.time()))
    proc = subprocess.run([sys.executable, "-c", run_program(3, 0)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    steps = re.findall(rf"^{TAG_STEP} .*\"step\": (\d+)", proc.stdout, re.M)
    assert steps == ["1", "2", "3"], proc.stdout
    # Where the start-up went, once, at the first step: every phase measured, adding up.
    [startup] = [json.loads(ln.split(" ", 1)[1]) for ln in proc.stdout.splitlines()
                 if ln.startswith(f"{TAG_STARTUP} ")]
    assert all(startup[p] is not None and startup[p] >= 0 for p in PHASES), startup
    assert sum(startup[p] for p in PHASES) == pytest.approx(startup["total_s"], abs=0.01)


def test_the_fast_suite_command_selects_no_cluster_test():
    """The README's fast-suite command, with --collect-only added: its options parse (pytest-xdist
    is installed) and what it selects leaves out every test that uses the cluster or starts
    several torch.distributed processes."""
    fast = [ln for ln in re.findall(r"^```bash\n(.*?)^```", README.split("\n## Tests\n", 1)[1]
                                      .split("\n## ", 1)[0], re.M | re.S)[1].splitlines() if ln]
    assert len(fast) == 1 and fast[0].startswith("OMP_NUM_THREADS=1 .venv/bin/python -m pytest")
    words = shlex.split(fast[0])
    assert words[0] == "OMP_NUM_THREADS=1" and words[1] == ".venv/bin/python"
    proc = subprocess.run([sys.executable, *words[2:], "--collect-only", "-q", "-n", "0"],
                          cwd=REPO, env={**os.environ, "OMP_NUM_THREADS": "1"},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    ids = [ln for ln in proc.stdout.splitlines() if "::" in ln]
    assert len(ids) > 1000
    assert not [i for i in ids if "test_3d_resume" in i or "test_node_failure" in i
                or "test_launch_slurm" in i or "test_3d_train" in i]
