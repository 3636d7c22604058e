"""Exit codes as the README promises them, also under --json."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hpcflow import errors

ROOT = Path(__file__).resolve().parents[3]


def test_report_of_a_malformed_job_id_is_exit_2(slurm, hpcflow):
    result = hpcflow("report", "abc")
    assert result.exit_code == 2 and "is not a Slurm job id" in result.output
    assert slurm.calls == []


@pytest.mark.parametrize("limit", ["-1", "0"])
def test_list_with_a_limit_below_one_is_exit_2(slurm, hpcflow, limit):
    result = hpcflow("list", "--limit", limit)
    assert result.exit_code == 2 and "--limit" in result.output
    assert slurm.calls == []


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["status", "abc", "--json"], id="status-json-after"),
        pytest.param(["status", "--json", "abc"], id="status-json-before"),
        pytest.param(["cancel", "1,2", "--json"], id="cancel"),
        pytest.param(["report", "abc", "--json"], id="report"),
        pytest.param(["list", "--limit", "-1", "--json"], id="list-limit"),
        pytest.param(["status", "--json"], id="status-no-job-yet"),
    ],
)
def test_argument_errors_come_in_the_json_envelope(slurm, hpcflow, args):
    result = hpcflow(*args)
    assert result.exit_code == 2, result.output
    envelope = json.loads(result.stdout)
    assert envelope["ok"] is False and envelope["data"] is None
    assert envelope["error"]["exit_code"] == 2 and envelope["error"]["type"] == "UsageError"
    assert envelope["error"]["message"]
    assert slurm.calls == []


def test_a_job_id_that_looks_like_json_flag_after_double_dash_is_not_json(slurm, hpcflow):
    result = hpcflow("status", "--", "--json")
    assert result.exit_code == 2 and not result.stdout.lstrip().startswith("{")


def readme_exit_codes() -> dict[int, str]:
    text = (ROOT / "README.md").read_text()
    para = text[text.index("Exit codes:") :].split("\n\n")[0]
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"(\d) ([^,;]+)", para)}


def test_the_readme_lists_every_exit_code_the_cli_can_give():
    listed = readme_exit_codes()
    assert set(listed) == {0, 1, 2, 3, 4, 6, 7}, listed
    assert "AWS" in listed[7]
    for cls in vars(errors).values():
        if isinstance(cls, type) and issubclass(cls, errors.HpcflowError):
            if cls is not errors.CheckpointError:
                assert cls.exit_code in listed, cls


def test_exit_code_5_is_not_listed_because_no_command_raises_checkpoint_error():
    """CheckpointError is raised inside the job (hpcflow.runtime) only: no CLI path reaches it."""
    assert 5 not in readme_exit_codes()
    outside_runtime = [p for p in (ROOT / "hpcflow").rglob("*.py")
                       if "runtime" not in p.parts and p.name != "errors.py"]
    assert outside_runtime
    for path in outside_runtime:
        assert "CheckpointError" not in path.read_text(), path
