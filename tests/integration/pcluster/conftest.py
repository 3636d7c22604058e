"""Dummy AWS credentials for the ParallelCluster --deep and EC2 facts tests (the moto server,
``moto_url``, is in tests/integration/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture
def aws_env(monkeypatch, tmp_path):
    """Dummy credentials and an isolated hpcflow cache, so nothing reaches a real account."""
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1",
                       "HPCFLOW_CACHE_DIR": str(tmp_path / "cache")}.items():
        monkeypatch.setenv(key, value)
    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(key, raising=False)
