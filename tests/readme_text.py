"""The README's code blocks, for the tests that run them (outside Slurm and on the cluster)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()

#: What the README's `Run` snippet leaves to the reader: a model, its optimizer and scheduler,
#: the step count and a loss. ``{total_steps}`` and ``{step_s}`` are filled in; the loss's
#: ``item()`` waits ``step_s`` seconds, so that a step takes that long.
RUN_PRELUDE = """\
import time
import torch
from hpcflow.runtime import Run
model = torch.nn.Linear(4, 1)
optim = torch.optim.SGD(model.parameters(), lr=0.1)
sched = torch.optim.lr_scheduler.StepLR(optim, 10)
state = {{'model': model, 'optim': optim, 'sched': sched}}
total_steps = {total_steps}
class _Loss:
    def item(self):
        time.sleep({step_s})
        return 0.5
loss = _Loss()
"""


def block_after(heading: str, lang: str, index: int = 0) -> str:
    """The ``index``-th ```lang block of the README section ``## heading``."""
    section = README.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"^```{lang}\n(.*?)^```", section, re.M | re.S)[index]


def run_program(total_steps: int, step_s: float) -> str:
    """The README's `Run` snippet as a whole program: the prelude, then the snippet as written."""
    return RUN_PRELUDE.format(total_steps=total_steps, step_s=step_s) + block_after(
        "Bring your own program", "python")


def everyday_lines() -> list[str]:
    """The command lines of the everyday-use block, comments removed."""
    lines = [ln.split("#")[0].strip() for ln in block_after("Everyday use", "bash").splitlines()]
    return [ln for ln in lines if ln]
