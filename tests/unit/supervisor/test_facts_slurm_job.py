"""The supervisor's reading of its own job's ``scontrol show job -o`` line: the fields it decides
on, and no answer when a value the user chose repeats one of them."""

from __future__ import annotations

import subprocess

import pytest

from hpcflow.supervisor import facts

# Slurm 22.05's one-line format, field order as scontrol prints it (trimmed).
LINE = ("JobId=42 JobName={name} UserId=alice(1000) GroupId=alice(1000) JobState=RUNNING "
        "Reason=None Dependency=(null) Requeue=1 Restarts=2 BatchFlag=1 ExitCode=0:0 "
        "RunTime=00:01:00 TimeLimit=00:10:00 StartTime=2026-12-06T09:50:00 "
        "EndTime=2026-12-06T10:00:00 "
        "Comment={comment} WorkDir=/home/alice/run StdOut=/home/alice/run/log")
FIELDS = {"JobState": "RUNNING", "Reason": "None", "Restarts": "2", "TimeLimit": "00:10:00",
          "StartTime": "2026-12-06T09:50:00", "EndTime": "2026-12-06T10:00:00"}


@pytest.mark.parametrize(("name", "comment", "expected"), [
    pytest.param("train", "x", {**FIELDS}, id="plain"),
    pytest.param("train", "a lower=case value", {**FIELDS},
                 id="lower-case-key-stays-in-the-value"),
    pytest.param("train", "x TimeLimit=UNLIMITED", None, id="time-limit-in-the-comment"),
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


@pytest.mark.parametrize(("start", "limit", "expected_s"), [
    pytest.param("2026-12-06T09:50:00", "00:10:00", 600, id="minutes"),
    pytest.param("2026-12-06T09:50:00", "1-00:00:00", 86_400, id="a-day"),
    pytest.param("2026-12-06T09:50:00", "UNLIMITED", None, id="unlimited"),
    pytest.param("Unknown", "00:10:00", None, id="not-started"),
    pytest.param("2026-12-06T09:50:00", "ten minutes", None, id="garbled-limit"),
])
def test_the_end_the_time_limit_gives(start, limit, expected_s):
    got = facts.limit_end_s(start, limit)
    if expected_s is None:
        assert got is None
    else:
        assert got == facts.limit_end_s(start, "00:00:01") - 1 + expected_s


def test_slurm_job_reads_the_end_the_current_time_limit_gives():
    def runner(argv, timeout_s):
        return subprocess.CompletedProcess(argv, 0, LINE.format(name="t", comment="x") + "\n", "")

    job = facts.slurm_job("42", runner=runner)
    assert job.state == "RUNNING" and job.restarts == 2
    assert job.limit_end_s == job.end_time_s  # StartTime + 10 min is the EndTime
