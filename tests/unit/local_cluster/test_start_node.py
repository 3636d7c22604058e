"""Bringing one node of the local cluster back after its slurmd died (``manager.start_node``),
and the slurm.conf settings a node failure relies on."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from hpcflow.errors import LocalClusterError
from hpcflow.local_cluster import manager
from hpcflow.local_cluster import processes as procs
from hpcflow.local_cluster.config import LocalClusterConfig, render_slurm_conf


def conf_values(cfg: LocalClusterConfig) -> dict[str, str]:
    return dict(line.split("=", 1) for line in render_slurm_conf(cfg).splitlines()[1:]
                if "=" in line and not line.startswith(("NodeName", "PartitionName")))


def test_a_node_that_stopped_answering_returns_by_itself_after_slurmdtimeout(tmp_path: Path):
    c = conf_values(LocalClusterConfig(state_dir=tmp_path, hostname="h"))
    # DOWN after 60 s without an answer (pings every 20 s: a slurmd slowed by a loaded 2-core
    # machine is not declared dead), and back in service when its slurmd registers again.
    assert c["SlurmdTimeout"] == "60"
    assert c["ReturnToService"] == "2"
    assert c["JobRequeue"] == "1"


@pytest.fixture
def cfg(tmp_path: Path) -> LocalClusterConfig:
    return LocalClusterConfig(state_dir=tmp_path / "state", hostname="h")


def test_a_dead_slurmd_is_started_again_and_recorded(cfg: LocalClusterConfig):
    dead = procs.DaemonRecord("slurmd:n2", os.getpid(), -1)  # same pid, other start time
    alive = procs.record_for("slurmd:n1", os.getpid())
    procs.save_records(manager.records_path(cfg), {"slurmd:n1": alive, "slurmd:n2": dead})
    ran = []

    def runner(argv, **kw):  # noqa: ANN001, ANN202
        ran.append((argv, kw.get("env", {}).get("SLURM_CONF")))
        (cfg.run_dir / "slurmd.n2.pid").write_text(f"{os.getpid()}\n")  # what slurmd writes
        return subprocess.CompletedProcess(argv, 0, "", "")

    assert manager.start_node(cfg, "n2", runner=runner) is True
    assert [a[-2:] for a, _ in ran] == [["-N", "n2"]]
    assert ran[0][1] == str(cfg.slurm_conf_path)
    records = procs.load_records(manager.records_path(cfg))
    assert procs.is_alive(records["slurmd:n2"]) and records["slurmd:n1"] == alive


def test_a_running_slurmd_is_left_alone(cfg: LocalClusterConfig):
    procs.save_records(manager.records_path(cfg),
                       {"slurmd:n1": procs.record_for("slurmd:n1", os.getpid())})

    def runner(argv, **_kw):  # noqa: ANN001, ANN202
        raise AssertionError(f"ran {argv}")

    assert manager.start_node(cfg, "n1", runner=runner) is False


def test_an_unknown_node_is_refused_with_the_known_ones(cfg: LocalClusterConfig):
    with pytest.raises(LocalClusterError, match=r"node: 'n7' is not a node .* n1, n2"):
        manager.start_node(cfg, "n7")
