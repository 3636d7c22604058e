"""kill -9 of a rank while a checkpoint is written, at many moments: the next start never loads
a partial checkpoint, removes the partial directories and resumes from the latest committed one.

Each trial runs two real gloo ranks (tests/integration/runtime/ckpt_ranks.py) that save every 2
steps; the victim SIGKILLs itself at one phase of the save of step 4 (the manager's ``on_event``
hook, so the moment is exact), or at a seeded random delay after that write starts. The other
rank is then SIGKILLed too, as ``srun --kill-on-bad-exit`` does. The next start runs on both
ranks: clean, load the latest committed step, check every value, save once more.
"""

from __future__ import annotations

import json
import os
import random
import signal
from pathlib import Path
from typing import Any

import pytest
from ckpt_ranks import Ranks, Recorder, dump, result

from hpcflow.runtime import commit as ckpt_dirs

pytestmark = [pytest.mark.dist, pytest.mark.timeout(400)]

PROGRAMS = Path(__file__).stem  # the fork server imports the rank programs by name
ROWS_PER_RANK = 64  # rows of the sharded tensor each rank holds
COLS = 1024  # 64 x 1024 float32 = 256 KiB per rank
PREVIOUS, TARGET = 2, 4  # saves every 2 steps; the save of step 4 is interrupted
SEED = 20260501
_rng = random.Random(SEED)
RANDOM_DELAYS_S = [round(_rng.uniform(0.0, 0.6), 3) for _ in range(4)]


def sharded_state(rank: int, world: int) -> dict[str, Any]:
    """A DTensor sharded by rows over the world, a tensor only this rank holds, and the step."""
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("dp",))
    full = torch.zeros(ROWS_PER_RANK * world, COLS)
    return {"model": distribute_tensor(full, mesh, [Shard(0)]),
            f"rank_{rank}": torch.zeros(COLS), "step": 0}


def set_values(state: dict[str, Any], rank: int, step: int) -> None:
    """Make every value a function of ``step`` (and of the position), so a checkpoint mixing
    steps or ranks cannot pass :func:`values_match`."""
    import torch

    local = state["model"].to_local()
    offset = rank * ROWS_PER_RANK * COLS
    local.copy_(torch.arange(local.numel(), dtype=torch.float32).view_as(local) + offset)
    local.add_(step * 1e6)
    state[f"rank_{rank}"].fill_(step * 10 + rank)
    state["step"] = step


def values_match(state: dict[str, Any], rank: int, step: int) -> bool:
    import torch

    expected = sharded_state_like(state, rank)
    set_values(expected, rank, step)
    return (state["step"] == step
            and torch.equal(state["model"].to_local(), expected["model"].to_local())
            and torch.equal(state[f"rank_{rank}"], expected[f"rank_{rank}"]))


def sharded_state_like(state: dict[str, Any], rank: int) -> dict[str, Any]:
    from torch.distributed.tensor import DTensor

    model = state["model"]
    return {"model": DTensor.from_local(model.to_local().clone(), model.device_mesh,
                                        model.placements),
            f"rank_{rank}": state[f"rank_{rank}"].clone(), "step": state["step"]}


def program_train(rank: int, world: int, p: dict[str, Any]) -> int:
    """Steps 1..``steps``: set the values of the step, a small all-reduce (the training group),
    a save when due (``blocking`` or not), a poll at each boundary; then close."""
    import torch
    import torch.distributed as dist

    from hpcflow.runtime.checkpoint import CheckpointManager

    work = Path(p["work"])
    rec = Recorder(work, rank, p)
    state = sharded_state(rank, world)
    manager = CheckpointManager(work / "ckpt", keep=p.get("keep", 2),
                                interval_steps=p["interval"], on_event=rec, coord_timeout_s=60)
    manager.clean_partial()
    for step in range(1, p["steps"] + 1):
        set_values(state, rank, step)
        dist.all_reduce(torch.ones(1))
        rec("step_end", step)
        if manager.poll() is not None:
            rec("poll_committed", step)
        if manager.due(step):
            manager.save(step, state, blocking=p["blocking"])
            rec("save_returned", step)
    manager.close()
    rec("closed", p["steps"])
    if p.get("kill_after_s") is not None and p.get("kill_rank") == rank:
        os.kill(os.getpid(), signal.SIGKILL)  # the timer had not fired: die after the commit
    return 0


def program_resume(rank: int, world: int, p: dict[str, Any]) -> int:
    """The next start: clean partial directories, load the latest committed checkpoint, check
    every value, then save once more (a leftover must not break the next save)."""
    from hpcflow.runtime import dist as hdist
    from hpcflow.runtime.checkpoint import CheckpointManager

    work = Path(p["work"])
    state = sharded_state(rank, world)
    manager = CheckpointManager(work / "ckpt", keep=p.get("keep", 2), coord_timeout_s=60)
    removed = [path.name for path in manager.clean_partial()]
    latest = hdist.broadcast_object(manager.latest_committed())
    ok = None
    if latest is not None:
        manager.load(latest, state)
        ok = values_match(state, rank, latest)
    next_step = (latest or 0) + 1
    set_values(state, rank, next_step)
    manager.save(next_step, state, blocking=False)
    manager.close()
    Path(work / f"result-{rank}.json").write_text(json.dumps({
        "removed": removed, "latest": latest, "values_ok": ok, "saved_next": next_step,
        "committed_after": manager.committed_steps(),
    }))
    return 0


# ---- the tests


def phase(blocking: bool, victim: int, at: str, allowed: set[int]) -> Any:
    mode = "sync" if blocking else "async"
    return pytest.param({"blocking": blocking, "kill_rank": victim, "kill_at": at}, allowed,
                        id=f"{mode}-rank{victim}-{at}")


def delayed(blocking: bool, victim: int, delay_s: float) -> Any:
    mode = "sync" if blocking else "async"
    return pytest.param(
        {"blocking": blocking, "kill_rank": victim, "kill_after_s": delay_s, "slow_write_s": 0.3},
        {PREVIOUS, TARGET}, id=f"{mode}-rank{victim}-after-{delay_s}s",
    )


TRIALS = [
    phase(True, 0, "prepared", {PREVIOUS}),
    phase(False, 1, "staged", {PREVIOUS}),
    phase(False, 0, "write_start", {PREVIOUS}),
    phase(True, 1, "write_data", {PREVIOUS}),
    phase(False, 0, "write_data", {PREVIOUS}),
    phase(False, 1, "write_data", {PREVIOUS}),
    phase(True, 0, "finish", {PREVIOUS}),  # shards written, no .metadata yet
    phase(False, 0, "written", {PREVIOUS}),
    phase(True, 1, "written", {PREVIOUS, TARGET}),  # rank 0 may commit: every file is there
    phase(False, 0, "record_written", {PREVIOUS}),  # record in step_4.tmp, never renamed
    phase(False, 0, "renamed", {TARGET}),  # committed, killed before pruning
    phase(False, 1, "committed", {TARGET}),
    delayed(False, 0, RANDOM_DELAYS_S[0]),
    delayed(False, 1, RANDOM_DELAYS_S[1]),
    delayed(True, 0, RANDOM_DELAYS_S[2]),
    delayed(True, 1, RANDOM_DELAYS_S[3]),
]


@pytest.fixture(scope="module")
def ranks():
    server = Ranks()
    yield server
    server.close()


@pytest.mark.parametrize(("kill", "allowed"), TRIALS)
def test_kill_during_save_never_leaves_a_loadable_partial_checkpoint(ranks, tmp_path, kill,
                                                                     allowed):
    params = {"steps": TARGET, "interval": 2, "kill_step": TARGET, **kill}
    codes = ranks.run(f"{PROGRAMS}:program_train", tmp_path, params, kill_on_bad_exit=True)
    victim = kill["kill_rank"]
    assert codes[victim] == -signal.SIGKILL, f"rc={codes}\n{dump(tmp_path)}"
    before = ckpt_dirs.scan(tmp_path / "ckpt")
    assert PREVIOUS in before.committed, dump(tmp_path)
    assert before.committed[-1] in allowed, f"{before}\n{dump(tmp_path)}"

    codes = ranks.run(f"{PROGRAMS}:program_resume", tmp_path, {})
    assert codes == [0, 0], dump(tmp_path)
    found = [result(tmp_path, rank) for rank in (0, 1)]
    for got in found:
        assert got["latest"] == before.committed[-1], found
        assert got["values_ok"] is True, found  # every value is the one of that step
        assert got["committed_after"][-1] == got["saved_next"], found
    assert sorted(found[0]["removed"]) == sorted(p.name for p in before.partial)
    after = ckpt_dirs.scan(tmp_path / "ckpt")
    assert after.partial == [] and not list((tmp_path / "ckpt").glob("*.tmp"))


def test_trials_cover_every_phase_of_a_save():
    phases = {trial.values[0].get("kill_at") for trial in TRIALS}
    assert phases >= {"prepared", "staged", "write_start", "write_data", "finish", "written",
                      "record_written", "renamed", "committed"}
    assert {trial.values[0]["kill_rank"] for trial in TRIALS} == {0, 1}
    assert {trial.values[0]["blocking"] for trial in TRIALS} == {True, False}
