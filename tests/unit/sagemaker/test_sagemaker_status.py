"""A SageMaker training job's status from DescribeTrainingJob: states, secondary statuses, spot
interruptions and the billable/training seconds, as a table of responses shaped as the API
Reference gives them."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from hpcflow.cli.main import cli
from hpcflow.sagemaker.status import status_from_describe


def transitions(*names: str) -> list[dict]:
    return [{"Status": n, "StartTime": f"2027-01-15T08:0{i}:00Z", "StatusMessage": f"{n} msg"}
            for i, n in enumerate(names)]


@pytest.mark.parametrize(("described", "want"), [
    pytest.param({"TrainingJobName": "a", "TrainingJobStatus": "InProgress",
                  "SecondaryStatus": "Training", "EnableManagedSpotTraining": True,
                  "SecondaryStatusTransitions": transitions("Starting", "Training")},
                 {"finished": False, "interruptions": 0, "spot_saving": None,
                  "reason": "Training msg"}, id="training"),
    pytest.param({"TrainingJobName": "a", "TrainingJobStatus": "Completed",
                  "SecondaryStatus": "Completed", "EnableManagedSpotTraining": True,
                  "TrainingTimeInSeconds": 3600, "BillableTimeInSeconds": 1080,
                  "SecondaryStatusTransitions": transitions(
                      "Starting", "Training", "Interrupted", "Restarting", "Training",
                      "Interrupted", "Restarting", "Training", "Uploading", "Completed")},
                 {"finished": True, "interruptions": 2, "spot_saving": 0.7,
                  "training_s": 3600, "billable_s": 1080}, id="spot-twice-interrupted"),
    pytest.param({"TrainingJobName": "a", "TrainingJobStatus": "Stopped",
                  "SecondaryStatus": "MaxWaitTimeExceeded", "EnableManagedSpotTraining": True,
                  "TrainingTimeInSeconds": 100, "BillableTimeInSeconds": 100},
                 {"finished": True, "secondary": "MaxWaitTimeExceeded", "spot_saving": 0.0},
                 id="max-wait-exceeded"),
    pytest.param({"TrainingJobName": "a", "TrainingJobStatus": "Failed",
                  "SecondaryStatus": "Failed", "FailureReason": "AlgorithmError: exit 1",
                  "TrainingTimeInSeconds": 50, "BillableTimeInSeconds": 50},
                 {"finished": True, "reason": "AlgorithmError: exit 1", "spot_saving": None},
                 id="failed-on-demand"),
])
def test_status_from_describe(described, want):
    st = status_from_describe(described).to_dict()
    assert {k: st[k] for k in want} == want


def test_a_name_sagemaker_cannot_have_is_refused_before_asking():
    out = CliRunner().invoke(cli, ["sagemaker", "status", "bad_name", "--json"])
    assert out.exit_code == 2 and "not a SageMaker training job name" in out.output
