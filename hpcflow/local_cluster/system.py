"""The machine-wide side of the local cluster: root, packages, ports, slurm.conf, /etc/hosts.

Every path outside the cluster's state folder comes from a :class:`SystemPaths` and every
command runs through the runner it is given (:mod:`hpcflow.command`), so a test can point both
at a temporary folder and at recorded output.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hpcflow.command import Runner, evidence, run_command
from hpcflow.errors import LocalClusterError
from hpcflow.fsutil import write_atomic
from hpcflow.local_cluster.config import MARKER, LocalClusterConfig, render_slurm_conf

PACKAGES = ("slurm-wlm", "munge")
#: The one apt-get installer (scripts/install.sh calls it too).
APT_INSTALL = Path(__file__).resolve().parent / "apt-install.sh"

Log = Callable[[str], None]


@dataclass(frozen=True)
class SystemPaths:
    """The files outside the state folder that the local cluster reads or writes.

    Attributes:
        slurm_conf: the system slurm.conf (so a plain ``sbatch`` finds the cluster).
        hosts: the hosts file that makes node names resolve to 127.0.0.1 (hosts(5)).
        munge_key: munged's key (munged(8) default).
        munge_run: munged's socket and pid folder (munged(8) default).
    """

    slurm_conf: Path = Path("/etc/slurm/slurm.conf")
    hosts: Path = Path("/etc/hosts")
    munge_key: Path = Path("/etc/munge/munge.key")
    munge_run: Path = Path("/run/munge")


#: The real machine's paths.
SYSTEM_PATHS = SystemPaths()


def run_checked(argv: Sequence[str], *, runner: Runner = run_command,
                env: Mapping[str, str] | None = None,
                timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` with ``runner`` and return its result when it exits 0.

    Raises:
        LocalClusterError: the program is missing, it ran past ``timeout_s`` seconds, or it
            exited non-zero (the message has the exit status, the command and its stderr tail).
    """
    try:
        proc = runner(list(argv), env=env, timeout_s=timeout_s)
    except FileNotFoundError:
        raise LocalClusterError(f"{argv[0]}: command not found") from None
    except subprocess.TimeoutExpired:
        raise LocalClusterError(f"{' '.join(argv)}: no answer after {timeout_s:.0f} s") from None
    if proc.returncode != 0:
        raise LocalClusterError(f"{argv[0]} failed {evidence(argv, proc)}")
    return proc


def which(name: str) -> str | None:
    """``name`` on PATH or in the system folders daemons live in (``/usr/sbin``...)."""
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin")


def installed_slurm_version(runner: Runner = run_command) -> tuple[int, int, int] | None:
    """The installed Slurm's version from ``slurmctld -V`` (``slurm-wlm 22.05.8``), or None when
    slurmctld is missing or says nothing readable (:func:`hpcflow.slurm.versions.parse_version`).
    """
    from hpcflow.slurm.versions import parse_version

    try:
        result = runner(["slurmctld", "-V"])
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_version(result.stdout) if result.returncode == 0 else None


def check_root() -> None:
    """Raise unless running as root (slurmd must be root to start tasks; apt needs root)."""
    if os.geteuid() != 0:
        raise LocalClusterError(
            "the local cluster needs root: slurmd runs as root to start job tasks and missing "
            "packages are installed with apt-get. Run: sudo hpcflow local-cluster up"
        )


def ensure_packages(log: Log, *, runner: Runner = run_command) -> None:
    """Install slurm-wlm and munge with ``apt-install.sh`` when their daemons are missing.

    Raises:
        LocalClusterError: they are missing and apt-get is not available, or apt-get failed.
    """
    missing = [d for d in ("slurmctld", "slurmd", "munged", "sbatch") if not which(d)]
    if not missing:
        return
    if not shutil.which("apt-get"):
        raise LocalClusterError(
            f"{', '.join(missing)} not found and this machine has no apt-get: install Slurm "
            "(slurmctld, slurmd, client commands) and munge with the system's package manager, "
            "then run hpcflow local-cluster up again"
        )
    log(f"installing {' '.join(PACKAGES)} with apt-get (missing: {', '.join(missing)})")
    run_checked(["bash", str(APT_INSTALL), *PACKAGES], runner=runner, timeout_s=1800)


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
#: Partitions are not among them: ``scontrol reconfigure`` makes a running slurmctld read its
#: partitions again (scontrol(1), reconfigure), which ``up`` does when slurm.conf changed.
SHAPE_KEYS = ("SlurmctldHost", "SlurmctldPort", "NodeName", "StateSaveLocation")


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


def write_config(cfg: LocalClusterConfig, paths: SystemPaths) -> None:
    """Write slurm.conf into the state dir and to ``paths.slurm_conf`` (so plain ``sbatch``
    works), refusing to overwrite a slurm.conf that hpcflow did not write."""
    text = render_slurm_conf(cfg)
    for sub in ("etc", "state", "spool", "log", "run"):
        (cfg.state_dir / sub).mkdir(parents=True, exist_ok=True)
    write_atomic(cfg.slurm_conf_path, text)
    if paths.slurm_conf.exists():
        current = paths.slurm_conf.read_text(errors="replace")
        if MARKER not in current:
            raise LocalClusterError(
                f"{paths.slurm_conf} exists and was not written by hpcflow: this machine "
                "already has a Slurm configuration. hpcflow will not overwrite it; move it "
                "aside to use the local cluster"
            )
        if current == text:
            return
    paths.slurm_conf.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(paths.slurm_conf, text)


def ensure_hosts(cfg: LocalClusterConfig, paths: SystemPaths) -> None:
    """Make every emulated node name resolve to 127.0.0.1 (a job's nodelist names them)."""
    hosts = paths.hosts
    text = hosts.read_text() if hosts.exists() else ""
    known = {name for line in text.splitlines() if not line.lstrip().startswith("#")
             for name in line.split()[1:]}
    missing = [n for n in cfg.node_names if n not in known]
    if missing:
        line = "127.0.0.1 " + " ".join(missing) + "  # hpcflow local-cluster\n"
        with hosts.open("a") as fh:
            if text and not text.endswith("\n"):
                fh.write("\n")
            fh.write(line)
