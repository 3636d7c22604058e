"""Waiting for a condition in integration tests (jobs, daemons, followers): one poll loop."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest


def wait_for(pred: Callable[[], Any], timeout_s: float, what: str, poll_s: float = 0.5) -> Any:
    """The first true value of ``pred()``, polled every ``poll_s`` seconds; fails the test after
    ``timeout_s`` seconds, naming ``what`` it waited for."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := pred():
            return value
        time.sleep(poll_s)
    pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}")
