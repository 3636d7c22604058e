"""Start, stop and inspect the local emulated Slurm cluster.

``up`` installs what is missing (Debian/Ubuntu, as root), writes ``slurm.conf``, then starts
munged (as the munge user), slurmctld and one ``slurmd -N <node>`` per emulated node, and waits
until every node is idle. It is idempotent: daemons that still run are kept, dead ones are
restarted (slurmctld reloads its saved job state, so queued and requeued jobs survive).
``down`` stops only the daemons that ``up`` started, by pid and start time.

The files outside the state folder come from a :class:`~hpcflow.local_cluster.system.SystemPaths`
and commands run through a runner (:mod:`hpcflow.command`); both are parameters.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from hpcflow.command import Runner, run_command
from hpcflow.errors import LocalClusterError
from hpcflow.local_cluster import processes as procs
from hpcflow.local_cluster.config import LocalClusterConfig, render_slurm_conf
from hpcflow.local_cluster.daemons import (
    HEALTHY_STATES,
    Log,
    NodeState,
    query_nodes,
    slurm_env,
    start_munged,
    start_slurmctld,
    start_slurmd,
    wait_healthy,
)
from hpcflow.local_cluster.system import (
    SYSTEM_PATHS,
    SystemPaths,
    check_ports,
    check_root,
    check_same_shape,
    ensure_hosts,
    ensure_packages,
    installed_slurm_version,
    run_checked,
    write_config,
)


@dataclass
class ClusterStatus:
    """What ``status`` reports.

    Attributes:
        running: every daemon hpcflow started is alive and every node is healthy.
        daemons: name -> pid for each daemon alive now (recorded by hpcflow).
        dead: names of recorded daemons that are no longer running.
        nodes: the nodes as sinfo sees them (empty when slurmctld does not answer).
        slurm_conf: path of the slurm.conf in use.
        log_dir: where the daemons log.
    """

    running: bool
    daemons: dict[str, int] = field(default_factory=dict)
    dead: list[str] = field(default_factory=list)
    nodes: list[NodeState] = field(default_factory=list)
    slurm_conf: str = ""
    log_dir: str = ""

    def to_dict(self) -> dict[str, object]:
        return {
            "running": self.running,
            "daemons": self.daemons,
            "dead": self.dead,
            "nodes": [n.__dict__ for n in self.nodes],
            "slurm_conf": self.slurm_conf,
            "log_dir": self.log_dir,
        }


def records_path(cfg: LocalClusterConfig) -> Path:
    """Where ``up`` records the daemons it started: ``<run_dir>/daemons.json``."""
    return cfg.run_dir / "daemons.json"


def up(cfg: LocalClusterConfig, *, log: Log = lambda _m: None, install: bool = True,
       paths: SystemPaths = SYSTEM_PATHS, runner: Runner = run_command) -> ClusterStatus:
    """Bring the local cluster up (idempotent) and return its status. On a running cluster
    whose slurm.conf changed in anything but its nodes and ports (a partition added), the new
    slurm.conf is written and applied with ``scontrol reconfigure``, without a restart.

    Args:
        cfg: nodes, ports and the state folder.
        log: called with one line per thing done.
        install: install missing packages with apt-get (else fail).
        paths: the system files written (slurm.conf, hosts, munge's).
        runner: runs every command (:func:`hpcflow.command.run_command`).

    Raises:
        LocalClusterError: not root, packages missing without apt, a port taken by another
            process, a foreign /etc/slurm/slurm.conf, or a daemon that fails to start.
    """
    check_root()
    if install:
        ensure_packages(log, runner=runner)
    if cfg.slurm_version is None:  # the keys that differ between Slurm versions
        cfg = dataclasses.replace(cfg, slurm_version=installed_slurm_version(runner))
    records = procs.load_records(records_path(cfg))
    alive = {k for k, r in records.items() if procs.is_alive(r)}
    if alive:
        check_same_shape(cfg)
    check_ports(cfg, alive)
    wanted = {"slurmctld", *(f"slurmd:{n}" for n in cfg.node_names)}
    if wanted <= alive:
        log("the local cluster is already running: reusing it")
    before = _read(cfg.slurm_conf_path) if "slurmctld" in alive else None
    write_config(cfg, paths)
    ensure_hosts(cfg, paths)
    if "munged" not in alive:
        rec = start_munged(log, paths, runner)
        if rec:
            records["munged"] = rec
        else:
            records.pop("munged", None)
    if "slurmctld" not in alive:
        records["slurmctld"] = start_slurmctld(cfg, log, runner)
        procs.save_records(records_path(cfg), records)
    for node in cfg.node_names:
        if f"slurmd:{node}" not in alive:
            records[f"slurmd:{node}"] = start_slurmd(cfg, node, log, runner)
            procs.save_records(records_path(cfg), records)
    procs.save_records(records_path(cfg), records)
    if before is not None and before != render_slurm_conf(cfg):
        # Same nodes and ports (check_same_shape), other partitions or settings: a running
        # slurmctld reads slurm.conf again and tells the slurmds (scontrol(1), reconfigure).
        log("slurm.conf changed under the running cluster: scontrol reconfigure")
        run_checked(["scontrol", "reconfigure"], env=slurm_env(cfg), runner=runner)
    wait_healthy(cfg, runner=runner)
    return status(cfg, runner=runner)


def start_node(cfg: LocalClusterConfig, node: str, *, log: Log = lambda _m: None,
               runner: Runner = run_command) -> bool:
    """Start the slurmd of one emulated node again if the one ``up`` recorded is not running
    (it crashed, or a test killed it to emulate a node failure), and record the new one.

    It does not resume the node: a node that slurmctld set DOWN because it stopped answering
    returns to service by itself when its slurmd registers again (``ReturnToService=2``,
    slurm.conf(5)), which is what a real node coming back does.

    Returns:
        True when a slurmd was started; False when the recorded one still runs.

    Raises:
        LocalClusterError: ``node`` is not a node of ``cfg``, or slurmd failed to start.
    """
    if node not in cfg.node_names:
        raise LocalClusterError(f"node: {node!r} is not a node of the local cluster; "
                                f"use one of {', '.join(cfg.node_names)}")
    records = procs.load_records(records_path(cfg))
    rec = records.get(f"slurmd:{node}")
    if rec is not None and procs.is_alive(rec):
        return False
    records[f"slurmd:{node}"] = start_slurmd(cfg, node, log, runner)
    procs.save_records(records_path(cfg), records)
    return True


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


def down(cfg: LocalClusterConfig, *, log: Log = lambda _m: None) -> list[str]:
    """Stop the daemons hpcflow started (slurmds, then slurmctld, then munged).

    Returns:
        The names of the daemons that were running and were stopped.
    """
    path = records_path(cfg)
    records = procs.load_records(path)
    order = sorted(records, key=lambda k: (not k.startswith("slurmd:"), k == "munged", k))
    stopped = []
    for name in order:
        if procs.stop(records[name]):
            log(f"stopped {name} (pid {records[name].pid})")
            stopped.append(name)
    path.unlink(missing_ok=True)
    return stopped


def status(cfg: LocalClusterConfig, *, runner: Runner = run_command) -> ClusterStatus:
    """Report the recorded daemons and the nodes as slurmctld sees them (no changes made)."""
    records = procs.load_records(records_path(cfg))
    daemons = {k: r.pid for k, r in records.items() if procs.is_alive(r)}
    dead = sorted(k for k in records if k not in daemons)
    nodes = query_nodes(cfg, runner) if "slurmctld" in daemons else []
    by_name = {n.name: n for n in nodes}
    healthy = bool(records) and not dead and all(
        by_name.get(n) and by_name[n].state in HEALTHY_STATES for n in cfg.node_names)
    return ClusterStatus(running=healthy, daemons=daemons, dead=dead, nodes=nodes,
                         slurm_conf=str(cfg.slurm_conf_path), log_dir=str(cfg.log_dir))
