"""Finding: a checkpoint's bytes are checked against the SHA-256 in its commit record before it
is loaded. A corrupted or replaced shard of the right size used to pass the size check (and then
fail at load, or run planted code); now that checkpoint is passed over for the previous one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcflow.runtime import commit as ckpt_dirs

KEY = bytes(range(32))


def committed(root: Path, step: int, key: bytes | None = KEY) -> Path:
    tmp = ckpt_dirs.fresh_tmp_dir(root, step)
    (tmp / "__0_0.distcp").write_bytes(b"shard-%d" % step)
    (tmp / ".metadata").write_bytes(b"meta-%d" % step)
    return ckpt_dirs.commit(root, step, world_size=1, key=key)


def committed_v1(root: Path, step: int) -> Path:
    """A checkpoint as the version before this one committed it: SHA-256 per file, no
    ``version`` member, no MAC."""
    tmp = ckpt_dirs.fresh_tmp_dir(root, step)
    (tmp / "__0_0.distcp").write_bytes(b"shard-%d" % step)
    (tmp / ".metadata").write_bytes(b"meta-%d" % step)
    record = {"format": ckpt_dirs.RECORD_FORMAT, "step": step, "time": 0.0, "world_size": 1,
              "versions": {}, "files": ckpt_dirs.list_files(tmp), "extra": {}}
    (tmp / ckpt_dirs.COMMIT_NAME).write_text(json.dumps(record))
    return ckpt_dirs.publish(root, step)


@pytest.mark.parametrize("name", ["__0_0.distcp", ".metadata"], ids=["shard", "metadata"])
def test_a_changed_file_of_the_same_size_makes_the_previous_checkpoint_the_one_loaded(
        tmp_path, name):
    committed(tmp_path, 2)
    newest = committed(tmp_path, 4)
    data = (newest / name).read_bytes()
    (newest / name).write_bytes(data[:-1] + b"X")  # same size: the old size check passed it
    assert ckpt_dirs.scan(tmp_path).committed == [2, 4]
    said: list[str] = []
    assert ckpt_dirs.latest_verified(tmp_path, said.append) == 2
    assert len(said) == 1 and str(newest) in said[0] and name in said[0]
    assert "previous committed checkpoint" in said[0]


def test_an_unchanged_checkpoint_is_the_latest(tmp_path):
    committed(tmp_path, 2)
    committed(tmp_path, 4)
    said: list[str] = []
    assert ckpt_dirs.latest_verified(tmp_path, said.append) == 4
    assert said == []


def test_every_checkpoint_changed_gives_none(tmp_path):
    only = committed(tmp_path, 3)
    (only / ".metadata").write_bytes(b"meta-9")
    assert ckpt_dirs.latest_verified(tmp_path) is None


def test_a_record_written_before_digests_is_still_loaded(tmp_path):
    directory = committed_v1(tmp_path, 5)
    path = directory / ckpt_dirs.COMMIT_NAME
    record = json.loads(path.read_text())
    for entry in record["files"]:
        del entry["sha256"]
    path.write_text(json.dumps(record))
    assert ckpt_dirs.read_commit_record(directory) == record
    assert ckpt_dirs.latest_verified(tmp_path) == 5


def test_a_file_that_cannot_be_read_is_a_problem_not_a_crash(tmp_path):
    directory = committed(tmp_path, 1)
    record = ckpt_dirs.read_commit_record(directory)
    (directory / "__0_0.distcp").unlink()
    assert "cannot be read" in ckpt_dirs.digest_problem(directory, record)
