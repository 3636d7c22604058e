"""The SageMaker container contract with real processes: a 2-instance x 2-rank training job
(4 gloo ranks on loopback) rendered by ``hpcflow submit --dry-run``, run by the local container
runner (each instance its own /opt/ml and checkpoint folder, started through
``hpcflow.sagemaker.launch`` and torchrun as SageMaker's toolkit would), interrupted by SIGTERM
mid-run (a spot interruption), its checkpoint folders synced through a moto S3 server, and
restarted: the final parameters are bit-exact those of an uninterrupted run."""

from __future__ import annotations

import json
import os
import uuid

import boto3
import pytest
from click.testing import CliRunner
from container_runner import LocalTrainingJob

from hpcflow.cli.main import cli

pytestmark = [pytest.mark.dist, pytest.mark.moto, pytest.mark.timeout(400)]

STEPS = 12
EXIT_PREEMPTED = 75


def request_for(tmp_path, bucket: str, prefix: str) -> dict:
    """What ``hpcflow submit --dry-run --json`` renders for a 2 x 2 CPU job."""
    spec = {
        "name": "contract", "platform": "sagemaker", "nodes": 2, "tasks_per_node": 2,
        "time_limit": "00:30:00", "run_dir": str(tmp_path / "run"),
        "program": {"module": "hpcflow.examples.train",
                    "args": ["--steps", str(STEPS), "--batch-size", "8", "--seed", "3",
                             "--step-time-s", "0.4"]},
        "env": {"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"},
        "checkpoint": {"s3_uri": f"s3://{bucket}/{prefix}", "interval_steps": 3, "keep": 2},
        "sagemaker": {"image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/t:1",
                      "role_arn": "arn:aws:iam::123456789012:role/SageMakerTraining",
                      "instance_type": "ml.c5.xlarge", "output_s3_uri": f"s3://{bucket}/out"},
    }
    path = tmp_path / "job.yaml"
    path.write_text(json.dumps(spec))
    out = CliRunner().invoke(cli, ["submit", str(path), "--dry-run", "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.output)["data"]["request"]


@pytest.fixture
def s3(moto_url, monkeypatch):  # noqa: ANN001, ANN201
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    client = boto3.client("s3", endpoint_url=moto_url, region_name="us-east-1")
    bucket = f"ckpt-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=bucket)
    return client, bucket


def base_env() -> dict[str, str]:
    drop = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("SLURM_", "HPCFLOW_", "SM_", "SAGEMAKER_")) and k not in drop}


def test_spot_interruption_resumes_bit_exact_through_s3(tmp_path, s3):
    client, bucket = s3
    baseline = LocalTrainingJob(request_for(tmp_path, bucket, "baseline"), tmp_path / "base",
                                client, base_env())
    baseline.start()
    assert baseline.wait() == [0, 0], baseline.dump()
    [done] = baseline.containers[0].lines("hpcflow-done")
    assert done["step"] == STEPS
    assert baseline.containers[0].lines("hpcflow-start")[0]["world_size"] == 4

    request = request_for(tmp_path, bucket, "spot")
    first = LocalTrainingJob(request, tmp_path / "first", client, base_env())
    first.start()
    first.wait_for("hpcflow-checkpoint", lambda line: line["step"] >= 3)
    first.interrupt()
    codes = first.wait()
    assert codes != [0, 0], first.dump()  # stopped, not finished
    [preempted] = first.containers[0].lines("hpcflow-preempted")
    assert 3 <= preempted["step"] < STEPS
    assert not first.containers[0].lines("hpcflow-done")
    # Each host kept its own ranks' shards; rank 0's record lists both hosts' files, and the
    # other host's folder has none (it is complete only in S3, which holds the union).
    host1, host2 = (first.checkpoint_dir(c.base) / f"step_{preempted['step']}"
                    for c in first.containers)
    record = json.loads((host1 / "hpcflow-commit.json").read_text())
    listed = {entry["path"] for entry in record["files"]}
    on_host1 = {p.relative_to(host1).as_posix() for p in host1.rglob("*") if p.is_file()}
    on_host2 = {p.relative_to(host2).as_posix() for p in host2.rglob("*") if p.is_file()}
    assert on_host2 and not (host2 / "hpcflow-commit.json").exists()
    assert listed == (on_host1 | on_host2) - {"hpcflow-commit.json"}
    assert on_host2 - on_host1, "the second host wrote shards of its own"
    first.sync_up()

    second = LocalTrainingJob(request, tmp_path / "second", client, base_env())
    second.start()
    assert second.wait() == [0, 0], second.dump()
    assert second.containers[0].lines("hpcflow-resume") == [{"step": preempted["step"]}]
    [again] = second.containers[0].lines("hpcflow-done")
    assert again["params_sha256"] == done["params_sha256"]
    assert again["optim_sha256"] == done["optim_sha256"]
