"""`hpcflow cluster hyperpod create|describe` against a moto server on loopback: the bundle lands
in S3 under the spec's lifecycle prefix, the request reaches SageMaker's CreateCluster, and
describe shows the cluster it made."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from hpcflow.resources import data_dir

pytestmark = pytest.mark.moto
SPEC = data_dir("pcluster_configs") / "hyperpod-p5.spec.yaml"
BUCKET = "sagemaker-example-lifecycle"


@pytest.fixture
def env():
    out = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    out.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
               AWS_DEFAULT_REGION="us-east-1")
    return out


def _client(name, moto_url):
    import boto3

    return boto3.client(name, region_name="us-east-1", endpoint_url=moto_url,
                        aws_access_key_id="testing", aws_secret_access_key="testing")


def _hpcflow(env, *args):
    cmd = [sys.executable, "-m", "hpcflow", "cluster", "hyperpod", *args]
    print("+", " ".join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    print(proc.stdout, proc.stderr, sep="\n")
    return proc


def test_create_uploads_the_bundle_calls_create_cluster_and_describe_shows_it(moto_url, env):
    s3 = _client("s3", moto_url)
    s3.create_bucket(Bucket=BUCKET)
    proc = _hpcflow(env, "create", str(SPEC), "--endpoint-url", moto_url, "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)["data"]
    assert data["cluster_arn"].endswith(":cluster/train-hp")
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]}
    assert keys == {f"hpcflow/{name}" for name in data["bundle"]}
    assert {"hpcflow/on_create.sh", "hpcflow/provisioning_parameters.json",
            "hpcflow/steps/10-efa.sh"} <= keys
    params = json.loads(s3.get_object(Bucket=BUCKET, Key="hpcflow/provisioning_parameters.json")
                        ["Body"].read())
    assert params["worker_groups"] == [{"instance_group_name": "train", "partition_name": "train"}]

    shown = _hpcflow(env, "describe", "train-hp", "--endpoint-url", moto_url, "--json")
    assert shown.returncode == 0, shown.stderr
    cluster = json.loads(shown.stdout)["data"]
    assert cluster["ClusterStatus"] == "InService"
    groups = {g["InstanceGroupName"]: g for g in cluster["InstanceGroups"]}
    assert {n: (g["InstanceType"], g["TargetCount"]) for n, g in groups.items()} == {
        "controller": ("ml.m5.2xlarge", 1), "login": ("ml.m5.xlarge", 1),
        "train": ("ml.p5.48xlarge", 4)}
    assert groups["train"]["LifeCycleConfig"] == {
        "SourceS3Uri": f"s3://{BUCKET}/hpcflow", "OnCreate": "on_create.sh"}
    text = _hpcflow(env, "describe", "train-hp", "--endpoint-url", moto_url)
    assert "train-hp: InService" in text.stdout and "train: ml.p5.48xlarge x 4" in text.stdout

    again = _hpcflow(env, "create", str(SPEC), "--endpoint-url", moto_url)
    assert again.returncode == 2
    assert "ResourceInUse" in again.stderr and "Traceback" not in again.stderr


def test_a_missing_bucket_stops_before_any_cluster_is_created(moto_url, env):
    proc = _hpcflow(env, "create", str(SPEC), "--set", "name=no-bucket", "--set",
                    "hyperpod.lifecycle_s3_uri=s3://sagemaker-missing/x", "--endpoint-url",
                    moto_url)
    assert proc.returncode == 2
    assert "bucket 'sagemaker-missing' does not exist" in proc.stderr
    gone = _hpcflow(env, "describe", "no-bucket", "--endpoint-url", moto_url)
    assert gone.returncode == 2 and "no-bucket" in gone.stderr
