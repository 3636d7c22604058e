"""The checkpoint mirror against a moto S3 server on loopback: complete only after every object
is confirmed, never complete when killed half-way, bit-exact pull into an empty folder,
keep-last-k, and a bucket that refuses writes."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from mirror_helpers import PY, child_env, commit_fake, read_events, s3_env, tree_bytes

from hpcflow.mirror import local, store, watch
from hpcflow.runtime import commit as ckpt_dirs
from hpcflow.spec.s3uri import parse_s3_uri

pytestmark = [pytest.mark.moto]

SMALL = store.TransferSettings(threshold_bytes=5 * store.MiB, part_bytes=5 * store.MiB)


@pytest.fixture
def s3(moto_url, monkeypatch):  # noqa: ANN001, ANN201
    for name, value in s3_env(moto_url).items():
        monkeypatch.setenv(name, value)
    client = store.make_client()
    bucket = f"ckpt-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=bucket)
    return client, parse_s3_uri(f"s3://{bucket}/runs/llm")


def mirror_of(root: Path, s3, ledger: Path, keep: int = 3) -> watch.Mirror:  # noqa: ANN001
    client, uri = s3
    return watch.Mirror(root, uri, keep, client, watch.Ledger(ledger, "77", 0), SMALL)


def test_mirror_confirms_every_object_then_writes_the_record(tmp_path, s3):
    client, uri = s3
    root = tmp_path / "ckpt"
    commit_fake(root, 2, {"__0_0.distcp": 12 * store.MiB + 5, "__1_0.distcp": 3000,
                          "extra/rng.pt": 10})
    ledger = tmp_path / "events.jsonl"
    m = mirror_of(root, s3, ledger)
    unit = m.pending()
    assert unit is not None and unit.name == "step_2"
    assert m.mirror(unit) is True
    assert m.pending() is None  # known complete: not uploaded again
    [done], incomplete = store.list_mirrors(client, uri)
    assert incomplete == [] and (done.name, done.step, done.layout) == ("step_2", 2, "hpcflow")
    files = {f["path"]: f for f in done.record["files"]}
    disk = tree_bytes(root / "step_2")
    assert set(files) == set(disk)  # the local commit record travels too
    assert done.total_bytes == sum(len(b) for b in disk.values())
    assert files["__0_0.distcp"]["s3_checksum_sha256"].endswith("-3")  # 3 parts of 5 MiB
    for rel, content in disk.items():
        head = client.head_object(Bucket=uri.bucket, Key=uri.key("step_2", rel),
                                  ChecksumMode="ENABLED")
        assert head["ContentLength"] == len(content)
        assert head["ChecksumSHA256"].split("-")[0] == files[rel]["s3_checksum_sha256"].split("-")[0]
    kinds = [(e["event"], e.get("bytes")) for e in read_events(ledger)]
    assert kinds == [("mirror_start", done.total_bytes), ("mirror_done", done.total_bytes)]
    finished = read_events(ledger)[1]
    assert finished["lag_s"] >= 0
    # the first byte went out after the first file was hashed, before the upload ended
    assert 0 < finished["first_byte_s"] <= finished["upload_s"]


def test_a_changed_object_is_never_confirmed(tmp_path, s3, monkeypatch):
    """The confirmation really compares: an object replaced on S3 after its upload fails it."""
    client, uri = s3
    root = tmp_path / "ckpt"
    commit_fake(root, 1, {"a.distcp": 1000})
    real_upload = store._confirm

    def tamper_then_confirm(client_, uri_, unit, f, checksum):  # noqa: ANN001, ANN202
        if f.path == "a.distcp":
            client.put_object(Bucket=uri.bucket, Key=uri.key(unit, f.path), Body=b"x" * 1000,
                              ChecksumAlgorithm="SHA256")
        return real_upload(client_, uri_, unit, f, checksum)

    monkeypatch.setattr(store, "_confirm", tamper_then_confirm)
    ledger = tmp_path / "events.jsonl"
    m = mirror_of(root, s3, ledger)
    assert m.mirror(m.pending()) is False
    assert store.list_mirrors(client, uri)[0] == []
    [failed] = [e for e in read_events(ledger) if e["event"] == "mirror_failed"]
    assert "SHA-256 checksum on S3" in failed["error"]


def _watch(root: Path, uri: str, ledger: Path, moto_url: str, *extra: str) -> subprocess.Popen:
    cmd = [PY, "-m", "hpcflow.mirror", "watch", "--checkpoint-dir", str(root), "--s3-uri", uri,
           "--keep", "2", "--ledger", str(ledger), "--job-id", "77", "--poll-s", "0.2",
           "--part-mib", "5", *extra]
    print("+", " ".join(cmd))
    return subprocess.Popen(cmd, env=child_env(moto_url), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait(pred, timeout_s: float, what: str):  # noqa: ANN001, ANN202
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := pred():
            return value
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


def test_killed_half_way_the_mirror_is_never_complete(tmp_path, s3, moto_url):
    client, uri = s3
    root = tmp_path / "ckpt"
    commit_fake(root, 5, {f"__{i}_0.distcp": 1 * store.MiB for i in range(12)})
    ledger = tmp_path / "events.jsonl"
    proc = _watch(root, str(uri), ledger, moto_url, "--concurrency", "1", "--max-mib-s", "2")
    _wait(lambda: store.list_mirrors(client, uri)[1] == ["step_5"], 30, "a first object")
    proc.kill()  # SIGKILL: no drain, no cleanup
    proc.wait(10)
    complete, incomplete = store.list_mirrors(client, uri)
    assert complete == [] and incomplete == ["step_5"]
    # A reader (the pull before a program starts) never takes it: the empty folder stays empty.
    empty = tmp_path / "fresh"
    pull = subprocess.run([PY, "-m", "hpcflow.mirror", "pull", "--checkpoint-dir", str(empty),
                           "--s3-uri", str(uri)], env=child_env(moto_url), capture_output=True,
                          text=True, timeout=60)
    assert pull.returncode == 0 and "no complete checkpoint under" in pull.stderr
    assert local.scan_units(empty) == []
    # The next mirror finishes the job; its record comes only after every object.
    proc = _watch(root, str(uri), ledger, moto_url)
    _wait(lambda: store.list_mirrors(client, uri)[0], 60, "the complete mirror")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0


def test_drain_deadline_abandons_an_upload_without_a_record(tmp_path, s3, moto_url):
    client, uri = s3
    root = tmp_path / "ckpt"
    commit_fake(root, 7, {f"__{i}_0.distcp": 1 * store.MiB for i in range(12)})
    ledger = tmp_path / "events.jsonl"
    proc = _watch(root, str(uri), ledger, moto_url, "--concurrency", "1", "--max-mib-s", "2",
                  "--drain-s", "1")
    _wait(lambda: store.list_mirrors(client, uri)[1] == ["step_7"], 30, "a first object")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 3
    assert "not mirrored before the job ends" in proc.stderr.read()
    assert store.list_mirrors(client, uri)[0] == []
    assert [e["event"] for e in read_events(ledger)] == ["mirror_start", "mirror_abandoned"]


@pytest.mark.parametrize("kind", ["hpcflow", "hf", "lightning"])
def test_pull_into_an_empty_folder_is_bit_exact(tmp_path, s3, moto_url, kind):
    client, uri = s3
    root = tmp_path / "ckpt"
    if kind == "hpcflow":
        commit_fake(root, 3, {"__0_0.distcp": 11 * store.MiB + 7, "sub/b.bin": 333})
        commit_fake(root, 4, {"__0_0.distcp": 6 * store.MiB, "sub/b.bin": 99}, seed=1)
    elif kind == "hf":
        for step in (3, 4):
            folder = root / f"checkpoint-{step}"
            (folder / "model").mkdir(parents=True)
            (folder / "model" / "weights.safetensors").write_bytes(bytes(range(256)) * 4099)
            (folder / "hpcflow-commit.json").write_text(json.dumps({"step": step}))
    else:
        root.mkdir()
        for step in (3, 4):
            (root / f"step_{step}.ckpt").write_bytes(bytes([step]) * (6 * store.MiB + 1))
        (root / "step_5.ckpt.tmp").write_bytes(b"partial")  # never mirrored
    m = mirror_of(root, s3, tmp_path / "events.jsonl")
    for unit in local.scan_units(root):
        assert m.mirror(unit)
    newest = local.scan_units(root)[-1]
    assert newest.step == 4
    fresh = tmp_path / "fresh" / "ckpt"
    if kind == "hpcflow":  # a partial folder of the same name (no record) is replaced
        (fresh / "step_4").mkdir(parents=True)
        (fresh / "step_4" / "junk").write_bytes(b"half a write")
    ledger = tmp_path / "pull.jsonl"
    proc = subprocess.run([PY, "-m", "hpcflow.mirror", "pull", "--checkpoint-dir", str(fresh),
                           "--s3-uri", str(uri), "--ledger", str(ledger), "--job-id", "88"],
                          env=child_env(moto_url), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    [unit] = local.scan_units(fresh)
    assert (unit.name, unit.layout) == (newest.name, kind)
    if kind == "lightning":
        assert unit.path.read_bytes() == newest.path.read_bytes()
    else:
        assert tree_bytes(unit.path) == tree_bytes(newest.path)
    if kind == "hpcflow":
        assert ckpt_dirs.scan(fresh).committed == [4]  # the runtime resumes from it
    assert sorted(p.name for p in fresh.iterdir()) == [newest.name]  # no temp folder left
    [event] = read_events(ledger)
    assert event["event"] == "mirror_pull" and event["step"] == 4 and event["job_id"] == "88"
    # A folder that has a committed checkpoint is left alone.
    again = subprocess.run([PY, "-m", "hpcflow.mirror", "pull", "--checkpoint-dir", str(fresh),
                            "--s3-uri", str(uri)], env=child_env(moto_url), capture_output=True,
                           text=True, timeout=60)
    assert again.returncode == 0 and "nothing pulled" in again.stderr


def test_keep_last_k_on_s3(tmp_path, s3):
    client, uri = s3
    root = tmp_path / "ckpt"
    m = mirror_of(root, s3, tmp_path / "events.jsonl", keep=2)
    for step in (1, 2, 3, 4):
        commit_fake(root, step, {"a.distcp": 2000})
        assert m.mirror(m.pending())
    complete, incomplete = store.list_mirrors(client, uri)
    assert [c.name for c in complete] == ["step_3", "step_4"] and incomplete == []
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=uri.bucket).get("Contents", [])]
    assert not [k for k in keys if "/step_1/" in k or "/step_2/" in k]


def test_a_bucket_that_refuses_writes_warns_and_the_mirror_goes_on(tmp_path, s3, moto_url):
    client, uri = s3
    client.put_bucket_policy(Bucket=uri.bucket, Policy=json.dumps({
        "Version": "2012-10-17", "Statement": [{
            "Effect": "Deny", "Principal": "*", "Action": "s3:PutObject",
            "Resource": f"arn:aws:s3:::{uri.bucket}/*"}]}))
    root = tmp_path / "ckpt"
    commit_fake(root, 1, {"a.distcp": 2000})
    ledger = tmp_path / "events.jsonl"
    proc = _watch(root, str(uri), ledger, moto_url)
    failed = _wait(lambda: [e for e in read_events(ledger) if e["event"] == "mirror_failed"], 30,
                   "a mirror_failed event")
    assert failed[0]["step"] == 1 and failed[0]["error"].startswith("403: Forbidden")
    time.sleep(0.5)
    assert proc.poll() is None  # still running: the job (and its training) are not touched
    commit_fake(root, 2, {"a.distcp": 2000})  # the program keeps committing on disk
    _wait(lambda: len([e for e in read_events(ledger) if e["event"] == "mirror_failed"]) >= 2, 30,
          "a second mirror_failed event")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    stderr = proc.stderr.read()
    assert f"WARNING: mirroring step_1 to {uri} failed" in stderr and "training goes on" in stderr
    assert "testing" not in stderr  # no key in the log
    assert store.list_mirrors(client, uri)[0] == []
    assert ckpt_dirs.scan(root).committed == [1, 2]


def test_a_record_larger_than_the_cap_is_not_read(tmp_path, s3, monkeypatch):
    """Whoever can write the prefix could plant a huge record object: it is read only up to the
    cap and then ignored, never loaded whole into memory."""
    client, uri = s3
    root = tmp_path / "ckpt"
    commit_fake(root, 2, {"__0_0.distcp": 100})
    m = mirror_of(root, s3, tmp_path / "events.jsonl")
    assert m.mirror(m.pending()) is True
    assert store.read_record(client, uri, "step_2") is not None
    key = uri.key("step_2", store.RECORD_NAME)
    body = client.get_object(Bucket=uri.bucket, Key=key)["Body"].read()
    monkeypatch.setattr(store, "RECORD_MAX_BYTES", len(body) - 1)
    assert store.read_record(client, uri, "step_2") is None
    monkeypatch.setattr(store, "RECORD_MAX_BYTES", len(body))
    assert store.read_record(client, uri, "step_2") is not None
