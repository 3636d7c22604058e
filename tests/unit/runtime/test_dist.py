"""init_distributed / shutdown and the collective paths in a world of 1 (gloo, in process)."""

from __future__ import annotations

import os

import pytest
import torch.distributed as dist

from hpcflow.runtime import dist as hdist
from hpcflow.runtime.env import DistEnv, free_port
from hpcflow.runtime.preemption import PreemptionMonitor


@pytest.fixture
def world_of_one(monkeypatch):
    for name in ("MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    env = DistEnv(0, 0, 1, 1, 0, "127.0.0.1", free_port())
    backend = hdist.init_distributed(env, timeout_s=30)
    yield env, backend
    hdist.shutdown()


def test_init_exports_the_rendezvous_and_joins_with_gloo(world_of_one):
    env, backend = world_of_one
    assert backend == "gloo"
    assert dist.is_initialized() and hdist.get_rank() == 0 and hdist.get_world_size() == 1
    assert os.environ["MASTER_PORT"] == str(env.master_port)
    assert hdist.init_distributed(env) == "gloo", "a second call must not re-initialise"
    assert hdist.broadcast_object({"step": 3}) == {"step": 3}


def test_should_stop_goes_through_the_all_reduce(world_of_one, tmp_path):
    flag = tmp_path / "flag"
    monitor = PreemptionMonitor(flag)
    try:
        assert monitor.should_stop() is False
        flag.write_text("")
        assert monitor.should_stop() is True
    finally:
        monitor.close()


def test_shutdown_twice_and_rank_queries_without_a_group():
    hdist.shutdown()
    hdist.shutdown()
    assert not hdist.is_distributed()
    assert (hdist.get_rank(), hdist.get_world_size()) == (0, 1)
    assert hdist.broadcast_object("x") == "x"
    hdist.barrier()


def test_unreachable_rendezvous_names_the_address(monkeypatch):
    for name in ("MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    # Rank 1 waits for a rank 0 that never comes.
    env = DistEnv(1, 0, 2, 1, 1, "127.0.0.1", free_port())
    expected = rf"rank 1/2: joining the process group at 127\.0\.0\.1:{env.master_port}"
    with pytest.raises(RuntimeError, match=expected):
        hdist.init_distributed(env, timeout_s=1)
