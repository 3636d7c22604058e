"""Every offline command of docs/sagemaker.md runs as written (from the repository root) and exits 0;
its first `hpcflow ... --dry-run` prints a CreateTrainingJob request botocore accepts, and the
request excerpt the page shows is what that command renders."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpcflow.aws.requests import request_problems
from hpcflow.cli.main import cli

REPO = Path(__file__).resolve().parents[3]
PAGE = (REPO / "docs" / "sagemaker.md").read_text()


def _blocks(kind: str) -> list[str]:
    return [block.split("```", 1)[0] for block in PAGE.split(f"```{kind}\n")[1:]]


LINES = [line for block in _blocks("bash") for line in block.splitlines() if line.strip()]
#: The lines that ask AWS about a training job (`hpcflow sagemaker ...`) run against moto in
#: tests/integration/sagemaker/test_docs_sagemaker_moto.py; the others run here, offline.
COMMANDS = [line for line in LINES if not line.startswith("hpcflow sagemaker ")]


def run(line: str):  # noqa: ANN201
    return CliRunner().invoke(cli, shlex.split(line)[1:])


def test_every_bash_line_is_an_hpcflow_command():
    assert COMMANDS and all(line.startswith("hpcflow ") for line in LINES)


@pytest.mark.parametrize("line", COMMANDS)
def test_each_command_runs(line, monkeypatch):
    monkeypatch.chdir(REPO)
    out = run(line)
    assert out.exit_code == 0, out.output


def test_the_first_dry_run_prints_the_request_the_page_shows(monkeypatch):
    monkeypatch.chdir(REPO)
    first = next(line for line in COMMANDS if "--dry-run" in line)
    request = json.loads(run(first).output)
    assert request_problems("sagemaker", "CreateTrainingJob", request) == []
    [excerpt] = [json.loads(block) for block in _blocks("json")]
    for key, value in excerpt.items():
        assert request[key] == value, key
    envelope = json.loads(run(first + " --json").output)
    assert envelope["ok"] is True and envelope["data"]["request"]["ResourceConfig"] == \
        request["ResourceConfig"]


def test_plan_goodput_help_names_the_platforms():
    out = CliRunner().invoke(cli, ["plan", "goodput", "--help"])
    assert "ParallelCluster" in out.output and "SageMaker" in out.output
    assert "managed spot" in out.output and "HyperPod cluster on-demand" in out.output
