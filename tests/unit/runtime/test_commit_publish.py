"""The two commit steps (record, then rename) and what a crash between them leaves (no torch)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcflow.runtime import commit as ckpt_dirs


def written(root: Path, step: int, *, metadata: bool = True) -> Path:
    """``step_<step>.tmp/`` as DCP leaves it: shards, and ``.metadata`` once finished."""
    directory = ckpt_dirs.tmp_dir(root, step)
    directory.mkdir(parents=True)
    (directory / "__0_0.distcp").write_bytes(b"shard-0")
    (directory / "__1_0.distcp").write_bytes(b"shard-1")
    if metadata:
        (directory / ckpt_dirs.DCP_METADATA).write_bytes(b"meta")
    return directory


def test_commit_refuses_a_write_without_dcp_metadata(tmp_path):
    written(tmp_path, 4, metadata=False)
    with pytest.raises(FileNotFoundError, match="did not finish"):
        ckpt_dirs.commit(tmp_path, 4, world_size=2)
    assert not (ckpt_dirs.tmp_dir(tmp_path, 4) / ckpt_dirs.COMMIT_NAME).exists()
    assert ckpt_dirs.scan(tmp_path).committed == []


def test_record_without_rename_is_partial_and_removed(tmp_path):
    directory = written(tmp_path, 6)
    ckpt_dirs.write_commit_record(directory, 6, world_size=2)  # then the process dies
    result = ckpt_dirs.scan(tmp_path)
    assert result.committed == [] and result.partial == [directory]
    assert ckpt_dirs.remove_partial(tmp_path) == [directory]
    assert list(tmp_path.iterdir()) == []


def test_publish_is_the_commit_point(tmp_path):
    directory = written(tmp_path, 8)
    ckpt_dirs.write_commit_record(directory, 8, world_size=2)
    assert ckpt_dirs.publish(tmp_path, 8) == tmp_path / "step_8"
    assert ckpt_dirs.scan(tmp_path).committed == [8]
    assert not directory.exists()


def test_publish_refuses_a_directory_without_record(tmp_path):
    written(tmp_path, 2)
    with pytest.raises(FileNotFoundError, match="write the record first"):
        ckpt_dirs.publish(tmp_path, 2)
    assert ckpt_dirs.scan(tmp_path).committed == []


def test_publish_never_replaces_a_committed_step(tmp_path):
    written(tmp_path, 3)
    ckpt_dirs.commit(tmp_path, 3, world_size=2)
    second = written(tmp_path, 3)
    (second / "__0_0.distcp").write_bytes(b"newer shard")
    ckpt_dirs.write_commit_record(second, 3, world_size=2)
    with pytest.raises(FileExistsError, match="never overwritten"):
        ckpt_dirs.publish(tmp_path, 3)
    assert (tmp_path / "step_3" / "__0_0.distcp").read_bytes() == b"shard-0"
    assert second.is_dir(), "the refused directory stays a .tmp, removed on the next start"


def test_check_committable_names_each_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"step_1\.tmp does not exist"):
        ckpt_dirs.check_committable(tmp_path, 1)
    written(tmp_path, 1, metadata=False)
    with pytest.raises(FileNotFoundError, match=r"\.metadata is missing"):
        ckpt_dirs.check_committable(tmp_path, 1)
    (ckpt_dirs.tmp_dir(tmp_path, 1) / ckpt_dirs.DCP_METADATA).write_bytes(b"m")
    ckpt_dirs.check_committable(tmp_path, 1)


def test_record_that_omits_dcp_metadata_is_not_committed(tmp_path):
    written(tmp_path, 5)
    final = ckpt_dirs.commit(tmp_path, 5, world_size=2)
    record_path = final / ckpt_dirs.COMMIT_NAME
    record = json.loads(record_path.read_text())
    record["files"] = [f for f in record["files"] if f["path"] != ckpt_dirs.DCP_METADATA]
    record_path.write_text(json.dumps(record))
    assert ckpt_dirs.read_commit_record(final) is None
    assert ckpt_dirs.scan(tmp_path).partial == [final]


def test_prune_cut_short_after_the_record_leaves_a_partial_dir(tmp_path):
    for step in (1, 2):
        written(tmp_path, step)
        ckpt_dirs.commit(tmp_path, step, world_size=2)
    (tmp_path / "step_1" / ckpt_dirs.COMMIT_NAME).unlink()  # prune's first move, then a crash
    result = ckpt_dirs.scan(tmp_path)
    assert result.committed == [2] and result.partial == [tmp_path / "step_1"]


def test_fresh_tmp_dir_replaces_leftovers_of_the_same_step_only(tmp_path):
    stale = written(tmp_path, 9, metadata=False)
    other = written(tmp_path, 10, metadata=False)
    fresh = ckpt_dirs.fresh_tmp_dir(tmp_path, 9)
    assert fresh == stale and list(fresh.iterdir()) == []
    assert (other / "__0_0.distcp").exists(), "another step's directory is left alone"


def test_fresh_tmp_dir_replaces_a_file_and_refuses_a_committed_step(tmp_path):
    (tmp_path / "step_2.tmp").write_text("not a directory")
    assert ckpt_dirs.fresh_tmp_dir(tmp_path, 2).is_dir()
    written(tmp_path, 3)
    ckpt_dirs.commit(tmp_path, 3, world_size=2)
    with pytest.raises(FileExistsError, match="never overwritten"):
        ckpt_dirs.fresh_tmp_dir(tmp_path, 3)
