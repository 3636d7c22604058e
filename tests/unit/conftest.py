"""Fixtures for every unit test."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _empty_instance_cache(tmp_path_factory, monkeypatch):
    """Renders and instance lookups must not depend on an EC2 cache left on the machine."""
    monkeypatch.setenv("HPCFLOW_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
