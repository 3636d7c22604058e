"""`local-cluster up` on a running cluster: reused when the shape matches, refused (and nothing
rewritten) when the nodes or ports asked for differ from those the daemons run with."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from hpcflow.errors import LocalClusterError
from hpcflow.local_cluster import manager, system
from hpcflow.local_cluster import processes as procs
from hpcflow.local_cluster.config import LocalClusterConfig, render_slurm_conf
from hpcflow.local_cluster.system import SystemPaths


def sinfo_only(argv, **_kw) -> subprocess.CompletedProcess[str]:  # noqa: ANN001
    """A runner for a healthy cluster: sinfo answers with idle nodes and `slurmctld -V` with
    Debian 12's version; anything else (a daemon start, munge, apt) fails the test."""
    if list(argv) == ["slurmctld", "-V"]:
        return subprocess.CompletedProcess(argv, 0, "slurm-wlm 22.05.8\n", "")
    if argv[0] != "sinfo":
        raise AssertionError(f"ran {argv} on a running cluster")
    return subprocess.CompletedProcess(argv, 0, "n1|idle|none\nn2|idle|none\n", "")


@pytest.fixture
def running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cluster 'running' with the default shape: slurm.conf written, and every daemon's record
    names a live process (this one, so no port is probed)."""
    monkeypatch.setattr(system.os, "geteuid", lambda: 0)
    started = LocalClusterConfig(state_dir=tmp_path / "state", hostname="h")
    (started.state_dir / "etc").mkdir(parents=True)
    started.slurm_conf_path.write_text(render_slurm_conf(started))
    names = ["munged", "slurmctld", *(f"slurmd:{n}" for n in started.node_names)]
    procs.save_records(manager.records_path(started),
                       {n: procs.record_for(n, os.getpid()) for n in names})
    return tmp_path


def paths(root: Path) -> SystemPaths:
    return SystemPaths(slurm_conf=root / "etc-slurm.conf", hosts=root / "hosts",
                       munge_key=root / "munge.key", munge_run=root / "munge")


def test_up_on_a_running_cluster_with_the_same_shape_reuses_it(running: Path) -> None:
    lines: list[str] = []
    cfg = LocalClusterConfig(state_dir=running / "state", hostname="h")
    manager.up(cfg, log=lines.append, install=False, paths=paths(running), runner=sinfo_only)
    assert "already running: reusing it" in "\n".join(lines)


@pytest.mark.parametrize("kw", [{"nodes": 3}, {"controller_port": 7817}, {"node_base_port": 7818}])
def test_up_with_other_nodes_or_ports_is_refused_and_rewrites_nothing(running: Path, kw) -> None:
    conf = running / "state" / "etc" / "slurm.conf"
    before = conf.read_text()
    cfg = LocalClusterConfig(state_dir=running / "state", hostname="h", **kw)
    with pytest.raises(LocalClusterError, match="already running with other nodes or ports"):
        manager.up(cfg, install=False, paths=paths(running), runner=sinfo_only)
    assert conf.read_text() == before
    assert not (running / "etc-slurm.conf").exists()


def test_up_adds_a_new_partition_to_a_running_cluster_with_scontrol_reconfigure(
        running: Path) -> None:
    """A cluster started before the dev partition existed gets it without a restart."""
    conf = running / "state" / "etc" / "slurm.conf"
    old_cfg = LocalClusterConfig(state_dir=running / "state", hostname="h", extra_partitions=())
    conf.write_text(render_slurm_conf(old_cfg))
    ran: list[list[str]] = []

    def runner(argv, **kw) -> subprocess.CompletedProcess[str]:  # noqa: ANN001
        if argv[:2] == ["scontrol", "reconfigure"]:
            assert kw["env"]["SLURM_CONF"] == str(conf)
            ran.append(argv)
            return subprocess.CompletedProcess(argv, 0, "", "")
        return sinfo_only(argv, **kw)

    lines: list[str] = []
    cfg = LocalClusterConfig(state_dir=running / "state", hostname="h")
    manager.up(cfg, log=lines.append, install=False, paths=paths(running), runner=runner)
    assert ran == [["scontrol", "reconfigure"]]
    assert "PartitionName=dev Nodes=ALL Default=NO" in conf.read_text()
    assert "slurm.conf changed under the running cluster: scontrol reconfigure" in lines


def test_nodes_in_two_partitions_are_counted_once(tmp_path: Path) -> None:
    from hpcflow.local_cluster.daemons import query_nodes

    def runner(argv, **_kw) -> subprocess.CompletedProcess[str]:  # noqa: ANN001
        # sinfo -N lists a node once per partition (debug, then dev)
        return subprocess.CompletedProcess(
            argv, 0, "n1|idle|none\nn2|mixed|none\nn1|idle|none\nn2|mixed|none\n", "")

    nodes = query_nodes(LocalClusterConfig(state_dir=tmp_path), runner)
    assert [(n.name, n.state) for n in nodes] == [("n1", "idle"), ("n2", "mixed")]


def test_up_takes_the_keys_of_the_installed_slurm(running: Path) -> None:
    """On Slurm 25.11 the slurm.conf gets the line that allows expedited requeue; the running
    cluster is reconfigured, not restarted."""
    conf = running / "state" / "etc" / "slurm.conf"
    ran: list[list[str]] = []

    def runner(argv, **kw) -> subprocess.CompletedProcess[str]:  # noqa: ANN001
        if list(argv) == ["slurmctld", "-V"]:
            return subprocess.CompletedProcess(argv, 0, "slurm 25.11.8\n", "")
        if argv[:2] == ["scontrol", "reconfigure"]:
            ran.append(argv)
            return subprocess.CompletedProcess(argv, 0, "", "")
        return sinfo_only(argv, **kw)

    cfg = LocalClusterConfig(state_dir=running / "state", hostname="h")
    manager.up(cfg, install=False, paths=paths(running), runner=runner)
    assert "\nSlurmctldParameters=enable_expedited_requeue\n" in conf.read_text()
    assert ran == [["scontrol", "reconfigure"]]
