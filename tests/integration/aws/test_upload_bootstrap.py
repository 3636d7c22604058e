"""`hpcflow cluster upload-bootstrap` against a moto S3 server on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.moto
BOOTSTRAP = Path(__file__).resolve().parents[3] / "bootstrap"


@pytest.fixture
def env():
    out = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    out.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
               AWS_DEFAULT_REGION="us-east-1")
    return out


def _s3(moto_url):
    import boto3

    return boto3.client("s3", region_name="us-east-1", endpoint_url=moto_url,
                        aws_access_key_id="testing", aws_secret_access_key="testing")


def _upload(moto_url, env, *args):
    cmd = [sys.executable, "-m", "hpcflow", "cluster", "upload-bootstrap", "--endpoint-url",
           moto_url, *args]
    print("+", " ".join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    print(proc.stdout, proc.stderr, sep="\n")
    return proc


def test_upload_puts_every_script_and_prints_the_custom_action(moto_url, env, tmp_path):
    s3 = _s3(moto_url)
    s3.create_bucket(Bucket="cluster-scripts")
    proc = _upload(moto_url, env, "--bucket", "cluster-scripts", "--prefix", "/hpcflow/v1/")
    assert proc.returncode == 0, proc.stderr
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket="cluster-scripts")["Contents"]}
    want = {f"hpcflow/v1/{p.relative_to(BOOTSTRAP).as_posix()}" for p in BOOTSTRAP.rglob("*")
            if p.is_file()}
    assert keys == want
    body = s3.get_object(Bucket="cluster-scripts", Key="hpcflow/v1/steps/10-efa.sh")["Body"].read()
    assert body == (BOOTSTRAP / "steps/10-efa.sh").read_bytes()
    assert "s3://cluster-scripts/hpcflow/v1/hpcflow-bootstrap.sh" in proc.stdout.splitlines()
    snippet = yaml.safe_load(proc.stdout.split("in your cluster spec:\n", 1)[1])
    action = snippet["bootstrap"]["on_node_configured"][0]
    assert action == {"script": "s3://cluster-scripts/hpcflow/v1/hpcflow-bootstrap.sh",
                      "args": ["--from-s3", "s3://cluster-scripts/hpcflow/v1", "--steps",
                               "efa,nccl,nccl-tests,healthcheck"]}
    assert snippet["s3_access"] == [{"bucket": "cluster-scripts", "write": False}]


def test_missing_bucket_is_named(moto_url, env):
    proc = _upload(moto_url, env, "--bucket", "no-such-bucket-here", "--json")
    assert proc.returncode == 2
    err = json.loads(proc.stdout)["error"]
    assert "--bucket: 'no-such-bucket-here' does not exist" in err["message"]


@pytest.mark.parametrize(("args", "message"), [
    (["--bucket", "Bad_Bucket"], "--bucket: 'Bad_Bucket' is not a valid S3 bucket name"),
    (["--bucket", "ok-bucket", "--prefix", "a//b"], "--prefix: 'a//b' is not allowed"),
    (["--bucket", "ok-bucket", "--steps", "efa,gpu"], "--steps: 'gpu' not allowed"),
])
def test_bad_arguments_are_refused_before_aws_is_asked(moto_url, env, args, message):
    proc = _upload(moto_url, env, *args)
    assert proc.returncode == 2 and message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_entry_script_alone_fetches_its_steps_from_s3(moto_url, env, tmp_path):
    """As on a ParallelCluster node: only the entry script is downloaded; --from-s3 brings the
    rest with the AWS CLI (here against moto through AWS_ENDPOINT_URL)."""
    s3 = _s3(moto_url)
    s3.create_bucket(Bucket="node-scripts")
    proc = _upload(moto_url, env, "--bucket", "node-scripts", "--json")
    assert proc.returncode == 0, proc.stderr
    args = json.loads(proc.stdout)["data"]["args"]
    node = tmp_path / "node"
    node.mkdir()
    s3.download_file("node-scripts", "hpcflow/hpcflow-bootstrap.sh", str(node / "entry.sh"))
    root = tmp_path / "root"
    run_env = {**env, "AWS_ENDPOINT_URL": moto_url,
               "PATH": f"{Path(sys.executable).parent}:{env['PATH']}"}
    steps_at = args.index("--steps")
    cmd = ["bash", str(node / "entry.sh"), *args[:steps_at], "--steps", "healthcheck",
           "--prefix", str(root), "--instance-type", "p5.48xlarge"]
    print("+", " ".join(cmd))
    ran = subprocess.run(cmd, env=run_env, capture_output=True, text=True, timeout=120)
    print(ran.stdout, ran.stderr, sep="\n")
    assert ran.returncode == 0
    assert (node / "steps/90-healthcheck.sh").is_file() and (node / "lib/common.sh").is_file()
    assert (root / "opt/slurm/etc/scripts/prolog.d/90-hpcflow-health.sh").is_file()
