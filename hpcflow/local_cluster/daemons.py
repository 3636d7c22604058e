"""Start munged, slurmctld and the slurmds of the local cluster, and wait until the nodes are
idle. Commands run through the runner given (:mod:`hpcflow.command`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

from hpcflow.command import Runner, run_command
from hpcflow.errors import LocalClusterError
from hpcflow.local_cluster import processes as procs
from hpcflow.local_cluster.config import LocalClusterConfig
from hpcflow.local_cluster.system import SystemPaths, run_checked, which

HEALTHY_STATES = {"idle", "mixed", "allocated", "completing"}

Log = Callable[[str], None]


@dataclass
class NodeState:
    """One emulated node as ``sinfo`` reports it."""

    name: str
    state: str
    reason: str = ""


def slurm_env(cfg: LocalClusterConfig) -> dict[str, str]:
    """This process's environment with ``SLURM_CONF`` pointing at the cluster's slurm.conf."""
    return {**os.environ, "SLURM_CONF": str(cfg.slurm_conf_path)}


def munge_works(runner: Runner = run_command) -> bool:
    """True when a munge credential round-trips (munged is up and the key is readable)."""
    if not (which("munge") and which("unmunge")):
        return False
    try:
        cred = runner(["munge", "-n"], timeout_s=5)
        if cred.returncode != 0:
            return False
        return runner(["unmunge"], input=cred.stdout, timeout_s=5).returncode == 0
    except (subprocess.SubprocessError, OSError):
        return False


def start_munged(log: Log, paths: SystemPaths,
                 runner: Runner = run_command) -> procs.DaemonRecord | None:
    """Start munged as the munge user unless a working one already runs.

    Returns:
        The record of the daemon started, or None when an existing munged was reused.

    Raises:
        LocalClusterError: mungekey or munged failed, or munged does not answer.
    """
    if munge_works(runner):
        return None
    if not paths.munge_key.exists():
        log("creating a munge key")
        run_checked(["runuser", "-u", "munge", "--", "mungekey", "-c", "-f", "-k",
                     str(paths.munge_key)], runner=runner)
    paths.munge_run.mkdir(parents=True, exist_ok=True)
    shutil.chown(paths.munge_run, "munge", "munge")
    pid_file = paths.munge_run / "munged.pid"
    pid_file.unlink(missing_ok=True)
    log("starting munged")
    run_checked(["runuser", "-u", "munge", "--", which("munged") or "munged", "--force"],
                runner=runner)
    pid = procs.read_pid_file(pid_file)
    if pid is None or not munge_works(runner):
        raise LocalClusterError("munged did not start; see /var/log/munge/munged.log")
    return procs.record_for("munged", pid)


def start_slurmctld(cfg: LocalClusterConfig, log: Log,
                    runner: Runner = run_command) -> procs.DaemonRecord:
    """Start slurmctld (it daemonizes; its pid comes from SlurmctldPidFile).

    Raises:
        LocalClusterError: it failed or wrote no pid file.
    """
    pid_file = cfg.run_dir / "slurmctld.pid"
    pid_file.unlink(missing_ok=True)
    log("starting slurmctld")
    run_checked([which("slurmctld") or "slurmctld"], env=slurm_env(cfg), runner=runner)
    pid = procs.read_pid_file(pid_file)
    rec = procs.record_for("slurmctld", pid) if pid else None
    if rec is None:
        raise LocalClusterError(f"slurmctld did not start; see {cfg.log_dir / 'slurmctld.log'}")
    return rec


def start_slurmd(cfg: LocalClusterConfig, node: str, log: Log,
                 runner: Runner = run_command) -> procs.DaemonRecord:
    """Start ``slurmd -N <node>`` (its pid comes from the per-node SlurmdPidFile).

    Raises:
        LocalClusterError: it failed or wrote no pid file.
    """
    pid_file = cfg.run_dir / f"slurmd.{node}.pid"
    pid_file.unlink(missing_ok=True)
    (cfg.state_dir / "spool" / f"slurmd.{node}").mkdir(parents=True, exist_ok=True)
    log(f"starting slurmd for {node}")
    run_checked([which("slurmd") or "slurmd", "-N", node], env=slurm_env(cfg), runner=runner)
    pid = procs.read_pid_file(pid_file)
    rec = procs.record_for(f"slurmd:{node}", pid) if pid else None
    if rec is None:
        raise LocalClusterError(f"slurmd {node} did not start; see {cfg.log_dir}/slurmd.{node}.log")
    return rec


def query_nodes(cfg: LocalClusterConfig, runner: Runner = run_command) -> list[NodeState]:
    """The nodes as ``sinfo`` sees them; empty when sinfo is missing or slurmctld does not
    answer."""
    try:
        proc = runner(["sinfo", "-h", "-N", "-o", "%N|%T|%E"], timeout_s=10, env=slurm_env(cfg))
    except (subprocess.SubprocessError, OSError):
        return []
    if proc.returncode != 0:
        return []
    nodes = {}
    for line in proc.stdout.splitlines():
        parts = line.split("|")
        if len(parts) >= 2:
            reason = parts[2] if len(parts) > 2 and parts[2] != "none" else ""
            nodes[parts[0]] = NodeState(parts[0], parts[1].rstrip("*~#!%$@^-"), reason)
    return list(nodes.values())


def wait_healthy(cfg: LocalClusterConfig, timeout_s: float = 90.0,
                 runner: Runner = run_command) -> list[NodeState]:
    """Wait until every emulated node is idle (or running jobs), resuming any node that came
    up DOWN or DRAINED from an earlier run.

    Raises:
        LocalClusterError: not healthy after ``timeout_s`` seconds; the message lists each
            node's state and reason, and where the logs are.
    """
    deadline = time.monotonic() + timeout_s
    resumed: set[str] = set()
    nodes: list[NodeState] = []
    while time.monotonic() < deadline:
        nodes = query_nodes(cfg, runner)
        by_name = {n.name: n for n in nodes}
        if nodes and all(by_name.get(n) and by_name[n].state in HEALTHY_STATES
                         for n in cfg.node_names):
            return nodes
        for node in nodes:
            if node.state.startswith(("down", "drain")) and node.name not in resumed:
                try:
                    runner(["scontrol", "update", f"NodeName={node.name}", "State=RESUME"],
                           timeout_s=10, env=slurm_env(cfg))
                except (subprocess.SubprocessError, OSError):
                    pass
                resumed.add(node.name)
        time.sleep(0.5)
    detail = ", ".join(f"{n.name}={n.state}" + (f" ({n.reason})" if n.reason else "")
                       for n in nodes) or "slurmctld does not answer"
    raise LocalClusterError(f"the local cluster is not healthy after {timeout_s:.0f} s: {detail}. "
                            f"Logs: {cfg.log_dir}")
