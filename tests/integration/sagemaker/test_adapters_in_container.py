"""The Hugging Face Trainer and Lightning adapters inside SageMaker training containers, with
real processes: a 2-instance x 1-rank job (2 gloo ranks on loopback) rendered by
``hpcflow submit --dry-run``, run by the local container runner (each instance its own /opt/ml
and checkpoint folder, started through ``hpcflow.sagemaker.launch`` and torchrun), SIGTERM'd
mid-run as at a spot interruption, its checkpoint folders synced through a moto S3 server with
a partial newer checkpoint planted there, and restarted. The restart skips the partial one,
resumes at the committed step, and ends with the parameters of an uninterrupted run, bit for
bit; both hosts keep the same checkpoints, so S3 keeps only ``keep`` of them."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import boto3
import pytest
from click.testing import CliRunner
from container_runner import LocalTrainingJob

from hpcflow.cli.main import cli

pytestmark = [pytest.mark.dist, pytest.mark.moto, pytest.mark.timeout(300)]

STEPS = 12
INTERVAL = 2
KEEP = 2
#: The ranks stop on their own this soon after SIGTERM: before torchrun's default 30 s kill (the
#: launcher allows 110 s, hpcflow.sagemaker.launch.SHUTDOWN_TIMEOUT_S).
TORCHRUN_GRACE_S = 30
HERE = Path(__file__).resolve().parent
HF_PROGRAM = HERE.parents[1] / "programs" / "hf_trainer.py"
PL_PROGRAM = HERE / "programs" / "lightning_resumable.py"


class SageMakerJob(LocalTrainingJob):
    """The local runner, also writing ``input/config/checkpointconfig.json`` (``LocalPath``,
    ``S3Uri``) as SageMaker does for a request with a ``CheckpointConfig``."""

    def _download(self, folder: Path) -> None:
        super()._download(folder)
        for host in self.hosts:
            base = self.root / host / "opt" / "ml"
            if folder.is_relative_to(base):
                (base / "input" / "config" / "checkpointconfig.json").write_text(
                    json.dumps(self.request["CheckpointConfig"]))


def request_for(tmp_path: Path, bucket: str, prefix: str, program: Path, local_path: str,
                *, hpcflow_dir: bool) -> dict:
    """What ``hpcflow submit --dry-run --json`` renders for a 2 x 1 CPU job; without
    ``hpcflow_dir`` the program must find the checkpoint folder from SageMaker's own files."""
    spec = {
        "name": "adapter", "platform": "sagemaker", "nodes": 2, "tasks_per_node": 1,
        "time_limit": "00:30:00", "run_dir": str(tmp_path / "run"),
        "program": {"argv": ["python3", str(program), "--steps", str(STEPS),
                             "--step-time-s", "0.3"]},
        "env": {"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"},
        "checkpoint": {"s3_uri": f"s3://{bucket}/{prefix}", "interval_steps": INTERVAL,
                       "keep": KEEP},
        "sagemaker": {"image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/t:1",
                      "role_arn": "arn:aws:iam::123456789012:role/SageMakerTraining",
                      "instance_type": "ml.c5.xlarge", "output_s3_uri": f"s3://{bucket}/out",
                      "checkpoint_local_path": local_path},
    }
    path = tmp_path / f"{prefix}.json"
    path.write_text(json.dumps(spec))
    out = CliRunner().invoke(cli, ["submit", str(path), "--dry-run", "--json"])
    assert out.exit_code == 0, out.output
    request = json.loads(out.output)["data"]["request"]
    if not hpcflow_dir:
        del request["Environment"]["HPCFLOW_CHECKPOINT_DIR"]
    return request


@pytest.fixture
def s3(moto_url, monkeypatch):  # noqa: ANN001, ANN201
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    client = boto3.client("s3", endpoint_url=moto_url, region_name="us-east-1")
    bucket = f"ckpt-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=bucket)
    return client, bucket


def base_env() -> dict[str, str]:
    drop = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
            "GROUP_RANK", "TORCHELASTIC_RUN_ID")
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("SLURM_", "HPCFLOW_", "SM_", "SAGEMAKER_")) and k not in drop}


def names(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()} if folder.is_dir() else set()


def interrupted_and_baseline(tmp_path: Path, s3, make_request) -> tuple:  # noqa: ANN001
    """The uninterrupted run and a run SIGTERM'd after its checkpoint of step 4, side by side;
    returns (baseline, first, preempted step)."""
    client, _ = s3
    baseline = SageMakerJob(make_request("baseline"), tmp_path / "base", client, base_env())
    first = SageMakerJob(make_request("spot"), tmp_path / "first", client, base_env())
    baseline.start()
    first.start()
    first.wait_for("hpcflow-checkpoint", lambda line: line["step"] >= 2 * INTERVAL)
    signalled = time.monotonic()
    first.interrupt()
    codes = first.wait()
    assert time.monotonic() - signalled < TORCHRUN_GRACE_S, first.dump()
    assert codes != [0, 0], first.dump()  # stopped, not finished
    assert baseline.wait() == [0, 0], baseline.dump()
    [preempted] = first.containers[0].lines("hpcflow-preempted")
    assert 2 * INTERVAL < preempted["step"] < STEPS
    return baseline, first, preempted["step"]


def plant(s3, prefix: str, files: dict[str, bytes]) -> None:  # noqa: ANN001
    client, bucket = s3
    for key, body in files.items():
        client.put_object(Bucket=bucket, Key=f"{prefix}/{key}", Body=body)


def s3_tops(s3, prefix: str) -> set[str]:  # noqa: ANN001
    client, bucket = s3
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
    return {obj["Key"][len(prefix) + 1:].split("/")[0]
            for page in pages for obj in page.get("Contents", [])}


def test_hf_trainer_in_sagemaker_resumes_bit_exact_from_the_synced_checkpoint(tmp_path, s3):
    local = "/opt/ml/hf-checkpoints"

    def make_request(prefix: str) -> dict:
        return request_for(tmp_path, s3[1], prefix, HF_PROGRAM, local, hpcflow_dir=False)

    baseline, first, step = interrupted_and_baseline(tmp_path, s3, make_request)
    [done] = baseline.containers[0].lines("hf-done")
    assert not first.containers[0].lines("hf-done")
    # The folder came from checkpointconfig.json. Host 2 wrote its own RNG file only; rank 0's
    # record lists both hosts' files, and both hosts pruned the same older checkpoints.
    host1, host2 = (first.checkpoint_dir(c.base) for c in first.containers)
    assert host1.name == "hf-checkpoints"
    kept = names(host1)
    assert len(kept) == KEEP and f"checkpoint-{step}" in kept and names(host2) == kept
    record = json.loads((host1 / f"checkpoint-{step}" / "hpcflow-commit.json").read_text())
    on_host2 = names(host2 / f"checkpoint-{step}")
    assert on_host2 == {"rng_state_1.pth"}
    assert set(record["files"]) == names(host1 / f"checkpoint-{step}") - {
        "hpcflow-commit.json"} | on_host2
    first.sync_up()
    # A newer checkpoint whose record lists a file S3 never got: partial on every host.
    broken = f"checkpoint-{STEPS + 1}"
    plant(s3, "spot", {f"{broken}/hpcflow-commit.json": json.dumps(
        {"step": STEPS + 1, "files": {"trainer_state.json": 2, "rng_state_1.pth": 9}}).encode(),
        f"{broken}/trainer_state.json": b"{}"})

    second = SageMakerJob(make_request("spot"), tmp_path / "second", s3[0], base_env())
    second.start()
    assert second.wait() == [0, 0], second.dump()
    assert second.containers[0].lines("hpcflow-resume") == [{"step": step}]
    assert second.containers[0].lines("hf-done") == [done]
    assert done["step"] == STEPS
    host1, host2 = (second.checkpoint_dir(c.base) for c in second.containers)
    assert broken not in names(host1) | names(host2)
    assert len(names(host1)) == KEEP and names(host2) == names(host1)
    second.sync_up()
    assert s3_tops(s3, "spot") == names(host1)


def test_lightning_in_sagemaker_resumes_bit_exact_from_the_synced_checkpoint(tmp_path, s3):
    def make_request(prefix: str) -> dict:
        return request_for(tmp_path, s3[1], prefix, PL_PROGRAM, "/opt/ml/checkpoints",
                           hpcflow_dir=True)

    baseline, first, step = interrupted_and_baseline(tmp_path, s3, make_request)
    [done] = baseline.containers[0].lines("pl-done")
    assert not first.containers[0].lines("pl-done")
    host1, host2 = (first.checkpoint_dir(c.base) for c in first.containers)
    kept = names(host1)
    assert len(kept) == KEEP and f"step_{step}.ckpt" in kept
    assert names(host2) == set()  # rank 0 writes Lightning's whole checkpoint
    first.sync_up()
    broken = f"step_{STEPS + 1}.ckpt.tmp"  # a save cut short
    plant(s3, "spot", {broken: b"partial"})

    second = SageMakerJob(make_request("spot"), tmp_path / "second", s3[0], base_env())
    second.start()
    assert second.wait() == [0, 0], second.dump()
    assert second.containers[0].lines("hpcflow-resume") == [{"step": step}]
    assert second.containers[0].lines("pl-done") == [done]
    assert done["step"] == STEPS
    host1, host2 = (second.checkpoint_dir(c.base) for c in second.containers)
    assert broken not in names(host1) | names(host2)
    # Host 2 got the synced checkpoints at the start and removed those rank 0 pruned since.
    assert len(names(host1)) == KEEP and names(host2) <= names(host1)
    second.sync_up()
    assert s3_tops(s3, "spot") == names(host1)
