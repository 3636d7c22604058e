"""After ``Run.finish`` writes the done record, leaving the ``with`` block ends the process at once
(status 0, nothing after the block runs), unless ``HPCFLOW_EXIT_AFTER_DONE=0``, which
``hpcflow.launch`` sets so that a submitted function still returns its value to submitit."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from hpcflow import protocol as P

PROGRAM = """
import torch
from hpcflow.runtime import Run

with Run.from_env() as run:
    model = torch.nn.Linear(2, 1)
    state = {"model": model}
    step = run.restore(state)
    while step < 3:
        step += 1
        run.step_done(step, state)
    run.finish(state)
print("after the with block", flush=True)
"""


def run_one_rank(tmp_path, extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "HPCFLOW_"))}
    env.update({
        "SLURM_JOB_ID": "83", "SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_LOCALID": "0",
        "SLURM_NNODES": "1", "SLURM_NODEID": "0", "SLURM_JOB_NODELIST": "localhost",
        "SLURM_RESTART_COUNT": "0",
        P.ENV_RUN_DIR: str(tmp_path), P.ENV_CHECKPOINT_DIR: str(tmp_path / "checkpoints"),
        P.ENV_CHECKPOINT_INTERVAL: "100", "OMP_NUM_THREADS": "1", **extra,
    })
    return subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("knob, runs_on", [({}, False), ({P.ENV_EXIT_AFTER_DONE: "0"}, True)],
                         ids=["exits-at-once", "launch-keeps-the-process"])
def test_the_done_record_ends_the_process_unless_the_caller_needs_the_return(tmp_path, knob,
                                                                              runs_on):
    out = run_one_rank(tmp_path, knob)
    assert out.returncode == 0, out.stderr
    done = P.state_dir(tmp_path) / P.done_name("83", 0)
    assert json.loads(done.read_text())["step"] == 3
    assert ("after the with block" in out.stdout) is runs_on, out.stdout
