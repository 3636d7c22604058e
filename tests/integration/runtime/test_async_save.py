"""Async save: training steps go on while the checkpoint is written, and what is committed is
the state of the step it was taken at, identical to a synchronous save of that state.

Two real gloo ranks train a small FSDP2 model with AdamW (tests/integration/runtime/ckpt_ranks.py)
and save every 2 steps with ``blocking=False``. The write of step 2 is held at a gate that the
training loop opens only after step 4 has finished: were the save synchronous, the loop could
never open it and the test would fail. Orderings are read from recorded events, never timed.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from ckpt_ranks import Ranks, Recorder, dump, events, result

pytestmark = [pytest.mark.dist, pytest.mark.timeout(240)]


PROGRAMS = Path(__file__).stem  # the fork server imports the rank programs by name


class TrainApp:
    """Model and optimizer as one DCP ``Stateful`` (``get_state_dict`` handles FSDP2)."""

    def __init__(self, model: Any, optimizer: Any) -> None:
        self.model, self.optimizer = model, optimizer

    def state_dict(self) -> dict[str, Any]:
        from torch.distributed.checkpoint.state_dict import get_state_dict

        model_sd, optim_sd = get_state_dict(self.model, self.optimizer)
        return {"model": model_sd, "optim": optim_sd}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        from torch.distributed.checkpoint.state_dict import set_state_dict

        set_state_dict(self.model, self.optimizer, model_state_dict=state["model"],
                       optim_state_dict=state["optim"])


def build_model(world: int, sizes: tuple[int, ...] = (32, 64, 64, 1)) -> TrainApp:
    """The same MLP (``sizes``: its layers' widths, ReLU between) on every call, FSDP2-sharded
    over the world, with AdamW."""
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for width_in, width_out in itertools.pairwise(sizes):
        layers += [torch.nn.Linear(width_in, width_out), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1])
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("dp",))
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return TrainApp(model, torch.optim.AdamW(model.parameters(), lr=1e-2))


def digest(app: TrainApp) -> str:
    """sha256 of every full parameter and optimizer state (collective: gathers shards)."""
    import hashlib

    import torch
    from torch.distributed.tensor import DTensor

    def flat(prefix: str, value: Any):  # noqa: ANN202
        if isinstance(value, dict):
            for key in sorted(value, key=str):
                yield from flat(f"{prefix}/{key}", value[key])
        else:
            yield prefix, value

    sha = hashlib.sha256()
    for key, value in flat("", app.state_dict()):
        if isinstance(value, DTensor):
            value = value.full_tensor()
        if isinstance(value, torch.Tensor):
            value = value.detach().contiguous().numpy().tobytes()
        sha.update(f"{key}={value!r}".encode() if not isinstance(value, bytes) else value)
    return sha.hexdigest()


def load_back(managers: dict[str, Any], build: Any) -> dict[str, str]:
    """``{"<name>/<step>": digest}`` of each committed checkpoint of each manager, loaded into a
    fresh ``build()``."""
    loaded = {}
    for name, manager in managers.items():
        for step in manager.committed_steps():
            fresh = build()
            manager.load(step, {"app": fresh})
            loaded[f"{name}/{step}"] = digest(fresh)
    return loaded


def program_async_model(rank: int, world: int, p: dict[str, Any]) -> int:
    """FSDP2 + AdamW steps with a save every ``interval`` steps (async). At ``hold_step`` the
    same state is also saved synchronously to ``sync/``; the async write of that step is held
    until step ``release_after`` has finished. Then both checkpoints are loaded back."""
    import torch

    from hpcflow.runtime.checkpoint import CheckpointManager

    work = Path(p["work"])
    rec = Recorder(work, rank, p)
    app = build_model(world)
    data = torch.Generator().manual_seed(100 + rank)
    sync_mgr = CheckpointManager(work / "sync", coord_timeout_s=60)
    async_mgr = CheckpointManager(work / "async", keep=5, interval_steps=p["interval"],
                                  on_event=rec, coord_timeout_s=60)
    live = {}
    for step in range(1, p["steps"] + 1):
        loss = app.model(torch.randn(8, 32, generator=data)).pow(2).mean()
        loss.backward()
        app.optimizer.step()
        app.optimizer.zero_grad()
        rec("step_end", step)
        if step == p["release_after"]:
            rec("gate_opened", step)
            rec.gate.set()
        rec("poll_none" if async_mgr.poll() is None else "poll_committed", step)
        if async_mgr.due(step):
            live[step] = digest(app)
            if step == p["hold_step"]:
                sync_mgr.save(step, {"app": app})
            async_mgr.save(step, {"app": app}, blocking=False)
            rec("save_returned", step)
            if step == p["hold_step"]:  # train on only once the write is under way (held)
                rec.held.wait(60)
    async_mgr.close()
    loaded = load_back({"sync": sync_mgr, "async": async_mgr}, lambda: build_model(world))
    Path(work / f"result-{rank}.json").write_text(json.dumps({
        "live": {str(k): v for k, v in live.items()}, "loaded": loaded,
        "async_committed": async_mgr.committed_steps(),
    }))
    return 0




# ---- the test

PARAMS = {"steps": 6, "interval": 2, "hold_at": "write_data", "hold_step": 2, "release_after": 4}


def test_steps_go_on_while_an_async_save_is_written_and_it_equals_a_sync_save(tmp_path):
    server = Ranks()
    try:
        codes = server.run(f"{PROGRAMS}:program_async_model", tmp_path, PARAMS, timeout_s=200)
    finally:
        server.close()
    assert codes == [0, 0], dump(tmp_path)
    for rank in (0, 1):
        seen = events(tmp_path, rank)
        at = {event: i for i, event in enumerate(seen)}  # last index of each (event, step)
        assert ("gate_timeout", 2) not in at, dump(tmp_path)
        # The save of step 2 returned, then steps 3 and 4 ran while its write was held ...
        assert at[("save_returned", 2)] < at[("step_end", 3)] < at[("step_end", 4)], seen
        assert seen.index(("write_data", 2)) < at[("step_end", 3)], seen
        # ... and polling saw no commit meanwhile; the commit came after step 4.
        assert ("poll_none", 3) in at and ("poll_committed", 3) not in at, seen
        assert at[("step_end", 4)] < at[("written", 2)] < at[("committed", 2)], seen
        # One save in flight at a time: step 4's save started after step 2's was committed.
        assert at[("committed", 2)] < at[("save_start", 4)], seen
        assert [e for e in seen if e[0] == "committed"] == [("committed", 2), ("committed", 4),
                                                           ("committed", 6)], seen
    rank0 = events(tmp_path, 0)
    assert rank0.index(("step_end", 4)) < rank0.index(("renamed", 2)), rank0

    got = result(tmp_path, 0)
    assert got["async_committed"] == [2, 4, 6]
    # Loaded back: the async checkpoint of step 2 holds step 2's state, although steps 3 and 4
    # had changed every parameter before it was written, and equals the sync save of step 2.
    assert got["loaded"]["async/2"] == got["live"]["2"] == got["loaded"]["sync/2"], got
    assert got["loaded"]["async/4"] == got["live"]["4"] != got["live"]["2"], got
    assert got["loaded"]["async/6"] == got["live"]["6"], got
    assert result(tmp_path, 1)["loaded"] == got["loaded"]
    assert json.loads((tmp_path / "async" / "step_2" / "hpcflow-commit.json").read_text())[
        "world_size"] == 2
