"""Start, stop and inspect the local emulated Slurm cluster.

``up`` installs what is missing (Debian/Ubuntu, as root), writes ``slurm.conf``, then starts
munged (as the munge user), slurmctld and one ``slurmd -N <node>`` per emulated node, and waits
until every node is idle. It is idempotent: daemons that still run are kept, dead ones are
restarted (slurmctld reloads its saved job state, so queued and requeued jobs survive).
``down`` stops only the daemons that ``up`` started, by pid and start time.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hpcflow.errors import LocalClusterError
from hpcflow.fsutil import write_atomic
from hpcflow.local_cluster import processes as procs
from hpcflow.local_cluster.config import MARKER, LocalClusterConfig, render_slurm_conf

SYSTEM_SLURM_CONF = Path("/etc/slurm/slurm.conf")
HOSTS_FILE = Path("/etc/hosts")
MUNGE_KEY = Path("/etc/munge/munge.key")
MUNGE_RUN = Path("/run/munge")
PACKAGES = ("slurm-wlm", "munge")
HEALTHY_STATES = {"idle", "mixed", "allocated", "completing"}

Log = Callable[[str], None]


@dataclass
class NodeState:
    """One emulated node as ``sinfo`` reports it."""

    name: str
    state: str
    reason: str = ""


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


def _records_path(cfg: LocalClusterConfig) -> Path:
    return cfg.run_dir / "daemons.json"


def _env(cfg: LocalClusterConfig) -> dict[str, str]:
    return {**os.environ, "SLURM_CONF": str(cfg.slurm_conf_path)}


def _run(argv: list[str], *, env: dict[str, str] | None = None, timeout_s: float = 60.0,
         check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout_s,
                              check=False)
    except FileNotFoundError:
        raise LocalClusterError(f"{argv[0]}: command not found") from None
    except subprocess.TimeoutExpired:
        raise LocalClusterError(f"{' '.join(argv)}: no answer after {timeout_s:.0f} s") from None
    if check and proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-8:])
        raise LocalClusterError(f"{' '.join(argv)} failed (exit {proc.returncode}):\n{tail}")
    return proc


# --- preconditions -------------------------------------------------------------------------

def check_root() -> None:
    """Raise unless running as root (slurmd must be root to start tasks; apt needs root)."""
    if os.geteuid() != 0:
        raise LocalClusterError(
            "the local cluster needs root: slurmd runs as root to start job tasks and missing "
            "packages are installed with apt-get. Run: sudo hpcflow local-cluster up"
        )


def ensure_packages(log: Log) -> None:
    """Install slurm-wlm and munge with apt-get when their daemons are missing.

    Raises:
        LocalClusterError: they are missing and apt-get is not available, or apt-get failed.
    """
    missing = [d for d in ("slurmctld", "slurmd", "munged", "sbatch") if not _which(d)]
    if not missing:
        return
    if not shutil.which("apt-get"):
        raise LocalClusterError(
            f"{', '.join(missing)} not found and this machine has no apt-get: install Slurm "
            "(slurmctld, slurmd, client commands) and munge with the system's package manager, "
            "then run hpcflow local-cluster up again"
        )
    log(f"installing {' '.join(PACKAGES)} with apt-get (missing: {', '.join(missing)})")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    _run(["apt-get", "update", "-qq"], env=env, timeout_s=600)
    _run(["apt-get", "install", "-y", "-qq", *PACKAGES], env=env, timeout_s=1200)


def _which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin")


def port_in_use(port: int) -> bool:
    """True when something already listens on 127.0.0.1:``port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def check_ports(cfg: LocalClusterConfig, alive: set[str]) -> None:
    """Raise if a port the cluster needs is taken by a process hpcflow did not start."""
    wanted = [("slurmctld", cfg.controller_port)]
    wanted += [(f"slurmd:{n}", p) for n, p in zip(cfg.node_names, cfg.node_ports, strict=True)]
    for name, port in wanted:
        if name not in alive and port_in_use(port):
            raise LocalClusterError(
                f"port {port} (for {name}) is already in use by another process. Stop it "
                "(is another Slurm running? try: hpcflow local-cluster down), or choose free "
                "ports with --controller-port/--node-base-port"
            )


#: slurm.conf keys that the running daemons were started with and cannot change under them.
SHAPE_KEYS = ("SlurmctldHost", "SlurmctldPort", "NodeName", "PartitionName", "StateSaveLocation")


def _shape(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip().startswith(SHAPE_KEYS)]


def check_same_shape(cfg: LocalClusterConfig) -> None:
    """Raise when daemons run with a slurm.conf whose nodes or ports differ from ``cfg``.

    Rewriting slurm.conf under running daemons would point every client command at a controller
    port or nodes that nothing serves, breaking the cluster for every job on it.
    """
    try:
        current = cfg.slurm_conf_path.read_text(errors="replace")
    except OSError:
        return
    old, new = _shape(current), _shape(render_slurm_conf(cfg))
    if old != new:
        changed = "; ".join(sorted(set(new) - set(old))) or "fewer nodes"
        raise LocalClusterError(
            f"the local cluster is already running with other nodes or ports ({cfg.slurm_conf_path}); "
            f"the options asked for {changed}. Run `hpcflow local-cluster up` with the options it "
            "was started with, or `hpcflow local-cluster down` first (it stops the running jobs)"
        )


# --- files ----------------------------------------------------------------------------------

def write_config(cfg: LocalClusterConfig) -> None:
    """Write slurm.conf into the state dir and to /etc/slurm/slurm.conf (so plain ``sbatch``
    works), refusing to overwrite a slurm.conf that hpcflow did not write."""
    text = render_slurm_conf(cfg)
    for sub in ("etc", "state", "spool", "log", "run"):
        (cfg.state_dir / sub).mkdir(parents=True, exist_ok=True)
    write_atomic(cfg.slurm_conf_path, text)
    if SYSTEM_SLURM_CONF.exists():
        current = SYSTEM_SLURM_CONF.read_text(errors="replace")
        if MARKER not in current:
            raise LocalClusterError(
                f"{SYSTEM_SLURM_CONF} exists and was not written by hpcflow: this machine "
                "already has a Slurm configuration. hpcflow will not overwrite it; move it "
                "aside to use the local cluster"
            )
        if current == text:
            return
    SYSTEM_SLURM_CONF.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(SYSTEM_SLURM_CONF, text)


def ensure_hosts(cfg: LocalClusterConfig) -> None:
    """Make every emulated node name resolve to 127.0.0.1 (a job's nodelist names them)."""
    text = HOSTS_FILE.read_text() if HOSTS_FILE.exists() else ""
    known = {name for line in text.splitlines() if not line.lstrip().startswith("#")
             for name in line.split()[1:]}
    missing = [n for n in cfg.node_names if n not in known]
    if missing:
        line = "127.0.0.1 " + " ".join(missing) + "  # hpcflow local-cluster\n"
        with HOSTS_FILE.open("a") as fh:
            if text and not text.endswith("\n"):
                fh.write("\n")
            fh.write(line)


# --- daemons --------------------------------------------------------------------------------

def munge_works() -> bool:
    """True when a munge credential round-trips (munged is up and the key is readable)."""
    if not (_which("munge") and _which("unmunge")):
        return False
    try:
        cred = subprocess.run(["munge", "-n"], capture_output=True, timeout=5, check=True).stdout
        subprocess.run(["unmunge"], input=cred, capture_output=True, timeout=5, check=True)
    except (subprocess.SubprocessError, OSError):
        return False
    return True


def start_munged(log: Log) -> procs.DaemonRecord | None:
    """Start munged as the munge user unless a working one already runs.

    Returns:
        The record of the daemon started, or None when an existing munged was reused.
    """
    if munge_works():
        return None
    if not MUNGE_KEY.exists():
        log("creating a munge key")
        _run(["runuser", "-u", "munge", "--", "mungekey", "-c", "-f", "-k", str(MUNGE_KEY)])
    MUNGE_RUN.mkdir(parents=True, exist_ok=True)
    shutil.chown(MUNGE_RUN, "munge", "munge")
    pid_file = MUNGE_RUN / "munged.pid"
    pid_file.unlink(missing_ok=True)
    log("starting munged")
    _run(["runuser", "-u", "munge", "--", _which("munged") or "munged", "--force"])
    pid = procs.read_pid_file(pid_file)
    if pid is None or not munge_works():
        raise LocalClusterError("munged did not start; see /var/log/munge/munged.log")
    return procs.record_for("munged", pid)


def start_slurmctld(cfg: LocalClusterConfig, log: Log) -> procs.DaemonRecord:
    """Start slurmctld (it daemonizes; its pid comes from SlurmctldPidFile)."""
    pid_file = cfg.run_dir / "slurmctld.pid"
    pid_file.unlink(missing_ok=True)
    log("starting slurmctld")
    _run([_which("slurmctld") or "slurmctld"], env=_env(cfg))
    pid = procs.read_pid_file(pid_file)
    rec = procs.record_for("slurmctld", pid) if pid else None
    if rec is None:
        raise LocalClusterError(f"slurmctld did not start; see {cfg.log_dir / 'slurmctld.log'}")
    return rec


def start_slurmd(cfg: LocalClusterConfig, node: str, log: Log) -> procs.DaemonRecord:
    """Start ``slurmd -N <node>`` (its pid comes from the per-node SlurmdPidFile)."""
    pid_file = cfg.run_dir / f"slurmd.{node}.pid"
    pid_file.unlink(missing_ok=True)
    (cfg.state_dir / "spool" / f"slurmd.{node}").mkdir(parents=True, exist_ok=True)
    log(f"starting slurmd for {node}")
    _run([_which("slurmd") or "slurmd", "-N", node], env=_env(cfg))
    pid = procs.read_pid_file(pid_file)
    rec = procs.record_for(f"slurmd:{node}", pid) if pid else None
    if rec is None:
        raise LocalClusterError(f"slurmd {node} did not start; see {cfg.log_dir}/slurmd.{node}.log")
    return rec


def query_nodes(cfg: LocalClusterConfig) -> list[NodeState]:
    """The nodes as ``sinfo`` sees them; empty when slurmctld does not answer."""
    if not _which("sinfo"):
        return []
    try:
        proc = subprocess.run(["sinfo", "-h", "-N", "-o", "%N|%T|%E"], capture_output=True,
                              text=True, timeout=10, env=_env(cfg), check=False)
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


def wait_healthy(cfg: LocalClusterConfig, timeout_s: float = 90.0) -> list[NodeState]:
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
        nodes = query_nodes(cfg)
        by_name = {n.name: n for n in nodes}
        if nodes and all(by_name.get(n) and by_name[n].state in HEALTHY_STATES
                         for n in cfg.node_names):
            return nodes
        for node in nodes:
            if node.state.startswith(("down", "drain")) and node.name not in resumed:
                subprocess.run(["scontrol", "update", f"NodeName={node.name}", "State=RESUME"],
                               capture_output=True, timeout=10, env=_env(cfg), check=False)
                resumed.add(node.name)
        time.sleep(0.5)
    detail = ", ".join(f"{n.name}={n.state}" + (f" ({n.reason})" if n.reason else "")
                       for n in nodes) or "slurmctld does not answer"
    raise LocalClusterError(f"the local cluster is not healthy after {timeout_s:.0f} s: {detail}. "
                            f"Logs: {cfg.log_dir}")


# --- the three verbs ------------------------------------------------------------------------

def up(cfg: LocalClusterConfig, *, log: Log = lambda _m: None, install: bool = True) -> ClusterStatus:
    """Bring the local cluster up (idempotent) and return its status.

    Raises:
        LocalClusterError: not root, packages missing without apt, a port taken by another
            process, a foreign /etc/slurm/slurm.conf, or a daemon that fails to start.
    """
    check_root()
    if install:
        ensure_packages(log)
    records = procs.load_records(_records_path(cfg))
    alive = {k for k, r in records.items() if procs.is_alive(r)}
    if alive:
        check_same_shape(cfg)
    check_ports(cfg, alive)
    wanted = {"slurmctld", *(f"slurmd:{n}" for n in cfg.node_names)}
    if wanted <= alive:
        log("the local cluster is already running: reusing it")
    write_config(cfg)
    ensure_hosts(cfg)
    if "munged" not in alive:
        rec = start_munged(log)
        if rec:
            records["munged"] = rec
        else:
            records.pop("munged", None)
    if "slurmctld" not in alive:
        records["slurmctld"] = start_slurmctld(cfg, log)
        procs.save_records(_records_path(cfg), records)
    for node in cfg.node_names:
        if f"slurmd:{node}" not in alive:
            records[f"slurmd:{node}"] = start_slurmd(cfg, node, log)
            procs.save_records(_records_path(cfg), records)
    procs.save_records(_records_path(cfg), records)
    wait_healthy(cfg)
    return status(cfg)


def down(cfg: LocalClusterConfig, *, log: Log = lambda _m: None) -> list[str]:
    """Stop the daemons hpcflow started (slurmds, then slurmctld, then munged).

    Returns:
        The names of the daemons that were running and were stopped.
    """
    path = _records_path(cfg)
    records = procs.load_records(path)
    order = sorted(records, key=lambda k: (not k.startswith("slurmd:"), k == "munged", k))
    stopped = []
    for name in order:
        if procs.stop(records[name]):
            log(f"stopped {name} (pid {records[name].pid})")
            stopped.append(name)
    path.unlink(missing_ok=True)
    return stopped


def status(cfg: LocalClusterConfig) -> ClusterStatus:
    """Report the recorded daemons and the nodes as slurmctld sees them (no changes made)."""
    records = procs.load_records(_records_path(cfg))
    daemons = {k: r.pid for k, r in records.items() if procs.is_alive(r)}
    dead = sorted(k for k in records if k not in daemons)
    nodes = query_nodes(cfg) if "slurmctld" in daemons else []
    by_name = {n.name: n for n in nodes}
    healthy = bool(records) and not dead and all(
        by_name.get(n) and by_name[n].state in HEALTHY_STATES for n in cfg.node_names)
    return ClusterStatus(running=healthy, daemons=daemons, dead=dead, nodes=nodes,
                         slurm_conf=str(cfg.slurm_conf_path), log_dir=str(cfg.log_dir))
