"""Each rank's exit record: the status and reason a rank leaves its Run with, written where the
batch script reads it, and read back by the same rule."""

from __future__ import annotations

from hpcflow import protocol as P
from hpcflow.errors import CheckpointError
from hpcflow.runtime.exits import REASON_MAX, exit_status_of, record_exit
from hpcflow.runtime.run import Preempted


def test_the_status_a_rank_leaves_with():
    assert exit_status_of(None) == (0, "closed")
    assert exit_status_of(Preempted(7)) == (75, "preempted")
    assert exit_status_of(SystemExit(3)) == (3, "SystemExit: 3")
    status, reason = exit_status_of(CheckpointError(
        "writing the checkpoint of step 2 failed: CheckpointException\nTraceback (most recent "
        "call last):\n  File ...\nOSError: [Errno 28] No space left on device"))
    assert status == 5
    assert reason.startswith("CheckpointError: writing the checkpoint of step 2 failed")
    assert reason.endswith("OSError: [Errno 28] No space left on device")
    status, reason = exit_status_of(ValueError("x" * 1000 + "\x1b[2J"))
    assert status == 1 and len(reason) <= REASON_MAX and "\x1b" not in reason


def test_the_record_is_where_the_batch_script_reads_it(tmp_path):
    path = record_exit(tmp_path, "42", 1, 3, 5, "CheckpointError: disk full")
    assert path == P.state_dir(tmp_path) / P.exits_name("42", 1) / "3"
    status, time_ms, reason = P.parse_rank_exit(path.read_text())
    assert (status, reason) == (5, "CheckpointError: disk full") and time_ms > 0
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]  # no temp left
    assert record_exit(None, "42", 0, 0, 0, "closed") is None  # outside an hpcflow job
    assert record_exit(tmp_path, None, 0, 0, 0, "closed") is None
    assert P.parse_rank_exit("5 torn") is None
