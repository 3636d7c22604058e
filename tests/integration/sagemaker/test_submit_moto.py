"""A real SageMaker submit against a moto server on loopback: the request is created, described
back as sent, and recorded in the run directory; a refused request records nothing."""

from __future__ import annotations

import json
import stat

import pytest
from click.testing import CliRunner

from hpcflow.cli.main import cli
from hpcflow.sagemaker import service

pytestmark = [pytest.mark.moto]

SPEC = {
    "name": "tiny-sm",
    "platform": "sagemaker",
    "nodes": 2,
    "tasks_per_node": 2,
    "time_limit": "01:00:00",
    "program": {"module": "hpcflow.examples.train", "args": ["--steps", "10"]},
    "checkpoint": {"s3_uri": "s3://ckpt-bucket/runs/tiny", "interval_steps": 5},
    "sagemaker": {
        "image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1",
        "role_arn": "arn:aws:iam::123456789012:role/SageMakerTraining",
        "instance_type": "ml.c5.xlarge",
        "output_s3_uri": "s3://ckpt-bucket/output",
    },
}


@pytest.fixture
def aws(moto_url, monkeypatch):  # noqa: ANN001, ANN201
    for name, value in {"AWS_ENDPOINT_URL_SAGEMAKER": moto_url, "AWS_ACCESS_KEY_ID": "testing",
                        "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    return service.make_client()


def test_submit_creates_the_training_job_and_records_it(tmp_path, aws):
    run_dir = tmp_path / "run"
    spec = tmp_path / "job.yaml"
    spec.write_text(json.dumps({**SPEC, "run_dir": str(run_dir)}))
    out = CliRunner().invoke(cli, ["submit", str(spec), "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)["data"]
    name = data["job_name"]
    assert name.startswith("tiny-sm-") and data["job_arn"].endswith(f"training-job/{name}")
    described = service.describe(name, client=aws)
    assert described["TrainingJobName"] == name
    assert described["ResourceConfig"]["InstanceCount"] == 2
    assert described["ResourceConfig"]["InstanceType"] == "ml.c5.xlarge"
    assert described["StoppingCondition"] == {"MaxRuntimeInSeconds": 3600,
                                              "MaxWaitTimeInSeconds": 7200}
    assert described["EnableManagedSpotTraining"] is True
    assert described["CheckpointConfig"]["S3Uri"] == "s3://ckpt-bucket/runs/tiny"
    kept = json.loads((run_dir / service.REQUEST_FILE).read_text())
    assert kept == data["request"]
    assert stat.S_IMODE((run_dir / service.REQUEST_FILE).stat().st_mode) == 0o600
    [line] = (run_dir / service.JOBS_FILE).read_text().splitlines()
    assert json.loads(line)["job_arn"] == data["job_arn"]


def test_an_unreachable_endpoint_is_said_and_records_nothing(tmp_path, aws, monkeypatch):
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER", f"http://127.0.0.1:{closed}")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    run_dir = tmp_path / "run"
    spec = tmp_path / "job.yaml"
    spec.write_text(json.dumps({**SPEC, "run_dir": str(run_dir)}))
    out = CliRunner().invoke(cli, ["submit", str(spec), "--json"])
    assert out.exit_code == 3, out.output
    error = json.loads(out.output)["error"]
    assert error["type"] == "SubmitError" and "CreateTrainingJob 'tiny-sm-" in error["message"]
    assert not run_dir.exists()


def test_status_of_a_submitted_job(tmp_path, aws):
    spec = tmp_path / "job.yaml"
    spec.write_text(json.dumps({**SPEC, "run_dir": str(tmp_path / "run")}))
    name = json.loads(CliRunner().invoke(cli, ["submit", str(spec), "--json"]).output
                      )["data"]["job_name"]
    out = CliRunner().invoke(cli, ["sagemaker", "status", name, "--json"])
    assert out.exit_code == 0, out.output
    st = json.loads(out.output)["data"]
    assert st["job_name"] == name and st["status"] in ("InProgress", "Completed")
    assert st["transitions"] and st["transitions"][0]["status"] == "Starting"
    missing = CliRunner().invoke(cli, ["sagemaker", "status", "no-such-job", "--json"])
    assert missing.exit_code == 3
    assert "DescribeTrainingJob 'no-such-job' failed" in json.loads(missing.output)["error"][
        "message"]
