"""Fixtures for the job verbs: Slurm's commands replaced by a scripted fake."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from hpcflow.cli.main import cli
from hpcflow.jobs import service
from hpcflow.slurm.client import SlurmClient

UNKNOWN = (1, "", "slurm_load_jobs error: Invalid job id specified\n")
NO_ACCOUNTING = (1, "", "sacct: error: Accounting storage is disabled\n")


class FakeSlurm:
    """Answers Slurm's commands from a table: ``program -> (rc, stdout, stderr)``."""

    def __init__(self) -> None:
        self.answers = {"squeue": (0, "", ""), "scontrol": UNKNOWN, "sacct": NO_ACCOUNTING,
                        "scancel": (0, "", ""), "sbatch": (0, "4242\n", "")}
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str], *, input: str | None = None, timeout_s: float = 60):
        self.calls.append(list(argv))
        rc, out, err = self.answers[argv[0]]
        return subprocess.CompletedProcess(list(argv), rc, out, err)

    def ran(self, program: str) -> bool:
        return any(call[0] == program for call in self.calls)


@pytest.fixture
def slurm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeSlurm:
    """The fake every ``SlurmClient()`` of the job verbs talks to; HPCFLOW_HOME in tmp_path."""
    fake = FakeSlurm()
    monkeypatch.setattr(service, "SlurmClient", lambda: SlurmClient(fake, attempts=1))
    monkeypatch.setenv("HPCFLOW_HOME", str(tmp_path / "home"))
    return fake


@pytest.fixture
def hpcflow() -> Callable[..., Any]:
    """Run ``hpcflow ARGS...`` in-process; returns click's Result (output holds stderr too)."""
    return lambda *args: CliRunner().invoke(cli, list(args))


@pytest.fixture
def spec_file(tmp_path: Path) -> Callable[..., Path]:
    """Write a small valid job spec with ``run_dir`` (and extra fields); returns its path."""

    def write(run_dir: Path | str, **extra: Any) -> Path:
        spec = {"name": "j", "time_limit": "10", "run_dir": str(run_dir),
                "program": {"argv": ["true"]}, **extra}
        path = tmp_path / "job.yaml"
        path.write_text(yaml.safe_dump(spec))
        return path

    return write
