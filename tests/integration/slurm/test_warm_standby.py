"""A warm standby on the real local Slurm cluster (``resilience.warm_standby``; docs/protocol.md,
"Warm standby"): a killed rank's restart is handed to the standby step started beside the
running one, training resumes from the last committed checkpoint, and the standby left waiting
at the end leaves without a word in the job log."""

from __future__ import annotations

import os
import signal

import pytest
from test_resilience import INTERVAL, RESILIENCE, STEPS, rank_pid_after, tagged, train

from hpcflow import protocol

pytestmark = [pytest.mark.slurm]


def test_a_killed_ranks_restart_is_handed_to_the_warm_standby(submit_job):
    spec = train("warm")
    spec["resilience"] = {**RESILIENCE, "warm_standby": True}
    job = submit_job(spec)
    pid = rank_pid_after(job, 1, 13)
    os.kill(pid, signal.SIGKILL)
    final = job.wait_finished(240)
    assert final.state == "COMPLETED" and final.restarts == 0
    restart = job.event(protocol.EVENT_STEP_RESTART)
    assert restart is not None and restart["cause"] == "rank_failure"
    committed = restart["step"]
    log = job.log()
    assert "warm standby 1 started" in log
    assert "the restart is handed to warm standby 1" in log
    _, second_try = log.split("hpcflow-resume", 1)
    assert [r["step"] for r in tagged(log, "hpcflow-resume")] == [committed]
    assert [s["step"] for s in tagged(second_try, "hpcflow-step")] == \
        list(range(committed + 1, STEPS + 1))
    assert committed % INTERVAL == 0
    # The handed-over ranks' start-up counts from the hand-over, not from their earlier start.
    startups = tagged(log, "hpcflow-startup")
    assert len(startups) == 2 and startups[1]["launch_s"] is not None
    # The standby started for the second step was never used: it left quietly.
    ending = log.split("the step ended with status 0", 1)[1]
    assert "srun: error" not in ending and "Killed" not in ending, ending
