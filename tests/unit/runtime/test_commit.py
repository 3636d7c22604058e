"""Commit records and the checkpoint layout on a temporary directory (no torch)."""

from __future__ import annotations

import json
from pathlib import Path

import blake3
import crc32c
import pytest

from hpcflow.runtime import commit as ckpt_dirs


def fake_shards(directory: Path, files: dict[str, bytes] | None = None) -> Path:
    """A directory holding what a DCP save leaves: shard files and ``.metadata``."""
    directory.mkdir(parents=True)
    for name, data in (files or {"__0_0.distcp": b"shard0", "__1_0.distcp": b"shard-1",
                                 ".metadata": b"meta"}).items():
        (directory / name).write_bytes(data)
    return directory


def committed(root: Path, step: int) -> Path:
    fake_shards(ckpt_dirs.tmp_dir(root, step))
    return ckpt_dirs.commit(root, step, world_size=2)


def test_commit_renames_tmp_and_records_files_with_sizes(tmp_path):
    fake_shards(ckpt_dirs.tmp_dir(tmp_path, 5))
    final = ckpt_dirs.commit(tmp_path, 5, world_size=2, extra={"mesh": [1, 2, 1]})
    assert final == tmp_path / "step_5"
    assert not ckpt_dirs.tmp_dir(tmp_path, 5).exists()
    record = json.loads((final / ckpt_dirs.COMMIT_NAME).read_text())
    assert record["step"] == 5 and record["world_size"] == 2
    assert record["extra"] == {"mesh": [1, 2, 1]}
    crc = {name: f"{crc32c.crc32c(data):08x}"
           for name, data in {".metadata": b"meta", "__0_0.distcp": b"shard0",
                              "__1_0.distcp": b"shard-1"}.items()}
    assert record["version"] == 2  # CRC32C per file (and keyed BLAKE3 with a key)
    assert record["files"] == [
        {"path": ".metadata", "size_bytes": 4, "crc32c": crc[".metadata"]},
        {"path": "__0_0.distcp", "size_bytes": 6, "crc32c": crc["__0_0.distcp"]},
        {"path": "__1_0.distcp", "size_bytes": 7, "crc32c": crc["__1_0.distcp"]},
    ]
    assert "python" in record["versions"]
    assert ckpt_dirs.read_commit_record(final) == record


def test_commit_with_a_key_records_keyed_blake3_and_a_mac_over_the_record(tmp_path):
    key = bytes(range(32))
    fake_shards(ckpt_dirs.tmp_dir(tmp_path, 5))
    final = ckpt_dirs.commit(tmp_path, 5, world_size=2, key=key)
    record = json.loads((final / ckpt_dirs.COMMIT_NAME).read_text())
    shard = next(f for f in record["files"] if f["path"] == "__0_0.distcp")
    assert shard["blake3_keyed"] == blake3.blake3(b"shard0", key=key).hexdigest()
    assert shard["crc32c"] == f"{crc32c.crc32c(b'shard0'):08x}"
    body = {k: v for k, v in record.items() if k != "mac"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    assert record["mac"] == blake3.blake3(canonical, key=key).hexdigest()
    assert ckpt_dirs.record_problem(record, key) is None
    assert "another key" in ckpt_dirs.record_problem(record, bytes(32))


def test_commit_never_overwrites_a_committed_step(tmp_path):
    committed(tmp_path, 3)
    fake_shards(ckpt_dirs.tmp_dir(tmp_path, 3))
    with pytest.raises(FileExistsError, match="never overwritten"):
        ckpt_dirs.commit(tmp_path, 3, world_size=1)


def test_commit_without_tmp_dir_fails(tmp_path):
    with pytest.raises(FileNotFoundError, match="step_9.tmp"):
        ckpt_dirs.commit(tmp_path, 9, world_size=1)


def test_scan_ignores_tmp_and_recordless_dirs(tmp_path):
    committed(tmp_path, 2)
    committed(tmp_path, 10)
    fake_shards(tmp_path / "step_20.tmp")  # being written
    fake_shards(tmp_path / "step_30")  # renamed by someone else, no record
    (tmp_path / "notes.txt").write_text("left alone")
    (tmp_path / "step_x").mkdir()
    result = ckpt_dirs.scan(tmp_path)
    assert result.committed == [2, 10]
    assert result.partial == [tmp_path / "step_20.tmp", tmp_path / "step_30"]


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda d: (d / "__1_0.distcp").unlink(), id="shard-missing"),
        pytest.param(lambda d: (d / "__1_0.distcp").write_bytes(b"x"), id="shard-truncated"),
        pytest.param(lambda d: (d / ckpt_dirs.COMMIT_NAME).write_text("{not json"),
                     id="record-garbled"),
        pytest.param(
            lambda d: (d / ckpt_dirs.COMMIT_NAME).write_text(
                (d / ckpt_dirs.COMMIT_NAME).read_text().replace('"step": 4', '"step": 5')),
            id="record-names-another-step",
        ),
        pytest.param(
            lambda d: (d / ckpt_dirs.COMMIT_NAME).write_text(
                (d / ckpt_dirs.COMMIT_NAME).read_text().replace("hpcflow-checkpoint/1", "v0")),
            id="record-unknown-format",
        ),
    ],
)
def test_damaged_checkpoint_is_not_committed(tmp_path, damage):
    committed(tmp_path, 2)
    damage(committed(tmp_path, 4))
    assert ckpt_dirs.read_commit_record(tmp_path / "step_4") is None
    assert ckpt_dirs.scan(tmp_path).committed == [2]


def test_remove_partial_deletes_only_partial_dirs(tmp_path):
    committed(tmp_path, 1)
    fake_shards(tmp_path / "step_2.tmp")
    fake_shards(tmp_path / "step_3")
    (tmp_path / "step_4.tmp").write_text("a file, not a dir")
    removed = ckpt_dirs.remove_partial(tmp_path)
    assert sorted(p.name for p in removed) == ["step_2.tmp", "step_3", "step_4.tmp"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_1"]


@pytest.mark.parametrize("keep", [1, 2, 5])
def test_prune_keeps_the_newest_k(tmp_path, keep):
    for step in (3, 6, 9, 12):
        committed(tmp_path, step)
    fake_shards(tmp_path / "step_15.tmp")
    ckpt_dirs.prune(tmp_path, keep)
    assert ckpt_dirs.scan(tmp_path).committed == [3, 6, 9, 12][-keep:]
    assert (tmp_path / "step_15.tmp").exists(), "prune must not touch a save in progress"


def test_prune_refuses_keep_zero(tmp_path):
    with pytest.raises(ValueError, match="keep=0"):
        ckpt_dirs.prune(tmp_path, 0)


def test_scan_of_missing_root_is_empty(tmp_path):
    assert ckpt_dirs.scan(tmp_path / "nope") == ckpt_dirs.CheckpointScan([], [])
