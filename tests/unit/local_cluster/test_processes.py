"""pid records never let `down` signal a process hpcflow did not start."""

import os
import subprocess
import sys
import time

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


def test_a_jobs_processes_are_found_by_their_slurm_environment():
    env = {**os.environ, "SLURM_JOB_ID": "990001", "SLURM_PROCID": "1", "SLURMD_NODENAME": "n2",
           "SLURM_STEP_ID": "0"}
    other = {**env, "SLURM_JOB_ID": "990002"}
    # The batch script's supervisor: SLURM_PROCID 0 but no step, and the program in its argv.
    batch = {k: v for k, v in {**env, "SLURM_PROCID": "0"}.items() if k != "SLURM_STEP_ID"}
    code = "import time; time.sleep(60)"
    ours = subprocess.Popen([sys.executable, "-c", code, "train-marker"], env=env)
    theirs = subprocess.Popen([sys.executable, "-c", code, "train-marker"], env=other)
    supervisor = subprocess.Popen([sys.executable, "-c", code, "train-marker"], env=batch)
    try:
        deadline = time.monotonic() + 10
        while ours.pid not in procs.job_processes("990001"):
            assert time.monotonic() < deadline, "the process never showed up"
            time.sleep(0.05)
        while supervisor.pid not in procs.job_processes("990001"):
            assert time.monotonic() < deadline, "the process never showed up"
            time.sleep(0.05)
        found = procs.job_processes("990001")
        assert set(found) == {ours.pid, supervisor.pid}
        assert found[ours.pid]["SLURMD_NODENAME"] == "n2"
        assert procs.job_processes("990001", node="n1") == {}
        assert procs.rank_pid("990001", 1, "train-marker") == ours.pid
        assert procs.rank_pid("990001", 0, "train-marker") is None
        assert procs.rank_pid("990001", 1, "another-program") is None
    finally:
        ours.kill()
        theirs.kill()
        supervisor.kill()
        ours.wait()
        theirs.wait()
        supervisor.wait()
    assert procs.job_processes("990001") == {}
    assert procs.environ(ours.pid) == {}
