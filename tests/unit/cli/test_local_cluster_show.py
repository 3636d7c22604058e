"""`hpcflow local-cluster status`'s text: what it says for each state of the daemons."""

from __future__ import annotations

import pytest

from hpcflow.cli.local_cluster import _show
from hpcflow.local_cluster.manager import ClusterStatus


def shown(capsys: pytest.CaptureFixture[str], **fields) -> str:
    st = ClusterStatus(**{"running": False, "daemons": {}, "dead": [], "nodes": [],
                          "slurm_conf": "/etc/slurm.conf", "log_dir": "/log", **fields})
    _show(st, as_json=False)
    return capsys.readouterr().out


def test_a_cluster_never_started_or_stopped_says_so_and_how_to_start_it(capsys):
    out = shown(capsys)
    assert "NOT healthy" in out
    assert "the local cluster is not started (run: hpcflow local-cluster up)" in out


def test_running_and_dead_daemons_are_each_named(capsys):
    out = shown(capsys, daemons={"slurmctld": 41}, dead=["slurmd:n2"])
    assert "slurmctld    pid 41" in out
    assert "slurmd:n2    not running (run: hpcflow local-cluster up)" in out
    assert "not started" not in out
