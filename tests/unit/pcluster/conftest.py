"""Shared fixtures for the ParallelCluster tests: a minimal valid spec and an empty EC2 cache."""

from __future__ import annotations

import copy
from typing import Any

import pytest

BASE_SPEC: dict[str, Any] = {
    "name": "t",
    "region": "us-east-1",
    "head_node": {"instance_type": "m5.xlarge", "subnet_id": "subnet-0a1b2c3d4e5f60718"},
    "queues": [{
        "name": "train",
        "subnet_ids": ["subnet-0a1b2c3d4e5f60718"],
        "compute": [{"instance_type": "p5.48xlarge", "max_nodes": 2}],
    }],
}


@pytest.fixture
def base_spec() -> dict[str, Any]:
    """A fresh copy of a small valid spec (one p5 queue)."""
    return copy.deepcopy(BASE_SPEC)


@pytest.fixture(autouse=True)
def _empty_instance_cache(tmp_path_factory, monkeypatch):
    """Renders must not depend on a cache left on the machine."""
    monkeypatch.setenv("HPCFLOW_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
