"""TrainState across layouts: RNG streams restored only on the layout they were saved on."""

from __future__ import annotations

import json

import pytest
import torch

from hpcflow.examples.trainstate import TrainState
from hpcflow.runtime.sampler import ResumableSampler

pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled:UserWarning")


def make_state(layout: dict, reseeded: list) -> TrainState:
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 2)
    optim = torch.optim.AdamW(model.parameters())
    return TrainState(model, optim, None, ResumableSampler(10, 2, 0, 1), rank=0, layout=layout,
                      reseed=reseeded.append)


def test_same_layout_restores_the_rng_stream():
    state = make_state({"pp": 2, "dp": 2, "tp": 2}, [])
    saved = state.state_dict()
    assert json.loads(saved["layout"]) == {"pp": 2, "dp": 2, "tp": 2} and "rng" in saved
    assert state.prepare_load(saved["layout"]) is True
    expected = torch.rand(3)
    torch.rand(5)
    state.load_state_dict(saved)
    assert torch.equal(torch.rand(3), expected)


def test_other_layout_skips_the_rng_entry_and_reseeds_from_the_step():
    saved = make_state({"pp": 2, "dp": 2, "tp": 2}, []).state_dict()
    saved["step"] = 7
    reseeded: list = []
    state = make_state({"pp": 2, "dp": 1, "tp": 2}, reseeded)
    assert state.prepare_load(saved["layout"]) is False
    assert "rng" not in state.state_dict()  # DCP is not asked for another layout's streams
    state.load_state_dict({k: v for k, v in saved.items() if k != "rng"})
    assert reseeded == [7] and state.step == 7
    assert "rng" in state.state_dict()  # the next save writes this rank's streams again
