"""Sampler, RNG capture and the checkpoint manager in one process (world of 1, no process group)."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch

from hpcflow.errors import CheckpointError
from hpcflow.examples.trainstate import TrainState
from hpcflow.runtime.checkpoint import CheckpointManager
from hpcflow.runtime.rng import capture_rng_state, restore_rng_state, restore_rng_state_bytes
from hpcflow.runtime.sampler import ResumableSampler

pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled:UserWarning")


def draws() -> tuple:
    return (torch.rand(3).tolist(), random.random(), float(np.random.rand()))


def test_rng_restore_replays_every_stream():
    torch.manual_seed(1)
    random.seed(1)
    np.random.seed(1)
    state = capture_rng_state()
    first = draws()
    assert draws() != first
    restore_rng_state(state)
    assert draws() == first


def test_rng_restore_rejects_other_format():
    with pytest.raises(ValueError, match="format"):
        restore_rng_state({**capture_rng_state(), "format": 99})


def take(sampler: ResumableSampler, steps: int) -> list[list[int]]:
    return [sampler.next_indices().tolist() for _ in range(steps)]


def test_sampler_ranks_get_disjoint_slices_of_each_global_batch():
    ranks = [ResumableSampler(40, 3, r, 4, seed=5) for r in range(4)]
    for _ in range(3):  # 40 // 12 = 3 batches: one full epoch
        batch = [sampler.next_indices().tolist() for sampler in ranks]
        flat = [i for part in batch for i in part]
        assert len(set(flat)) == 12
    assert ranks[0].state_dict()["epoch"] == 1 and ranks[0].state_dict()["batch"] == 0


def test_sampler_resumed_from_state_continues_the_same_sequence():
    straight = ResumableSampler(50, 4, 1, 2, seed=9)
    expected = take(straight, 15)  # crosses epochs: 50 // 8 = 6 batches per epoch
    first = ResumableSampler(50, 4, 1, 2, seed=9)
    head = take(first, 7)
    resumed = ResumableSampler(50, 4, 1, 2, seed=9)
    resumed.load_state_dict(first.state_dict())
    assert head + take(resumed, 8) == expected
    assert expected[:6] != expected[6:12], "each epoch must be a new permutation"


def test_sampler_refuses_state_of_another_global_batch():
    saved = ResumableSampler(50, 4, 0, 2).state_dict()
    with pytest.raises(ValueError, match="global_batch=8, this run uses 12"):
        ResumableSampler(50, 4, 0, 3).load_state_dict(saved)


@pytest.mark.parametrize(("other", "message"), [
    pytest.param({"seed": 1}, "seed=0, this run uses 1", id="another-seed"),
    pytest.param({"num_samples": 60}, "num_samples=50, this run uses 60", id="another-data-size"),
])
def test_sampler_refuses_state_of_another_seed_or_data_size(other, message):
    saved = ResumableSampler(50, 4, 0, 2).state_dict()
    args = {"num_samples": 50, "seed": 0, **other}
    with pytest.raises(ValueError, match=message):
        ResumableSampler(args["num_samples"], 4, 0, 2, seed=args["seed"]).load_state_dict(saved)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param((10, 0, 0, 1), "all must be positive", id="zero-micro-batch"),
        pytest.param((10, 2, 2, 2), r"dp_rank=2 is not in \[0, 2\)", id="rank-out-of-range"),
        pytest.param((10, 4, 0, 3), "exceeds the data set", id="global-batch-too-big"),
    ],
)
def test_sampler_rejects_bad_sizes(args, message):
    with pytest.raises(ValueError, match=message):
        ResumableSampler(*args)


def make_state(seed: int) -> TrainState:
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 3))
    return TrainState(model, optimizer, scheduler, ResumableSampler(64, 4, 0, 1, seed=7), rank=0)


def train(state: TrainState, steps: int) -> list[float]:
    losses = []
    for _ in range(steps):
        idx = state.sampler.next_indices().float()
        x = torch.stack([idx, idx + 1, idx * 0.5, -idx], dim=1) / 64
        loss = state.model(x).pow(2).mean()
        loss.backward()
        state.optimizer.step()
        state.optimizer.zero_grad()
        state.lr_scheduler.step()
        state.step += 1
        losses.append(loss.item())
    return losses


def test_save_then_load_resumes_exactly(tmp_path):
    straight = make_state(0)
    expected = train(straight, 6)
    first = make_state(0)
    manager = CheckpointManager(tmp_path, keep=2, interval_steps=0)
    head = train(first, 3)
    manager.save(3, {"app": first})
    manager.wait()
    train(first, 2)  # diverge the live objects; the load must put everything back
    resumed = make_state(123)
    manager.load(manager.latest_committed(), {"app": resumed})
    assert resumed.step == 3
    assert head + train(resumed, 3) == expected
    for a, b in zip(resumed.model.parameters(), straight.model.parameters(), strict=True):
        assert torch.equal(a, b)


def test_save_commits_records_and_prunes(tmp_path):
    state = make_state(0)
    manager = CheckpointManager(tmp_path / "ckpt", keep=2, interval_steps=2)
    for step in (2, 4, 6):
        path = manager.save(step, {"app": state})
        assert path == tmp_path / "ckpt" / f"step_{step}"
    assert manager.committed_steps() == [4, 6]
    assert manager.latest_committed() == 6
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["step_4", "step_6"]
    record = json.loads((tmp_path / "ckpt" / "step_6" / "hpcflow-commit.json").read_text())
    assert record["world_size"] == 1 and "torch" in record["versions"]


def test_save_refuses_a_committed_step(tmp_path):
    manager = CheckpointManager(tmp_path, keep=3)
    manager.save(1, {"app": make_state(0)})
    with pytest.raises(CheckpointError, match="never overwritten"):
        manager.save(1, {"app": make_state(0)})


def test_save_replaces_a_stale_tmp_dir_of_the_same_step(tmp_path):
    (tmp_path / "step_2.tmp").mkdir()
    (tmp_path / "step_2.tmp" / "__0_0.distcp").write_bytes(b"stale")
    manager = CheckpointManager(tmp_path, keep=3)
    manager.save(2, {"app": make_state(0)})
    assert manager.committed_steps() == [2]
    assert not (tmp_path / "step_2.tmp").exists()


def test_failed_write_leaves_nothing_committed(tmp_path):
    manager = CheckpointManager(tmp_path, keep=3)

    class Broken:
        def state_dict(self):
            raise RuntimeError("disk on fire")

        def load_state_dict(self, state):
            raise AssertionError("never loaded")

    with pytest.raises(CheckpointError, match="disk on fire"):
        manager.save(5, {"app": Broken()})
    assert manager.latest_committed() is None
    manager.clean_partial()
    assert list(tmp_path.iterdir()) == []


def test_load_refuses_an_uncommitted_dir(tmp_path):
    (tmp_path / "step_4").mkdir()
    with pytest.raises(CheckpointError, match="not a committed checkpoint"):
        CheckpointManager(tmp_path).load(4, {"app": make_state(0)})


def test_clean_partial_keeps_committed(tmp_path):
    manager = CheckpointManager(tmp_path, keep=3)
    manager.save(1, {"app": make_state(0)})
    (tmp_path / "step_3.tmp").mkdir()
    (tmp_path / "step_2").mkdir()
    removed = manager.clean_partial()
    assert sorted(p.name for p in removed) == ["step_2", "step_3.tmp"]
    assert manager.committed_steps() == [1]


@pytest.mark.parametrize(
    ("interval", "due_steps"),
    [pytest.param(0, [], id="off"), pytest.param(3, [3, 6, 9], id="every-3")],
)
def test_due(interval, due_steps):
    manager = CheckpointManager("unused", keep=1, interval_steps=interval)
    assert [s for s in range(0, 10) if manager.due(s)] == due_steps


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"keep": 0}, "keep=0", id="keep-zero"),
        pytest.param({"interval_steps": -1}, "interval_steps=-1", id="negative-interval"),
    ],
)
def test_manager_rejects_bad_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CheckpointManager("unused", **kwargs)


def test_rng_blob_is_keyed_by_rank():
    state = make_state(0)
    state.rank = 3
    blob = state.state_dict()["rng"]
    assert list(blob) == ["rank_3"]
    assert isinstance(blob["rank_3"], bytes)
    first = draws()
    restore_rng_state_bytes(blob["rank_3"])
    assert draws() == first
