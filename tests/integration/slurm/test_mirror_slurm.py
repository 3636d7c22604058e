"""Two-phase checkpoints on the real local Slurm cluster: a job mirrors its checkpoints to S3
(moto on loopback, reached through AWS_ENDPOINT_URL_S3 as boto3 reads it) and a second job with
a fresh checkpoint folder resumes from S3, bit-exact; the preemption checkpoint is on S3 before
the requeue; a bucket that refuses writes leaves training alone."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from slurm_helpers import wait_for

from hpcflow.mirror import store
from hpcflow.runtime import commit as ckpt_dirs
from hpcflow.spec.s3uri import parse_s3_uri

pytestmark = [pytest.mark.slurm, pytest.mark.moto]

PY = sys.executable


def spec(steps: int, s3_uri: str) -> dict:
    return {
        "name": "mirror",
        "nodes": 1,
        "tasks_per_node": 2,
        "time_limit": "00:10:00",
        "program": {"module": "hpcflow.examples.train",
                    "args": ["--steps", str(steps), "--step-time-s", "0.05"]},
        "env": {"OMP_NUM_THREADS": "1"},
        "checkpoint": {"keep": 3, "interval_steps": 4, "s3_uri": s3_uri},
    }


def tagged(log: str, tag: str) -> list[dict]:
    return [json.loads(m) for m in re.findall(rf"^{tag} (\{{.*\}})$", log, re.M)]


def test_a_job_mirrors_to_s3_and_a_new_job_resumes_from_it(submit_job, moto_url, monkeypatch):
    for name, value in {"AWS_ENDPOINT_URL_S3": moto_url, "AWS_ACCESS_KEY_ID": "testing",
                        "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)  # sbatch passes the environment on to the job
    client = store.make_client()
    client.create_bucket(Bucket="mirror-slurm")
    uri = parse_s3_uri("s3://mirror-slurm/runs/tiny")

    first = submit_job(spec(10, str(uri)))
    end = first.wait_finished(300)
    log1 = first.log()
    assert end.state == "COMPLETED", log1
    assert tagged(log1, "hpcflow-done")[-1]["step"] == 10
    done = [e for e in first.events() if e["event"] == "mirror_done"]
    assert done and done[-1]["step"] == 10 and done[-1]["bytes"] > 0 and done[-1]["lag_s"] >= 0
    # The final checkpoint was mirrored before the job ended (the drain), and S3 keeps at most 3
    # (the mirror skips a commit that a newer one superseded before its turn came).
    complete, incomplete = store.list_mirrors(client, uri)
    assert [m.step for m in complete][-1] == 10 and len(complete) <= 3 and incomplete == []
    assert {m.step for m in complete} <= {4, 8, 10}
    local_final = first.run_dir / "checkpoints" / "step_10"
    assert ckpt_dirs.read_commit_record(local_final) is not None

    second = submit_job(spec(14, str(uri)))  # a new run_dir: an empty checkpoint folder
    end = second.wait_finished(300)
    log2 = second.log()
    assert end.state == "COMPLETED", log2
    [pulled] = [e for e in second.events() if e["event"] == "mirror_pull"]
    assert pulled["step"] == 10 and pulled["bytes"] == complete[-1].total_bytes
    assert [r["step"] for r in tagged(log2, "hpcflow-resume")] == [10]
    steps = [s["step"] for s in tagged(log2, "hpcflow-step")]
    assert steps[0] == 11 and steps[-1] == 14
    # Bit-exact: the pulled folder (still kept: keep 3) holds the first job's bytes.
    pulled_dir = second.run_dir / "checkpoints" / "step_10"
    for f in json.loads((local_final / ckpt_dirs.COMMIT_NAME).read_text())["files"]:
        assert (pulled_dir / f["path"]).read_bytes() == (local_final / f["path"]).read_bytes()
    # hpcflow report shows the mirror's bytes and lag.
    proc = subprocess.run([PY, "-m", "hpcflow", "report", first.job_id, "--json"],
                          capture_output=True, text=True, check=True)
    mirror = json.loads(proc.stdout)["data"]["mirror"]
    assert mirror["mirrored"] == len(done) and mirror["last_step"] == 10
    assert mirror["bytes"] == sum(e["bytes"] for e in done) and mirror["failed"] == 0
    assert mirror["last_lag_s"] == done[-1]["lag_s"]


def test_a_bucket_that_refuses_writes_leaves_training_alone(submit_job, moto_url, monkeypatch):
    for name, value in {"AWS_ENDPOINT_URL_S3": moto_url, "AWS_ACCESS_KEY_ID": "testing",
                        "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    client = store.make_client()
    client.create_bucket(Bucket="mirror-refuses")
    client.put_bucket_policy(Bucket="mirror-refuses", Policy=json.dumps({
        "Version": "2012-10-17", "Statement": [{
            "Effect": "Deny", "Principal": "*", "Action": "s3:PutObject",
            "Resource": "arn:aws:s3:::mirror-refuses/*"}]}))
    job = submit_job(spec(10, "s3://mirror-refuses/runs/tiny"))
    end = job.wait_finished(300)
    log = job.log()
    assert end.state == "COMPLETED" and end.exit_code == 0, log
    assert tagged(log, "hpcflow-done")[-1]["step"] == 10
    assert "WARNING: mirroring step_" in log and "training goes on" in log
    assert "testing" not in log  # no credential in the job log
    failed = [e for e in job.events() if e["event"] == "mirror_failed"]
    assert failed and all(e["error"].startswith("403") for e in failed)
    assert not [e for e in job.events() if e["event"] == "mirror_done"]
    assert ckpt_dirs.scan(job.run_dir / "checkpoints").committed[-1] == 10
    proc = subprocess.run([PY, "-m", "hpcflow", "report", job.job_id],
                          capture_output=True, text=True, check=True)
    assert f"S3 mirror: 0 checkpoint(s), 0.0 MiB; {len(failed)} failed" in proc.stdout


def test_the_preemption_checkpoint_is_on_s3_before_the_requeue(submit_job, moto_url, monkeypatch):
    for name, value in {"AWS_ENDPOINT_URL_S3": moto_url, "AWS_ACCESS_KEY_ID": "testing",
                        "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    client = store.make_client()
    client.create_bucket(Bucket="mirror-preempt")
    uri = parse_s3_uri("s3://mirror-preempt/runs/tiny")
    job_spec = spec(400, str(uri))
    job_spec["checkpoint"]["interval_steps"] = 0  # only the preemption checkpoint
    job_spec["preemption"] = {"signal_lead_s": 120, "max_requeues": 1}
    job = submit_job(job_spec)
    wait_for(lambda: len(tagged(job.log(), "hpcflow-step")) >= 3, 300, "training steps")
    job.signal_batch("USR1")
    requeue = wait_for(lambda: job.event("requeue", restart=0), 120, "the requeue event")
    events = [e for e in job.events() if e.get("restart") == 0]
    names = [e["event"] for e in events]
    done = [e for e in events if e["event"] == "mirror_done"]
    assert [e["step"] for e in done] == [requeue["step"]]
    assert names.index("mirror_done") < names.index("requeue")
    [complete] = store.list_mirrors(client, uri)[0]
    assert complete.step == requeue["step"]
    subprocess.run(["scancel", job.job_id], check=False)
