"""Checkpoint checksums computed while DCP writes and checked while a restore reads.

A damaged newest checkpoint (a flipped byte, a truncated file, a same-size replacement, a
missing file, a swap by someone without the run's key) is passed over for the previous committed
one, which is then loaded whole; a checkpoint whose record was written before this format
(SHA-256, no version) still loads and is still checked.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import threading
from pathlib import Path

import blake3
import crc32c
import pytest
import torch

from hpcflow.errors import CheckpointError
from hpcflow.runtime import Run, checksum
from hpcflow.runtime import commit as ckpt_dirs
from hpcflow.runtime.checkpoint import CheckpointManager
from hpcflow.runtime.dcp_io import ChecksumMismatch

pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled:UserWarning")

SHARD = "__0_0.distcp"


def environ(tmp_path: Path) -> dict[str, str]:
    state = tmp_path / "run" / ".hpcflow"
    return {
        "HPCFLOW_RUN_DIR": str(tmp_path / "run"),
        "HPCFLOW_CHECKPOINT_DIR": str(tmp_path / "ckpt"),
        "HPCFLOW_CHECKPOINT_INTERVAL": "2",
        "HPCFLOW_PREEMPT_FLAG": str(state / "preempt.flag"),
        "HPCFLOW_PREEMPT_COMMITTED": str(state / "committed.json"),
        "HPCFLOW_JOINED_DIR": str(state / "joined"),
    }


def make_state(seed: int) -> dict:
    """A model whose weight (2 MiB) is read straight into the state, a small one read through
    ``torch.load``, and an optimizer (pickled step counts and settings)."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.Linear(1024, 2))
    return {"model": model, "optim": torch.optim.SGD(model.parameters(), lr=0.1)}


def weights(state: dict) -> list[torch.Tensor]:
    return [p.detach().clone() for p in state["model"].parameters()]


def two_checkpoints(tmp_path: Path, seed: int = 0) -> dict[int, list[torch.Tensor]]:
    """Steps 2 and 4 committed through Run; the weights each holds."""
    saved = {}
    with Run.from_env(environ(tmp_path)) as run:
        state = make_state(seed)
        assert run.restore(state) == 0
        for step in range(1, 5):
            for p in state["model"].parameters():
                p.data.add_(float(step))
            run.step_done(step, state)
            saved[step] = weights(state)
    return saved


def flip_byte(path: Path, at: float = 0.5) -> None:
    data = bytearray(path.read_bytes())
    data[int(len(data) * at)] ^= 0x01
    path.write_bytes(bytes(data))


def same_size_replacement(path: Path) -> None:
    path.write_bytes(os.urandom(path.stat().st_size))


DAMAGE = [
    pytest.param(lambda d: flip_byte(d / SHARD), SHARD, id="flipped-byte-in-tensor-data"),
    pytest.param(lambda d: flip_byte(d / SHARD, 0.0005), SHARD, id="flipped-byte-in-zip-header"),
    pytest.param(lambda d: flip_byte(d / ".metadata"), ".metadata", id="flipped-byte-metadata"),
    pytest.param(lambda d: same_size_replacement(d / SHARD), SHARD, id="same-size-replacement"),
    pytest.param(lambda d: os.truncate(d / SHARD, (d / SHARD).stat().st_size // 2), None,
                 id="truncated"),
    pytest.param(lambda d: (d / SHARD).unlink(), None, id="missing"),
]


@pytest.mark.parametrize(("damage", "named"), DAMAGE)
def test_damaged_newest_checkpoint_falls_back_to_the_previous_one_loaded_whole(
        tmp_path, capsys, damage, named):
    saved = two_checkpoints(tmp_path)
    damage(tmp_path / "ckpt" / "step_4")
    capsys.readouterr()
    fresh = make_state(seed=1)
    with Run.from_env(environ(tmp_path)) as run:
        assert run.restore(fresh) == 2
    for got, want in zip(weights(fresh), saved[2], strict=True):
        assert torch.equal(got, want)  # nothing of step 4 is left over from its partial load
    assert fresh["optim"].state_dict()["param_groups"][0]["lr"] == 0.1
    err = capsys.readouterr().err
    if named is None:  # a file missing or of another size: its record no longer holds (stat)
        assert f"removed partial checkpoint {tmp_path / 'ckpt' / 'step_4'}" in err, err
    else:  # found while reading
        assert "step_4 is ignored" in err and named in err, err
        assert "previous committed checkpoint is used instead" in err
        assert f"moved to {tmp_path / 'ckpt' / 'step_4.damaged'}" in err
        assert (tmp_path / "ckpt" / "step_4.damaged" / SHARD).is_file()


def test_the_step_of_a_damaged_checkpoint_is_saved_again_after_the_fallback(tmp_path):
    saved = two_checkpoints(tmp_path)
    flip_byte(tmp_path / "ckpt" / "step_4" / SHARD)
    with Run.from_env(environ(tmp_path)) as run:
        state = make_state(seed=1)
        assert run.restore(state) == 2
        for step in (3, 4):
            for p in state["model"].parameters():
                p.data.add_(float(step))
            run.step_done(step, state)
    assert ckpt_dirs.scan(tmp_path / "ckpt").committed == [2, 4]
    fresh = make_state(seed=2)
    with Run.from_env(environ(tmp_path)) as run:
        assert run.restore(fresh) == 4
    for got, want in zip(weights(fresh), saved[4], strict=True):
        assert torch.equal(got, want)


def test_a_save_reads_nothing_back_and_records_what_was_written(tmp_path, monkeypatch):
    def no_read_back(*args, **kwargs):
        raise AssertionError("a file was read back to hash it")

    monkeypatch.setattr(checksum, "digest_file", no_read_back)
    manager = CheckpointManager(tmp_path / "ckpt", key_file=tmp_path / "key")
    state = make_state(0)
    manager.save(3, {"app": state["model"].state_dict()})
    assert torch.serialization.get_crc32_options() is True  # off only while DCP wrote
    key = (tmp_path / "key").read_bytes()
    assert stat.S_IMODE((tmp_path / "key").stat().st_mode) == 0o600 and len(key) == 32
    directory = tmp_path / "ckpt" / "step_3"
    record = json.loads((directory / ckpt_dirs.COMMIT_NAME).read_text())
    assert record["version"] == 2 and record["key_id"] == checksum.key_id(key)
    assert {f["path"] for f in record["files"]} == {".metadata", SHARD}
    for entry in record["files"]:
        data = (directory / entry["path"]).read_bytes()
        assert entry["size_bytes"] == len(data)
        assert entry["crc32c"] == f"{crc32c.crc32c(data):08x}"
        assert entry["blake3_keyed"] == blake3.blake3(data, key=key).hexdigest()


def test_an_async_save_hashes_on_the_writer_thread_only(tmp_path, monkeypatch):
    threads: set[str] = set()
    update = checksum.StreamDigest.update

    def spy(self, data):
        threads.add(threading.current_thread().name)
        return update(self, data)

    monkeypatch.setattr(checksum.StreamDigest, "update", spy)
    manager = CheckpointManager(tmp_path / "ckpt", key_file=tmp_path / "key")
    manager.save(1, {"app": make_state(0)["model"].state_dict()}, blocking=False)
    assert manager.wait() is not None
    manager.close()
    assert threads and threading.main_thread().name not in threads


def test_a_swap_without_the_key_is_caught_and_one_with_it_is_not(tmp_path, capsys):
    """Someone who can write the checkpoint folder puts in a complete checkpoint of their own
    (its own valid record, its own key): passed over. With the run's key they could forge one:
    the key is what must stay private."""
    two_checkpoints(tmp_path)
    planted = two_checkpoints(tmp_path / "other", seed=7)[4]  # another run, another key
    shutil.rmtree(tmp_path / "ckpt" / "step_4")
    shutil.copytree(tmp_path / "other" / "ckpt" / "step_4", tmp_path / "ckpt" / "step_4")
    capsys.readouterr()
    with Run.from_env(environ(tmp_path)) as run:
        assert run.restore(make_state(1)) == 2
    assert "another key" in capsys.readouterr().err

    # The same planted checkpoint, its record re-signed with the run's own key: it loads.
    (tmp_path / "ckpt" / "step_4.damaged").rename(tmp_path / "ckpt" / "step_4")
    record_path = tmp_path / "ckpt" / "step_4" / ckpt_dirs.COMMIT_NAME
    key = (tmp_path / "run" / ".hpcflow" / "checkpoint.key").read_bytes()
    record = json.loads(record_path.read_text())
    for entry in record["files"]:
        entry["blake3_keyed"] = checksum.digest_file(
            tmp_path / "ckpt" / "step_4" / entry["path"], key)["blake3_keyed"]
    record["mac"] = checksum.record_mac(record, key)
    record_path.write_text(json.dumps(record))
    fresh = make_state(1)
    with Run.from_env(environ(tmp_path)) as run:
        assert run.restore(fresh) == 4
    for got, want in zip(weights(fresh), planted, strict=True):
        assert torch.equal(got, want)


def test_a_record_without_its_mac_is_refused_when_the_run_has_a_key(tmp_path, capsys):
    two_checkpoints(tmp_path)
    record_path = tmp_path / "ckpt" / "step_4" / ckpt_dirs.COMMIT_NAME
    record = json.loads(record_path.read_text())
    del record["mac"]
    record_path.write_text(json.dumps(record))
    capsys.readouterr()
    with Run.from_env(environ(tmp_path)) as run:
        assert run.restore(make_state(1)) == 2
    assert "carries no MAC" in capsys.readouterr().err


def rewrite_as_version_1(directory: Path) -> None:
    """The record the version before this one wrote: SHA-256 per file, no version, no MAC."""
    record_path = directory / ckpt_dirs.COMMIT_NAME
    record = json.loads(record_path.read_text())
    for name in ("version", "mac", "key_id"):
        del record[name]
    record["files"] = ckpt_dirs.list_files(directory)
    assert all("sha256" in f and "crc32c" not in f for f in record["files"])
    record_path.write_text(json.dumps(record, sort_keys=True))


def test_a_checkpoint_of_the_previous_format_still_loads_and_is_checked(tmp_path, capsys):
    saved = two_checkpoints(tmp_path)
    for step in (2, 4):
        rewrite_as_version_1(tmp_path / "ckpt" / f"step_{step}")
    (tmp_path / "run" / ".hpcflow" / "checkpoint.key").unlink()  # written before keys existed
    fresh = make_state(1)
    with Run.from_env(environ(tmp_path)) as run:
        assert run.restore(fresh) == 4
    for got, want in zip(weights(fresh), saved[4], strict=True):
        assert torch.equal(got, want)

    flip_byte(tmp_path / "ckpt" / "step_4" / SHARD)  # its SHA-256 is checked while read
    capsys.readouterr()
    fresh = make_state(1)
    with Run.from_env(environ(tmp_path)) as run:
        assert run.restore(fresh) == 2
    err = capsys.readouterr().err
    assert "step_4 is ignored" in err and "sha256" in err
    for got, want in zip(weights(fresh), saved[2], strict=True):
        assert torch.equal(got, want)


def test_every_checkpoint_damaged_after_a_partial_load_stops_the_restore(tmp_path):
    two_checkpoints(tmp_path)
    for step in (2, 4):
        flip_byte(tmp_path / "ckpt" / f"step_{step}" / SHARD)
    with Run.from_env(environ(tmp_path)) as run, \
            pytest.raises(CheckpointError, match="does not start from scratch"):
        run.restore(make_state(1))


def test_a_load_of_a_damaged_checkpoint_raises_checksum_mismatch(tmp_path):
    manager = CheckpointManager(tmp_path / "ckpt", key_file=tmp_path / "key")
    state = {"w": torch.arange(1 << 19, dtype=torch.float32)}
    manager.save(1, state)
    flip_byte(tmp_path / "ckpt" / "step_1" / SHARD, 0.9)
    with pytest.raises(ChecksumMismatch, match=f"{SHARD} differs from its commit record"):
        manager.load(1, {"w": torch.zeros(1 << 19)})


def test_a_key_others_can_read_is_refused_with_its_path_and_mode(tmp_path):
    manager = CheckpointManager(tmp_path / "ckpt", key_file=tmp_path / "key")
    manager.save(1, {"w": torch.zeros(4)})
    os.chmod(tmp_path / "key", 0o644)
    with pytest.raises(CheckpointError, match=r"key .* mode 0644; only 0600"):
        manager.load(1, {"w": torch.zeros(4)})


@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_large_tensors_load_exactly_into_their_targets(tmp_path, layout):
    """A tensor of 1 MiB or more is read straight into a contiguous CPU target, or through the
    reused buffer into any other (a GPU tensor, a strided view), its checksum checked."""
    manager = CheckpointManager(tmp_path / "ckpt", key_file=tmp_path / "key")
    saved = {"w": torch.rand(512, 1024), "b": torch.rand(3), "n": 7}
    manager.save(1, saved)
    target = {"w": torch.zeros(512, 1024) if layout == "contiguous"
              else torch.zeros(1024, 512).t(), "b": torch.zeros(3), "n": 0}
    assert target["w"].is_contiguous() == (layout == "contiguous")
    manager.load(1, target)
    assert torch.equal(target["w"], saved["w"]) and torch.equal(target["b"], saved["b"])
    assert target["n"] == 7
