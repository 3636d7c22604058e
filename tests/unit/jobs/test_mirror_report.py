"""The report's S3 mirror line: bytes and lag from the mirror's ledger events."""

from __future__ import annotations

from hpcflow.jobs.mirror_report import summarise


def ev(event: str, **fields) -> dict:
    return {"event": event, "time": 100, "job_id": "5", "restart": 0, **fields}


def test_no_mirror_events_means_no_summary():
    assert summarise([ev("attempt_start"), ev("step_end", rc=0)]) is None


def test_bytes_lag_failures_and_pull_are_summed_from_the_ledger():
    events = [
        ev("attempt_start"),
        ev("mirror_pull", unit="step_4", step=4, bytes=3 * 2**20, seconds=1.5),
        ev("mirror_start", unit="step_8", step=8, bytes=2**20),
        ev("mirror_done", unit="step_8", step=8, bytes=2**20, upload_s=0.4, lag_s=2.5),
        ev("mirror_failed", unit="step_12", step=12, error="403: Forbidden"),
        ev("mirror_done", unit="step_12", step=12, bytes=2**21, upload_s=0.4, lag_s=31.0),
        ev("mirror_done", unit="step_16", step=16, bytes=2**21, upload_s=0.4, lag_s=4.0),
        ev("mirror_abandoned"),
    ]
    s = summarise(events)
    assert s is not None
    assert (s.mirrored, s.bytes, s.last_step) == (3, 5 * 2**20, 16)
    assert (s.last_lag_s, s.max_lag_s, s.failed, s.abandoned) == (4.0, 31.0, 1, 1)
    assert (s.pulled_step, s.pulled_bytes) == (4, 3 * 2**20)
    assert s.line() == ("S3 mirror: 3 checkpoint(s), 5.0 MiB; last step 16 lag 4.0 s (max 31.0 s); "
                        "1 failed, 1 abandoned; pulled step 4 (3.0 MiB)")
    assert s.to_dict()["bytes"] == 5 * 2**20


def test_only_failures_still_show():
    s = summarise([ev("mirror_failed", unit="step_1", step=1, error="NoSuchBucket: x")])
    assert s is not None and s.mirrored == 0 and s.failed == 1
    assert s.line() == "S3 mirror: 0 checkpoint(s), 0.0 MiB; 1 failed, 0 abandoned"
