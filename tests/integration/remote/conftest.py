"""Remote mode against a real sshd on loopback: the "head node" is this machine, reached over
SSH as root with a test key; its hpcflow is this checkout, named with --remote-hpcflow."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
#: What runs hpcflow "on the head node": this checkout, through the venv's python.
REMOTE_HPCFLOW = f"PYTHONPATH={REPO} {sys.executable} -m hpcflow"


@dataclass
class Head:
    """A head node on loopback and the local side's settings to reach it."""

    port: int
    host_pub: str
    key: Path
    known_hosts: Path
    remote_home: Path  # HPCFLOW_HOME of the remote sessions
    remote_dir: Path

    @property
    def host(self) -> str:
        return f"root@127.0.0.1:{self.port}"

    @property
    def accepted(self) -> Path:
        """hpcflow's own known_hosts on this side (keys accepted on first use)."""
        return self.remote_home.parent / "local" / "known_hosts"

    def trust(self) -> None:
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {self.host_pub}\n")

    def args(self, *extra: str) -> list[str]:
        return ["--host", self.host, "--identity", str(self.key), "--known-hosts",
                str(self.known_hosts), "--remote-dir", str(self.remote_dir), "--remote-hpcflow",
                REMOTE_HPCFLOW, *extra]

    def hpcflow(self, *args: str, global_args: tuple[str, ...] = (), timeout: float = 120,
                cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        """``hpcflow <remote options> <global_args> <args>`` run here, from a clean env."""
        cmd = [sys.executable, "-m", "hpcflow", *self.args(*global_args), *args]
        print("+", " ".join(cmd))
        env = {k: v for k, v in os.environ.items() if k != "HPCFLOW_HOME"}
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd,
                              env={**env, "HPCFLOW_HOME": str(self.remote_home.parent / "local")})
        print(proc.returncode, proc.stdout, proc.stderr, sep="\n")
        return proc


@pytest.fixture
def head(start_sshd, ssh_client_key, tmp_path) -> Head:
    """A head node whose sessions have their own HPCFLOW_HOME; its host key is trusted."""
    remote_home = tmp_path / "remote-state"
    sshd = start_sshd("head", {"HPCFLOW_HOME": str(remote_home), "OMP_NUM_THREADS": "1"})
    head = Head(sshd.port, sshd.host_pub, ssh_client_key, tmp_path / "known_hosts", remote_home,
                tmp_path / "remote runs 'q' $(id)")  # hostile: it reaches a shell
    head.trust()
    return head


@pytest.fixture(scope="session")
def local_cluster():  # noqa: ANN201
    """The local Slurm cluster, up (idempotent), as in tests/integration/slurm."""
    from hpcflow.local_cluster import manager
    from hpcflow.local_cluster.config import LocalClusterConfig

    cfg = LocalClusterConfig(hostname=socket.gethostname())
    manager.up(cfg, log=lambda m: print(f"local-cluster: {m}"))
    return cfg
