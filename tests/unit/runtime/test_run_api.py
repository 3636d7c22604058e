"""The public loop API (hpcflow.runtime.Run) in one process: restore, interval save, the stop
path and the errors a user meets first."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap

import pytest
import torch

from hpcflow.errors import HpcflowError
from hpcflow.runtime import PerRank, Preempted, Run


def environ(tmp_path, **extra):
    state = tmp_path / "run" / ".hpcflow"
    return {
        "HPCFLOW_RUN_DIR": str(tmp_path / "run"),
        "HPCFLOW_CHECKPOINT_DIR": str(tmp_path / "ckpt"),
        "HPCFLOW_CHECKPOINT_INTERVAL": "2",
        "HPCFLOW_PREEMPT_FLAG": str(state / "preempt.flag"),
        "HPCFLOW_PREEMPT_COMMITTED": str(state / "committed.json"),
        "HPCFLOW_JOINED_DIR": str(state / "joined"),
        **extra,
    }


class Counter:
    """A plain stateful object (same on every rank)."""

    def __init__(self) -> None:
        self.seen = 0

    def state_dict(self):
        return {"seen": self.seen}

    def load_state_dict(self, state):
        self.seen = int(state["seen"])


def make_state(seed: int = 0):
    torch.manual_seed(seed)
    model = torch.nn.Linear(4, 2)
    optim = torch.optim.AdamW(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(optim, step_size=1, gamma=0.5)
    return {"model": model, "optim": optim, "sched": sched, "counter": Counter(),
            "mine": PerRank(Counter())}


def train(state, step):
    x = torch.randn(3, 4)
    state["model"](x).pow(2).mean().backward()
    state["optim"].step()
    state["optim"].zero_grad()
    state["sched"].step()
    state["counter"].seen += 1
    state["mine"].obj.seen += 10


def test_interval_save_then_restore_puts_every_object_back(tmp_path):
    env = environ(tmp_path)
    with Run.from_env(env) as run:
        state = make_state()
        assert run.restore(state) == 0
        for step in range(1, 5):
            train(state, step)
            run.step_done(step, state, {"loss": 1.0})
        expected_next = torch.rand(1)  # the RNG stream right after step 4 was saved
        weights = state["model"].weight.detach().clone()
        lr = state["sched"].get_last_lr()
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["step_2", "step_4"]
    assert (tmp_path / "run" / ".hpcflow" / "joined" / "0").exists()

    with Run.from_env(env) as run:
        fresh = make_state(seed=1)
        assert run.restore(fresh) == 4
        assert torch.equal(fresh["model"].weight, weights)
        assert fresh["sched"].get_last_lr() == lr
        assert fresh["counter"].seen == 4 and fresh["mine"].obj.seen == 40
        assert fresh["optim"].state_dict()["state"][0]["step"].item() == 4
        assert torch.equal(torch.rand(1), expected_next)


def test_a_flag_file_makes_step_done_commit_and_raise_preempted(tmp_path):
    env = environ(tmp_path, HPCFLOW_CHECKPOINT_INTERVAL="0")
    with pytest.raises(Preempted) as caught:
        run = Run.from_env(env)
        try:
            state = make_state()
            run.restore(state)
            train(state, 1)
            run.step_done(1, state)
            (tmp_path / "run" / ".hpcflow" / "preempt.flag").write_text("1\n")
            train(state, 2)
            run.step_done(2, state)
        finally:
            run.close()
    assert caught.value.code == 75 and caught.value.step == 2
    committed = json.loads((tmp_path / "run" / ".hpcflow" / "committed.json").read_text())
    assert committed["step"] == 2
    assert (tmp_path / "ckpt" / "step_2" / "hpcflow-commit.json").exists()


def test_preempted_inside_with_leaves_the_process_with_75(tmp_path):
    env = environ(tmp_path, HPCFLOW_CHECKPOINT_INTERVAL="0")
    (tmp_path / "run" / ".hpcflow").mkdir(parents=True)
    (tmp_path / "run" / ".hpcflow" / "preempt.flag").write_text("1\n")
    code = textwrap.dedent("""
        import torch
        from hpcflow.runtime import Run
        with Run.from_env() as run:
            model = torch.nn.Linear(2, 2)
            state = {"model": model}
            run.restore(state)
            run.step_done(1, state)
        print("not reached")
    """)
    proc = subprocess.run([sys.executable, "-c", code], env={**env, "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 75, proc.stderr
    assert "not reached" not in proc.stdout
    assert "hpcflow-preempted" in proc.stdout


def test_a_stop_without_a_checkpoint_dir_is_an_error(tmp_path):
    env = environ(tmp_path)
    del env["HPCFLOW_CHECKPOINT_DIR"], env["HPCFLOW_RUN_DIR"]
    (tmp_path / "run" / ".hpcflow").mkdir(parents=True)
    (tmp_path / "run" / ".hpcflow" / "preempt.flag").write_text("1\n")
    with Run.from_env(env) as run:
        state = {"model": torch.nn.Linear(2, 2)}
        assert run.restore(state) == 0
        with pytest.raises(HpcflowError, match="no checkpoint directory"):
            run.step_done(1, state)


@pytest.mark.parametrize("state, error, words", [
    pytest.param({"config": {"lr": 1}}, TypeError, "state['config'] is a dict", id="no-state-dict"),
    pytest.param({"optim": torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1)},
                 ValueError, "belong to no module", id="optimizer-without-model"),
    pytest.param({"hpcflow_rng": Counter()}, ValueError, "reserved", id="reserved-key"),
])
def test_state_the_api_cannot_save_is_refused_before_anything_runs(tmp_path, state, error, words):
    with Run.from_env(environ(tmp_path)) as run, pytest.raises(error, match=re.escape(words)):
        run.restore(state)


def test_restore_passes_over_a_checkpoint_whose_bytes_changed(tmp_path, capsys):
    env = environ(tmp_path)
    with Run.from_env(env) as run:
        state = make_state()
        run.restore(state)
        for step in range(1, 5):
            train(state, step)
            run.step_done(step, state, {"loss": 1.0})
    shard = next(p for p in (tmp_path / "ckpt" / "step_4").iterdir() if p.suffix == ".distcp")
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte, same size
    shard.write_bytes(bytes(data))
    capsys.readouterr()
    with Run.from_env(env) as run:
        assert run.restore(make_state(seed=1)) == 2
    err = capsys.readouterr().err
    assert "step_4 is ignored" in err and shard.name in err
