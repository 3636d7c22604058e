"""Fixtures for tests on the real local Slurm cluster (2 emulated nodes).

The session fixture brings the cluster up with ``hpcflow.local_cluster.manager.up`` (idempotent:
a running cluster is reused); every test that uses it is marked ``slurm``. Each test gets its own
``HPCFLOW_HOME`` and run directory; on failure the job's log and ledger are printed (pytest shows
captured output of failed tests).
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from slurm_helpers import Job

from hpcflow.local_cluster import manager
from hpcflow.local_cluster.config import LocalClusterConfig


@pytest.fixture(scope="session")
def local_cluster() -> LocalClusterConfig:
    cfg = LocalClusterConfig(hostname=socket.gethostname())
    manager.up(cfg, log=lambda m: print(f"local-cluster: {m}"))
    return cfg


@pytest.fixture
def hpcflow_home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("HPCFLOW_HOME", str(home))
    return home


@pytest.fixture
def submit_job(local_cluster, hpcflow_home, tmp_path, request):  # noqa: ANN001, ANN201
    """``submit_job(spec_dict, *overrides) -> Job``; writes the spec to a file first."""
    jobs: list[Job] = []

    def _submit(spec: dict[str, Any], *overrides: str) -> Job:
        spec = {"run_dir": str(tmp_path / f"run {len(jobs)}"), **spec}
        path = tmp_path / f"job{len(jobs)}.yaml"
        path.write_text(yaml.safe_dump(spec))
        job = Job(path, overrides)
        jobs.append(job)
        return job

    yield _submit
    for job in jobs:
        if request.node.rep_call.failed if hasattr(request.node, "rep_call") else True:
            job.dump()
        subprocess.run(["scancel", job.job_id], capture_output=True, check=False)


def pytest_collection_modifyitems(config, items):  # noqa: ANN001, ANN201
    """A test of this folder that uses the local cluster is a real-cluster test: it gets the
    ``slurm`` marker, so ``pytest -m "not slurm"`` leaves it out."""
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(item.path).resolve().parents and "local_cluster" in item.fixturenames:
            item.add_marker(pytest.mark.slurm)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):  # noqa: ANN001, ANN201
    outcome = yield
    rep = outcome.get_result()
    setattr(item, f"rep_{rep.when}", rep)


PYTHON = sys.executable
