"""The supervisor's reading of its own job's ``scontrol show job -o`` line: the fields it decides
on, and no answer when a value the user chose repeats one of them."""

from __future__ import annotations

import subprocess

import pytest

from hpcflow.supervisor import facts

# Slurm 22.05's one-line format, field order as scontrol prints it (trimmed).
LINE = ("JobId=42 JobName={name} UserId=alice(1000) GroupId=alice(1000) JobState=RUNNING "
        "Reason=None Dependency=(null) Requeue=1 Restarts=2 BatchFlag=1 ExitCode=0:0 "
        "RunTime=00:01:00 TimeLimit=00:10:00 EndTime=2026-12-06T10:00:00 "
        "Comment={comment} WorkDir=/home/alice/run StdOut=/home/alice/run/log")


@pytest.mark.parametrize(("name", "comment", "expected"), [
    pytest.param("train", "x", {"JobState": "RUNNING", "Reason": "None", "Restarts": "2",
                                "EndTime": "2026-12-06T10:00:00"}, id="plain"),
    pytest.param("train", "a lower=case value", {"JobState": "RUNNING", "Reason": "None",
                                                 "Restarts": "2",
                                                 "EndTime": "2026-12-06T10:00:00"},
                 id="lower-case-key-stays-in-the-value"),
    pytest.param("x JobState=COMPLETED", "x", None, id="state-in-the-job-name"),
    pytest.param("train", "x EndTime=2030-01-01T00:00:00", None, id="end-time-in-the-comment"),
    pytest.param("train", "x Restarts=0", None, id="restarts-in-the-comment"),
])
def test_job_fields_refuse_a_repeated_key(name, comment, expected):
    assert facts.job_fields(LINE.format(name=name, comment=comment)) == expected


def test_slurm_job_gives_no_answer_for_a_spoofed_line():
    def runner(argv, timeout_s):
        out = LINE.format(name="train", comment="x JobState=PREEMPTED Reason=x")
        return subprocess.CompletedProcess(argv, 0, out + "\n", "")

    assert facts.slurm_job("42", runner=runner) == facts.SlurmJob()

    def honest(argv, timeout_s):
        return subprocess.CompletedProcess(argv, 0, LINE.format(name="t", comment="c") + "\n", "")

    job = facts.slurm_job("42", runner=honest)
    assert (job.state, job.reason, job.restarts) == ("RUNNING", "None", 2)
    assert job.end_time_s is not None
