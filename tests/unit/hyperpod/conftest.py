"""Fixtures of the HyperPod tests."""

from __future__ import annotations

from typing import Any

import pytest
from hyperpod_example import example_data


@pytest.fixture
def spec_data() -> dict[str, Any]:
    """A fresh copy of the example HyperPod spec."""
    return example_data()
