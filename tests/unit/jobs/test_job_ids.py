"""Job ids: a malformed one is refused before Slurm is asked; an unknown one is an error, not
an UNKNOWN row or a "cancelled" that did nothing."""

from __future__ import annotations

import json

import pytest

from hpcflow.jobs import service


@pytest.mark.parametrize("verb", ["status", "logs", "cancel"])
@pytest.mark.parametrize("job_id", ["abc", "", "0", "1,2", " 5", "1;rm -rf /", "12_x", "$(id)"])
def test_a_malformed_job_id_is_refused_before_slurm_is_asked(slurm, hpcflow, verb, job_id):
    result = hpcflow(verb, "--", job_id)
    assert result.exit_code == 2
    assert "is not a Slurm job id" in result.output and repr(job_id) in result.output
    assert slurm.calls == []
    assert "Traceback" not in result.output


@pytest.mark.parametrize("job_id", ["123", "120_3"])
def test_well_formed_job_ids_pass_the_check(job_id):
    assert service.job_id_problem(job_id) is None


def test_status_of_a_job_nobody_knows_is_an_error(slurm, hpcflow):
    result = hpcflow("status", "99999999")
    assert result.exit_code == 4
    assert "unknown to Slurm" in result.output


def test_cancel_of_an_unknown_job_does_not_claim_success(slurm, hpcflow):
    result = hpcflow("cancel", "99999999")
    assert result.exit_code == 4
    assert "nothing to cancel" in result.output and "cancelled job" not in result.output
    assert not slurm.ran("scancel")


def test_cancel_of_a_finished_job_says_so_and_sends_nothing(slurm, hpcflow):
    slurm.answers["scontrol"] = (0, "JobId=77 JobName=j JobState=COMPLETED ExitCode=0:0\n", "")
    result = hpcflow("cancel", "77", "--json")
    assert result.exit_code == 0
    assert json.loads(result.output)["data"] == {"job_id": "77", "cancelled": False,
                                                 "already_ended": "COMPLETED"}
    assert not slurm.ran("scancel")


def test_cancel_of_a_running_job_runs_scancel(slurm, hpcflow):
    slurm.answers["scontrol"] = (0, "JobId=78 JobName=j JobState=RUNNING ExitCode=0:0\n", "")
    result = hpcflow("cancel", "78")
    assert result.exit_code == 0 and "cancelled job 78" in result.output
    assert ["scancel", "78"] in slurm.calls
