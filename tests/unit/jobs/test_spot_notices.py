"""Spot notices in the report: notice -> commit time per attempt, from the ledger and the
attempt's commit file; a notice without a commit says so; torn or foreign lines are skipped."""

from __future__ import annotations

import json

from hpcflow import protocol
from hpcflow.jobs.notices import notice_outcomes

T0 = 1_800_000_000


def notice(t, restart, job="9", node="n1"):
    return {"event": protocol.EVENT_SPOT_NOTICE, "time": T0 + t, "job_id": job, "restart": restart,
            "action": "terminate", "notice_time": T0 + t + 120, "node": node, "signal": "USR1"}


def test_notice_to_commit_per_attempt(tmp_path):
    state = protocol.state_dir(tmp_path)
    state.mkdir()
    (state / protocol.committed_name("9", 0)).write_text(json.dumps({"step": 12, "time": T0 + 14.4}))
    events = [{"event": "attempt_start", "time": T0, "job_id": "9", "restart": 0},
              notice(10, 0), notice(11, 0, node="n2"),  # the second node's watcher: same attempt
              notice(5, 0, job="77"),  # another job sharing the run directory
              {"event": protocol.EVENT_SPOT_NOTICE, "job_id": "9", "restart": 1},  # torn: no times
              notice(300, 1)]  # the second attempt got a notice but never committed
    first, second = notice_outcomes(tmp_path, "9", events)
    assert (first.restart, first.node, first.step) == (0, "n1", 12)
    assert abs(first.committed_in_s - 4.4) < 1e-6
    assert first.line() == ("attempt 1: spot notice (terminate, n1) -> committed step 12 in 4 s, "
                            "116 s before the deadline")
    assert first.to_dict()["committed_in_s"] == first.committed_in_s
    assert second.committed_in_s is None and second.step is None
    assert second.line().endswith("no checkpoint committed")


def test_no_notice_no_lines(tmp_path):
    assert notice_outcomes(tmp_path, "9", [{"event": "attempt_start", "job_id": "9"}]) == []
