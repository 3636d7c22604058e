"""pid records never let `down` signal a process hpcflow did not start."""

import os
import subprocess
import sys

from hpcflow.local_cluster import processes as procs


def test_record_of_a_live_process_is_alive_and_stop_ends_it(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        rec = procs.record_for("sleeper", child.pid)
        assert rec is not None and procs.is_alive(rec)
        path = tmp_path / "daemons.json"
        procs.save_records(path, {"sleeper": rec})
        assert procs.load_records(path) == {"sleeper": rec}
        assert procs.stop(rec, timeout_s=5)
        child.wait(timeout=5)
        assert not procs.is_alive(rec)
    finally:
        child.kill()


def test_a_reused_pid_with_another_start_time_is_not_ours():
    rec = procs.record_for("me", os.getpid())
    assert rec is not None
    foreign = procs.DaemonRecord("me", rec.pid, rec.start_ticks + 1)
    assert not procs.is_alive(foreign)
    assert procs.stop(foreign) is False  # must not signal this test process


def test_missing_or_garbled_records_mean_none(tmp_path):
    assert procs.load_records(tmp_path / "absent.json") == {}
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert procs.load_records(bad) == {}
