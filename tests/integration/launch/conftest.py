"""Fixtures for the Python front door on the real local Slurm cluster (2 emulated nodes)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from hpcflow.local_cluster import manager
from hpcflow.local_cluster.config import LocalClusterConfig

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]


@pytest.fixture(scope="session")
def launch_cluster() -> LocalClusterConfig:
    cfg = LocalClusterConfig(hostname=socket.gethostname())
    manager.up(cfg, log=lambda m: print(f"local-cluster: {m}"))
    return cfg


@pytest.fixture
def launch_env(tmp_path, monkeypatch) -> Path:
    """Own HPCFLOW_HOME; this folder and the repository on PYTHONPATH (the jobs inherit it, as
    they inherit a user's environment); the job starts in tmp_path. Returns the executor folder."""
    monkeypatch.setenv("HPCFLOW_HOME", str(tmp_path / "home"))
    path = [str(HERE), str(REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(":"))]
    monkeypatch.setenv("PYTHONPATH", ":".join(path))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.chdir(tmp_path)
    return tmp_path / "jobs"
