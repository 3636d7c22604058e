"""A job spec with platform: sagemaker becomes a CreateTrainingJob request that botocore's own
parameter validation accepts; hostile specs are refused naming the field, the value and what
is allowed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hpcflow.aws.requests import request_problems
from hpcflow.errors import SpecError
from hpcflow.sagemaker.request import build_request, container_command, training_job_name
from hpcflow.spec.job import JobSpec, load_job_spec
from hpcflow.spec.loading import validate_model

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

SM: dict[str, Any] = {
    "image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1",
    "role_arn": "arn:aws:iam::123456789012:role/SageMakerTraining",
    "instance_type": "p5.48xlarge",
    "output_s3_uri": "s3://bucket-a/output",
}
SPEC: dict[str, Any] = {
    "name": "llm-pretrain",
    "platform": "sagemaker",
    "nodes": 2,
    "gpus_per_node": 8,
    "time_limit": "10:00:00",
    "run_dir": "/scratch/runs/llm",
    "program": {"module": "pkg.train", "args": ["--lr", "3e-4"]},
    "env": {"WANDB_PROJECT": "llm"},
    "checkpoint": {"s3_uri": "s3://bucket-a/ckpt/llm", "interval_steps": 500},
    "sagemaker": SM,
}


def spec(**changes: Any) -> JobSpec:
    return validate_model(JobSpec, {**SPEC, **changes}, "job.yaml")


def problems(**changes: Any) -> list[str]:
    with pytest.raises(SpecError) as info:
        spec(**changes)
    return info.value.problems


def test_request_carries_nodes_instance_program_env_spot_and_checkpoints():
    req = build_request(spec(), job_name="llm-pretrain-20260101-000000")
    assert request_problems("sagemaker", "CreateTrainingJob", req) == []
    assert req["ResourceConfig"] == {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 2,
                                     "VolumeSizeInGB": 100}
    algo = req["AlgorithmSpecification"]
    assert algo["ContainerEntrypoint"] == ["python3", "-m", "hpcflow.sagemaker.launch"]
    assert algo["ContainerArguments"] == ["--nproc-per-node", "8", "--", "python3", "-m",
                                          "pkg.train", "--lr", "3e-4"]
    assert req["EnableManagedSpotTraining"] is True
    assert req["StoppingCondition"] == {"MaxRuntimeInSeconds": 36000,
                                        "MaxWaitTimeInSeconds": 72000}
    assert req["CheckpointConfig"] == {"S3Uri": "s3://bucket-a/ckpt/llm",
                                       "LocalPath": "/opt/ml/checkpoints"}
    env = req["Environment"]
    assert env["WANDB_PROJECT"] == "llm"
    assert env["HPCFLOW_CHECKPOINT_DIR"] == "/opt/ml/checkpoints"
    assert env["HPCFLOW_CHECKPOINT_INTERVAL"] == "500"


@pytest.mark.parametrize(("interruptions", "wait_s"), [
    pytest.param(0, 36000, id="none-expected-wait-equals-runtime"),
    pytest.param(1, 72000, id="one-twice-the-runtime"),
    pytest.param(3, 144000, id="three"),
])
def test_max_wait_grows_with_expected_interruptions(interruptions, wait_s):
    req = build_request(spec(sagemaker={**SM, "expected_interruptions": interruptions}),
                        job_name="n")
    stop = req["StoppingCondition"]
    assert stop["MaxWaitTimeInSeconds"] == wait_s >= stop["MaxRuntimeInSeconds"]


def test_on_demand_has_no_max_wait_and_argv_program_is_passed_as_is():
    req = build_request(spec(sagemaker={**SM, "spot": False, "checkpoint_local_path": "/ckpt"},
                             program={"argv": ["/opt/bin/train", "--x", "1"]}), job_name="n")
    assert req["EnableManagedSpotTraining"] is False
    assert req["StoppingCondition"] == {"MaxRuntimeInSeconds": 36000}
    assert req["AlgorithmSpecification"]["ContainerArguments"][3:] == ["/opt/bin/train", "--x", "1"]
    assert req["Environment"]["HPCFLOW_CHECKPOINT_DIR"] == "/ckpt"
    assert req["CheckpointConfig"]["LocalPath"] == "/ckpt"


def test_every_example_spec_renders_a_valid_request_on_sagemaker():
    """The SageMaker example as it is, and every example spec with platform: sagemaker set."""
    example = load_job_spec(EXAMPLES / "sagemaker-spot.yaml")
    assert request_problems("sagemaker", "CreateTrainingJob", build_request(example)) == []
    checked = 0
    for path in sorted(EXAMPLES.glob("*.yaml")):
        overrides = ["platform=sagemaker", "sagemaker.image=" + SM["image"],
                     "sagemaker.role_arn=" + SM["role_arn"],
                     "sagemaker.instance_type=ml.g5.12xlarge",
                     "sagemaker.output_s3_uri=s3://bucket-a/out",
                     "checkpoint.s3_uri=s3://bucket-a/ckpt", "container=null",
                     "program.workdir=null", "name=example-" + str(checked)]
        job = load_job_spec(path, overrides)
        assert request_problems("sagemaker", "CreateTrainingJob", build_request(job)) == [], path
        checked += 1
    assert checked >= 5


@pytest.mark.parametrize(("given", "says"), [
    pytest.param("ml.p5.48xl", "did you mean 'ml.p5.48xlarge'?", id="typo"),
    pytest.param("zz.nothing", "TrainingInstanceType values", id="unknown"),
])
def test_an_instance_type_sagemaker_does_not_know_is_refused_by_name(given, says):
    with pytest.raises(SpecError) as info:
        build_request(spec(sagemaker={**SM, "instance_type": given}), job_name="n")
    assert str(info.value).startswith(f"sagemaker.instance_type: 'ml.{given.removeprefix('ml.')}'")
    assert says in str(info.value)


def test_job_name_is_the_spec_name_and_the_utc_time():
    assert training_job_name(spec(), now_s=0) == "llm-pretrain-19700101-000000"


def test_module_program_uses_the_image_python():
    entry, args = container_command(spec(sagemaker={**SM, "python": "/opt/conda/bin/python"}))
    assert entry[0] == "/opt/conda/bin/python" and args[3] == "/opt/conda/bin/python"


def test_slurm_platform_ignores_the_block_and_cannot_render():
    job = spec(platform="slurm")
    with pytest.raises(SpecError, match="platform: sagemaker"):
        build_request(job)


@pytest.mark.parametrize(("changes", "field", "says"), [
    pytest.param({"sagemaker": {**SM, "instance_type": "p5 48xlarge"}}, "sagemaker.instance_type",
                 "such as ml.p5.48xlarge", id="instance-shape"),
    pytest.param({"sagemaker": {**SM, "role_arn": "SageMakerRole"}}, "sagemaker.role_arn",
                 "arn:aws:iam::", id="role-not-an-arn"),
    pytest.param({"sagemaker": {**SM, "image": "a b"}}, "sagemaker.image", "without spaces",
                 id="image-space"),
    pytest.param({"sagemaker": {**SM, "output_s3_uri": "https://x"}}, "sagemaker.output_s3_uri",
                 "s3://BUCKET", id="output-not-s3"),
    pytest.param({"sagemaker": {**SM, "checkpoint_local_path": "ckpt"}},
                 "sagemaker.checkpoint_local_path", "absolute", id="local-path-relative"),
    pytest.param({"sagemaker": {**SM, "expected_interruptions": -1}},
                 "sagemaker.expected_interruptions", "greater than or equal to 0",
                 id="negative-interruptions"),
    pytest.param({"sagemaker": {**SM, "unknown": 1}}, "sagemaker.unknown", "", id="unknown-key"),
    pytest.param({"sagemaker": None}, "sagemaker", "needs a sagemaker block", id="no-block"),
    pytest.param({"checkpoint": {}}, "checkpoint.s3_uri", "CheckpointConfig.S3Uri",
                 id="no-checkpoint-uri"),
    pytest.param({"name": "llm_pretrain"}, "name", "TrainingJobName", id="underscore-name"),
    pytest.param({"name": "x" * 48}, "name", "1-47", id="name-too-long"),
    pytest.param({"time_limit": "29-00:00:00"}, "time_limit", "28 days", id="runtime-over-28d"),
    pytest.param({"container": {"image": "nvcr.io#nvidia/pytorch:24.05-py3"}}, "container",
                 "sagemaker.image", id="pyxis-container"),
    pytest.param({"env": {"KEY": {"from_file": "/home/u/.key"}}}, "env.KEY",
                 "cannot reach a SageMaker container", id="env-from-file"),
    pytest.param({"env": {"LONG": "x" * 600}}, "env.LONG", "512", id="env-value-too-long"),
    pytest.param({"program": {"argv": ["/bin/t", "y" * 300]}}, "program.argv", "256",
                 id="argument-too-long"),
])
def test_hostile_specs_name_field_value_and_what_is_allowed(changes, field, says):
    lines = problems(**changes)
    assert any(line.startswith(f"{field}:") or f" {field}:" in line for line in lines), lines
    assert says in "\n".join(lines), lines


def test_dry_run_json_holds_the_request_in_the_envelope(tmp_path, capsys):
    from click.testing import CliRunner

    from hpcflow.cli.main import cli

    path = tmp_path / "job.yaml"
    path.write_text(json.dumps({**SPEC, "run_dir": str(tmp_path / "run")}))
    out = CliRunner().invoke(cli, ["submit", str(path), "--dry-run", "--json"])
    assert out.exit_code == 0, out.output
    envelope = json.loads(out.output)
    assert envelope["ok"] is True and envelope["error"] is None
    request = envelope["data"]["request"]
    assert request_problems("sagemaker", "CreateTrainingJob", request) == []
    assert request["ResourceConfig"]["InstanceCount"] == 2
    assert not (tmp_path / "run").exists()  # a dry run writes nothing


def test_dry_run_refuses_a_hostile_spec_in_the_envelope(tmp_path):
    from click.testing import CliRunner

    from hpcflow.cli.main import cli

    path = tmp_path / "job.yaml"
    path.write_text(json.dumps({**SPEC, "run_dir": str(tmp_path / "run"),
                                "sagemaker": {**SM, "instance_type": "p9.huge"}}))
    out = CliRunner().invoke(cli, ["submit", str(path), "--dry-run", "--json"])
    assert out.exit_code == 2
    envelope = json.loads(out.output)
    assert envelope["ok"] is False and "sagemaker.instance_type" in envelope["error"]["message"]
