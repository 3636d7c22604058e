"""Async saves whose staging copy overlaps the next step (``overlap=True``), on two real gloo
ranks training FSDP2 with AdamW.

Each rank's late copy is held at a gate that its loop opens only after the next step's forward
and backward passes: were the copy made inside ``save``, the loop could never open it. The
optimizer's step must then wait for the copy, and the checkpoint must hold the state at the save,
equal to a synchronous save of it. A rank that changes a tensor in place before its copy makes
the save fail on both ranks, with nothing committed. Orderings are read from recorded events.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from ckpt_ranks import Ranks, Recorder, dump, events, result
from test_async_save import TrainApp, digest, load_back
from test_async_save import build_model as build_mlp

pytestmark = [pytest.mark.dist, pytest.mark.timeout(240)]

PROGRAMS = Path(__file__).stem  # the fork server imports the rank programs by name
GATE_TIMEOUT_S = 60.0


def build_model(world: int) -> TrainApp:
    """An MLP whose first weight shards to 2 MiB per rank (copied late), FSDP2, AdamW."""
    return build_mlp(world, (1024, 1024, 1))


def program_overlap(rank: int, world: int, p: dict[str, Any]) -> int:
    """Steps 1-4 with an overlapped save after steps 2 and 3 (the first one allocates the staging
    buffers and copies at once); the late copy of step 3 is held until step 4's backward pass
    has run. At step 3
    the state is also saved synchronously; ``tear_rank`` changes a weight in place instead of
    training on."""
    import torch

    from hpcflow.errors import CheckpointError
    from hpcflow.runtime import staging
    from hpcflow.runtime.checkpoint import CheckpointManager

    work = Path(p["work"])
    rec = Recorder(work, rank, p)
    gate = threading.Event()
    own = staging.ParallelStager._copy

    def held(stager: Any, pairs: list) -> None:
        if pairs:
            rec("copy_held", len(pairs))
            if not gate.wait(GATE_TIMEOUT_S):
                rec("gate_timeout", 0)
        own(stager, pairs)
        if pairs:
            rec("copied", len(pairs))

    staging.ParallelStager._copy = held
    app = build_model(world)
    data = torch.Generator().manual_seed(100 + rank)
    sync_mgr = CheckpointManager(work / "sync", coord_timeout_s=60)
    mgr = CheckpointManager(work / "overlap", keep=5, on_event=rec, coord_timeout_s=60)
    live, failure = {}, None
    for step in range(1, 5):
        loss = app.model(torch.randn(8, 1024, generator=data)).pow(2).mean()
        loss.backward()
        rec("backward", step)
        if step == 4:
            if p.get("tear_rank") == rank:
                # In place, not in the optimizer's step: AdamW's first moment of a weight
                # (get_state_dict hands out the optimizer's own state tensors).
                moment = app.optimizer.state[app.model[0].weight]["exp_avg"].to_local()
                with torch.no_grad():
                    moment.mul_(0.5)
                rec("torn", step)
            rec("gate_opened", step)
            gate.set()
        app.optimizer.step()
        app.optimizer.zero_grad()
        rec("step_end", step)
        if step in (2, 3):
            live[step] = digest(app)
            if step == 3:
                sync_mgr.save(step, {"app": app})
            mgr.save(step, {"app": app}, blocking=False, overlap=True)
            rec("save_returned", step)
    try:
        mgr.close()
    except CheckpointError as exc:
        failure = str(exc)
    loaded = load_back({"sync": sync_mgr, "overlap": mgr}, lambda: build_model(world))
    (work / f"result-{rank}.json").write_text(json.dumps({
        "live": {str(k): v for k, v in live.items()}, "loaded": loaded, "failure": failure,
        "committed": mgr.committed_steps(),
    }))
    return 0


def run(tmp_path: Path, params: dict[str, Any]) -> None:
    server = Ranks()
    try:
        codes = server.run(f"{PROGRAMS}:program_overlap", tmp_path, params, timeout_s=200)
    finally:
        server.close()
    assert codes == [0, 0], dump(tmp_path)


def test_the_copy_overlaps_the_next_backward_and_the_checkpoint_equals_a_sync_save(tmp_path):
    run(tmp_path, {})
    for rank in (0, 1):
        seen = events(tmp_path, rank)
        at = {event: i for i, event in enumerate(seen)}  # last index of each (event, step)
        assert ("gate_timeout", 0) not in at, dump(tmp_path)
        held = [i for i, e in enumerate(seen) if e[0] == "copy_held"]
        copied = [i for i, e in enumerate(seen) if e[0] == "copied"]
        # Step 2's save allocated the buffers and copied at once; step 3's copy was left late.
        assert len(held) == 1 and len(copied) == 1, seen
        # save(3) returned before its copy was made (held until after step 4's backward pass);
        # the optimizer's step waited for the copy.
        assert at[("save_returned", 3)] < at[("backward", 4)] < at[("gate_opened", 4)], seen
        assert held[0] < at[("gate_opened", 4)] < copied[0] < at[("step_end", 4)], seen
        assert at[("committed", 3)] > copied[0], seen
    got = result(tmp_path, 0)
    assert got["failure"] is None and got["committed"] == [2, 3]
    assert got["loaded"]["overlap/3"] == got["live"]["3"] == got["loaded"]["sync/3"], got
    assert got["loaded"]["overlap/2"] == got["live"]["2"] != got["live"]["3"], got
    assert result(tmp_path, 1)["loaded"] == got["loaded"]


def test_a_tensor_changed_in_place_on_one_rank_fails_the_save_on_both(tmp_path):
    run(tmp_path, {"tear_rank": 1})
    for rank in (0, 1):
        got = result(tmp_path, rank)
        assert got["committed"] == [2], got  # step 3 was never committed
        assert "the checkpoint of step 3 was not written" in (got["failure"] or ""), got
        assert "changed in place" in got["failure"] and "exp_avg" in got["failure"], got
        assert not (tmp_path / "overlap" / "step_3").exists()
