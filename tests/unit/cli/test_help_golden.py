"""Golden `--help` texts: any change to the CLI's surface shows up as a diff in review
(HPCFLOW_REGEN_GOLDEN=1 rewrites the files)."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpcflow.cli.main import cli

GOLDEN = Path(__file__).with_name("test_help_golden")
COMMANDS = [
    [], ["submit"], ["status"], ["logs"], ["cancel"], ["list"], ["report"],
    ["local-cluster"], ["local-cluster", "up"], ["local-cluster", "down"],
    ["local-cluster", "status"], ["local-cluster", "rehearse"],
    ["cluster"], ["cluster", "render"], ["cluster", "validate"], ["cluster", "import"],
    ["cluster", "instances"], ["cluster", "cost"], ["cluster", "upload-bootstrap"],
    ["cluster", "hyperpod"], ["cluster", "hyperpod", "create"], ["cluster", "hyperpod", "describe"],
    ["doctor"], ["doctor", "nccl"], ["bootstrap"], ["spot-watch"],
    ["plan"], ["plan", "goodput"], ["plan", "layout"],
]


@pytest.mark.parametrize("words", [pytest.param(c, id=" ".join(c) or "hpcflow") for c in COMMANDS])
def test_help_text_is_unchanged(words):
    result = CliRunner().invoke(cli, [*words, "--help"], prog_name="hpcflow",
                                terminal_width=100)
    assert result.exit_code == 0, result.output
    path = GOLDEN / (("-".join(words) or "hpcflow") + ".txt")
    if os.environ.get("HPCFLOW_REGEN_GOLDEN") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(result.output)
    want = path.read_text() if path.exists() else ""
    diff = "".join(difflib.unified_diff(want.splitlines(True), result.output.splitlines(True),
                                        str(path.name), "current"))
    assert not diff, f"the CLI changed; review and rerun with HPCFLOW_REGEN_GOLDEN=1\n{diff}"
