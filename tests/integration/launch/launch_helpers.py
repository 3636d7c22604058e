"""What the launch tests share: waiting for a condition, and a job's ledger events."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from hpcflow.jobs import records


def wait_for(pred: Callable[[], Any], timeout_s: float, what: str, poll_s: float = 0.5) -> Any:
    """The first true value of ``pred()``; fails the test after ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := pred():
            return value
        time.sleep(poll_s)
    pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}")


def ledger(job_id: str) -> list[dict]:
    """The ledger events of ``job_id`` (an array element: ``<arrayjob>_<task>``), or []."""
    rec = records.find_job(job_id)
    return records.job_events(rec.run_dir, job_id) if rec else []
