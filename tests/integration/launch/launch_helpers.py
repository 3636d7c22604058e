"""What the launch tests share: waiting for a condition, and a job's ledger events."""

from __future__ import annotations

from polling import wait_for  # noqa: F401 - the tests import it from here

from hpcflow.jobs import records


def ledger(job_id: str) -> list[dict]:
    """The ledger events of ``job_id`` (an array element: ``<arrayjob>_<task>``), or []."""
    rec = records.find_job(job_id)
    return records.job_events(rec.run_dir, job_id) if rec else []
