"""An exception in the ``with Run`` block with TERM (Slurm ending the step: a failed peer under
``--kill-on-bad-exit``, ``scancel``), before it or up to a moment after it in a job of several
ranks, ends the process at once once the rank's exit and error are recorded; without TERM, or
under ``hpcflow.launch``, the interpreter leaves as usual (``atexit`` handlers run)."""

from __future__ import annotations

import signal

import pytest
from one_rank import run_one_rank

from hpcflow import protocol as P
from hpcflow.runtime.leaving import slurm_ending

PROGRAM = """
import atexit, os, signal, sys, threading, time
import torch
from hpcflow.runtime import Run

atexit.register(lambda: open(sys.argv[2], "w").close())
# two ranks in the environment: no process group, so this one process stands for one of them
with Run.from_env(join_process_group=os.environ["SLURM_NTASKS"] == "1") as run:
    if sys.argv[1] == "term":
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)
    if sys.argv[1] == "term-after":  # srun's TERM comes after the failed collective
        threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGTERM)).start()
    raise RuntimeError("Connection closed by peer [127.0.0.1]:29500")
"""


@pytest.mark.parametrize("mode, extra, teardown", [
    pytest.param("term", {}, False, id="after-term"),
    pytest.param("no-term", {}, True, id="without-term"),
    # hpcflow.launch: submitit's handler, after the block, pickles the exception for the caller
    pytest.param("term", {P.ENV_EXIT_AFTER_DONE: "0"}, True, id="launch-keeps-the-process"),
    # with two ranks the rank waits a moment for the TERM of a step that srun is ending...
    pytest.param("term-after", {"SLURM_NTASKS": "2"}, False, id="term-just-after"),
    # ...and leaves the usual way when none comes (one rank alone: see the last test)
    pytest.param("no-term", {"SLURM_NTASKS": "2"}, True, id="two-ranks-without-term"),
])
def test_an_exception_after_term_leaves_at_once_with_its_record_and_traceback(
        tmp_path, mode, extra, teardown):
    out = run_one_rank(PROGRAM, tmp_path, "84", extra, (mode, str(tmp_path / "atexit-ran")))
    assert out.returncode == 1, out.stderr
    assert out.returncode != -signal.SIGTERM
    assert "RuntimeError: Connection closed by peer" in out.stderr  # the traceback, either way
    assert "Traceback (most recent call last)" in out.stderr
    record = P.state_dir(tmp_path) / P.exits_name("84", 0) / "0"
    status, _, reason = P.parse_rank_exit(record.read_text())
    assert status == 1 and reason.startswith("RuntimeError: Connection closed by peer")
    assert (tmp_path / "atexit-ran").exists() is teardown, out.stderr


def test_slurm_ending_waits_for_term_only_with_peers():
    calls = iter([False, False, True])
    assert slurm_ending(lambda: next(calls), world_size=2, wait_s=5.0)
    assert slurm_ending(lambda: True, world_size=1)
    seen = []
    assert not slurm_ending(lambda: seen.append(1) or False, world_size=1, wait_s=5.0)
    assert seen == [1]  # one look, no wait
    assert not slurm_ending(lambda: False, world_size=4, wait_s=0.05)
