"""Shared fixtures for the ParallelCluster tests: a minimal valid spec (the empty EC2 cache is
tests/unit/conftest.py's)."""

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
