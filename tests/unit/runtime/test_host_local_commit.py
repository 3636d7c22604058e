"""The commit of checkpoints whose hosts each have their own folder (hpcflow.runtime.host_local),
on folders laid out as DCP leaves them: the other host publishes a record-less folder, rank 0's
record lists every host's files, and a restart with S3's union of both folders finds it
committed; pruning removes the same steps on every host."""

from __future__ import annotations

import json
import shutil

from hpcflow.runtime import commit as ckpt_dirs
from hpcflow.runtime.host_local import (
    commit_union,
    prune_before,
    publish_host_files,
    recorded_steps,
)


def write_tmp(root, step, files):  # noqa: ANN001, ANN201
    tmp = ckpt_dirs.tmp_dir(root, step)
    tmp.mkdir(parents=True)
    for name, data in files.items():
        (tmp / name).write_bytes(data)
    return tmp


def test_record_lists_every_host_and_the_union_is_committed(tmp_path):
    host0, host1 = tmp_path / "algo-1", tmp_path / "algo-2"
    write_tmp(host0, 4, {".metadata": b"m", "__0_0.distcp": b"a" * 10, "__1_0.distcp": b"b"})
    write_tmp(host1, 4, {"__2_0.distcp": b"c" * 7, "__3_0.distcp": b"d"})
    others = publish_host_files(host1, 4)
    assert ckpt_dirs.step_dir(host1, 4).is_dir() and not ckpt_dirs.tmp_dir(host1, 4).exists()
    assert ckpt_dirs.scan(host1).committed == []  # no record there: never loaded from it alone
    commit_union(host0, 4, 4, {"job_id": None}, others)
    record = json.loads((ckpt_dirs.step_dir(host0, 4) / ckpt_dirs.COMMIT_NAME).read_text())
    assert [f["path"] for f in record["files"]] == [".metadata", "__0_0.distcp", "__1_0.distcp",
                                                    "__2_0.distcp", "__3_0.distcp"]
    assert ckpt_dirs.read_commit_record(ckpt_dirs.step_dir(host0, 4)) is None  # lacks host 1's
    assert ckpt_dirs.scan(host0).committed == []
    union = tmp_path / "restart"  # what SageMaker copies into every container after a restart
    shutil.copytree(host0, union)
    shutil.copytree(host1, union, dirs_exist_ok=True)
    assert ckpt_dirs.scan(union).committed == [4]
    assert ckpt_dirs.latest_verified(union) == 4


def test_a_changed_shard_from_the_other_host_is_caught(tmp_path):
    host0, host1 = tmp_path / "algo-1", tmp_path / "algo-2"
    write_tmp(host0, 2, {".metadata": b"m", "__0_0.distcp": b"a"})
    write_tmp(host1, 2, {"__1_0.distcp": b"b"})
    commit_union(host0, 2, 2, {}, publish_host_files(host1, 2))
    union = tmp_path / "restart"
    shutil.copytree(host0, union)
    shutil.copytree(host1, union, dirs_exist_ok=True)
    (union / "step_2" / "__1_0.distcp").write_bytes(b"x")
    assert ckpt_dirs.latest_verified(union) is None


def test_publish_replaces_a_record_less_folder_of_an_earlier_try(tmp_path):
    host1 = tmp_path / "algo-2"
    write_tmp(host1, 6, {"__2_0.distcp": b"old"})
    publish_host_files(host1, 6)  # an attempt whose commit never came
    write_tmp(host1, 6, {"__2_0.distcp": b"new"})
    [entry] = publish_host_files(host1, 6)
    assert entry["size_bytes"] == 3 and (ckpt_dirs.step_dir(host1, 6) / "__2_0.distcp").read_bytes() == b"new"
    assert publish_host_files(host1, 7) == []  # this host wrote nothing for step 7


def test_every_host_prunes_the_same_steps(tmp_path):
    host0, host1 = tmp_path / "algo-1", tmp_path / "algo-2"
    for step in (3, 6, 9):
        write_tmp(host0, step, {".metadata": b"m", "__0_0.distcp": b"a"})
        write_tmp(host1, step, {"__1_0.distcp": b"b"})
        commit_union(host0, step, 2, {}, publish_host_files(host1, step))
    assert recorded_steps(host0) == [3, 6, 9] and recorded_steps(host1) == []
    oldest_kept = recorded_steps(host0)[-2:][0]
    prune_before(host0, oldest_kept)
    prune_before(host1, oldest_kept)
    assert sorted(p.name for p in host0.iterdir()) == ["step_6", "step_9"]
    assert sorted(p.name for p in host1.iterdir()) == ["step_6", "step_9"]
