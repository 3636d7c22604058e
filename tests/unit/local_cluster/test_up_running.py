"""`local-cluster up` on a running cluster: reused when the shape matches, refused (and nothing
rewritten) when the nodes or ports asked for differ from those the daemons run with."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcflow.errors import LocalClusterError
from hpcflow.local_cluster import manager
from hpcflow.local_cluster import processes as procs
from hpcflow.local_cluster.config import LocalClusterConfig, render_slurm_conf


@pytest.fixture
def running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cluster 'running' with the default shape: slurm.conf written, every daemon alive."""
    monkeypatch.setattr(manager.os, "geteuid", lambda: 0)
    monkeypatch.setattr(manager, "SYSTEM_SLURM_CONF", tmp_path / "etc-slurm.conf")
    monkeypatch.setattr(manager, "HOSTS_FILE", tmp_path / "hosts")
    monkeypatch.setattr(manager, "wait_healthy", lambda cfg: [])
    monkeypatch.setattr(manager, "port_in_use", lambda port: True)
    started = LocalClusterConfig(state_dir=tmp_path / "state", hostname="h")
    (started.state_dir / "etc").mkdir(parents=True)
    started.slurm_conf_path.write_text(render_slurm_conf(started))
    names = ["munged", "slurmctld", *(f"slurmd:{n}" for n in started.node_names)]
    recs = {n: procs.DaemonRecord(n, 1000 + i, 1) for i, n in enumerate(names)}
    monkeypatch.setattr(procs, "load_records", lambda path: dict(recs))
    monkeypatch.setattr(procs, "is_alive", lambda rec: True)

    def must_not_start(*_a, **_k):
        raise AssertionError("a daemon was started on a running cluster")

    for fn in ("start_munged", "start_slurmctld", "start_slurmd"):
        monkeypatch.setattr(manager, fn, must_not_start)
    return tmp_path


def test_up_on_a_running_cluster_with_the_same_shape_reuses_it(running: Path) -> None:
    lines: list[str] = []
    cfg = LocalClusterConfig(state_dir=running / "state", hostname="h")
    manager.up(cfg, log=lines.append, install=False)
    assert "already running: reusing it" in "\n".join(lines)


@pytest.mark.parametrize("kw", [{"nodes": 3}, {"controller_port": 7817}, {"node_base_port": 7818}])
def test_up_with_other_nodes_or_ports_is_refused_and_rewrites_nothing(running: Path, kw) -> None:
    conf = running / "state" / "etc" / "slurm.conf"
    before = conf.read_text()
    cfg = LocalClusterConfig(state_dir=running / "state", hostname="h", **kw)
    with pytest.raises(LocalClusterError, match="already running with other nodes or ports"):
        manager.up(cfg, install=False)
    assert conf.read_text() == before
    assert not (running / "etc-slurm.conf").exists()
