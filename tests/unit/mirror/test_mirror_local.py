"""What the mirror takes for a committed checkpoint on disk, and the checksums it expects S3 to
report (pure file work, no S3)."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path

import pytest

from hpcflow.mirror import local
from hpcflow.runtime import commit as ckpt_dirs

REPO = Path(__file__).resolve().parents[3]


def _commit(root: Path, step: int) -> None:
    tmp = ckpt_dirs.fresh_tmp_dir(root, step)
    (tmp / ckpt_dirs.DCP_METADATA).write_bytes(b"m")
    (tmp / "__0_0.distcp").write_bytes(b"x" * 10)
    ckpt_dirs.commit(root, step, world_size=1)


def test_only_committed_units_of_the_three_layouts_count(tmp_path):
    _commit(tmp_path, 2)
    _commit(tmp_path, 10)
    (tmp_path / "step_11.tmp").mkdir()  # being written
    (tmp_path / "step_12").mkdir()  # no record: partial
    (tmp_path / "checkpoint-3").mkdir()
    (tmp_path / "checkpoint-3" / "hpcflow-commit.json").write_text(json.dumps({"step": 3}))
    (tmp_path / "checkpoint-4").mkdir()  # HF folder without the marker
    (tmp_path / "step_5.ckpt").write_bytes(b"lightning")
    (tmp_path / "step_6.ckpt.tmp").write_bytes(b"partial")
    (tmp_path / "notes.txt").write_text("x")
    units = local.scan_units(tmp_path)
    assert [(u.name, u.layout) for u in units] == [
        ("step_2", "hpcflow"), ("checkpoint-3", "hf"), ("step_5.ckpt", "lightning"),
        ("step_10", "hpcflow")]


def test_a_units_files_put_the_commit_record_last(tmp_path):
    _commit(tmp_path, 1)
    [unit] = local.scan_units(tmp_path)
    paths = [f.path for f in unit.files()]
    assert paths == [".metadata", "__0_0.distcp", "hpcflow-commit.json"]
    record = json.loads((tmp_path / "step_1" / "hpcflow-commit.json").read_text())
    assert unit.source_id == repr(record["time"]) and unit.commit_time == record["time"]


def test_the_hf_marker_is_the_adapters():
    source = (REPO / "hpcflow" / "runtime" / "hf.py").read_text()
    [marker] = re.findall(r'^COMMIT_MARKER = "([^"]+)"$', source, re.M)
    assert marker == local._HF_MARKER


@pytest.mark.parametrize(("size", "part", "multipart", "parts"), [
    pytest.param(0, 8, False, 1, id="empty-single"),
    pytest.param(100, 8, False, 1, id="single"),
    pytest.param(24, 8, True, 3, id="exact-parts"),
    pytest.param(25, 8, True, 4, id="short-last-part"),
    pytest.param(5, 8, True, 1, id="one-part-multipart"),
])
def test_hash_file_gives_sha256_and_the_s3_checksum(tmp_path, size, part, multipart, parts):
    data = bytes((i * 7) % 251 for i in range(size))
    path = tmp_path / "f"
    path.write_bytes(data)
    got = local.hash_file(path, part, multipart)
    assert got.sha256 == hashlib.sha256(data).hexdigest() == local.sha256_file(path)
    if not multipart:
        assert got.s3_checksum == base64.b64encode(hashlib.sha256(data).digest()).decode()
        return
    digests = b"".join(hashlib.sha256(data[i:i + part]).digest()
                       for i in range(0, max(size, 1), part))
    assert got.s3_checksum == f"{base64.b64encode(hashlib.sha256(digests).digest()).decode()}-{parts}"


def test_unit_names_parse():
    assert local.unit_name_step("step_12") == ("hpcflow", 12)
    assert local.unit_name_step("checkpoint-7") == ("hf", 7)
    assert local.unit_name_step("step_3.ckpt") == ("lightning", 3)
    assert local.unit_name_step("step_3.tmp") is None
    assert local.unit_name_step(".hpcflow-pull-step_3") is None


def test_partial_entries_are_told_apart_from_committed_ones(tmp_path):
    _commit(tmp_path, 1)
    (tmp_path / "step_2").mkdir()  # no record
    (tmp_path / "checkpoint-3").mkdir()  # no marker
    (tmp_path / "step_4.ckpt").write_bytes(b"x")  # a renamed Lightning file is complete
    assert not local.is_partial(tmp_path / "step_1")
    assert local.is_partial(tmp_path / "step_2") and local.is_partial(tmp_path / "checkpoint-3")
    assert not local.is_partial(tmp_path / "step_4.ckpt")
    assert not local.is_partial(tmp_path / "step_9")  # absent
    assert not local.is_partial(tmp_path / "notes")
