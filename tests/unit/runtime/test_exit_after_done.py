"""After ``Run.finish`` writes the done record, leaving the ``with`` block ends the process at once
(status 0, nothing after the block runs), unless ``HPCFLOW_EXIT_AFTER_DONE=0``, which
``hpcflow.launch`` sets so that a submitted function still returns its value to submitit."""

from __future__ import annotations

import json

import pytest
from one_rank import run_one_rank

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


@pytest.mark.parametrize("knob, runs_on", [({}, False), ({P.ENV_EXIT_AFTER_DONE: "0"}, True)],
                         ids=["exits-at-once", "launch-keeps-the-process"])
def test_the_done_record_ends_the_process_unless_the_caller_needs_the_return(tmp_path, knob,
                                                                              runs_on):
    out = run_one_rank(PROGRAM, tmp_path, "83", {P.ENV_CHECKPOINT_INTERVAL: "100", **knob})
    assert out.returncode == 0, out.stderr
    done = P.state_dir(tmp_path) / P.done_name("83", 0)
    assert json.loads(done.read_text())["step"] == 3
    assert ("after the with block" in out.stdout) is runs_on, out.stdout
