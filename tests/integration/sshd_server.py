"""A real sshd on loopback for tests (fixtures ``ssh_client_key`` and ``start_sshd``), used by
the bootstrap fan-out and remote-mode tests; tests/integration/conftest.py registers them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass
class Sshd:
    """One sshd on 127.0.0.1: its port, its host public key line and its per-session env."""

    port: int
    host_pub: str
    proc: object


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def ssh_client_key(tmp_path: Path) -> Path:
    import subprocess

    key = tmp_path / "client_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    return key


@pytest.fixture
def start_sshd(tmp_path: Path, ssh_client_key: Path):
    """``start_sshd(name, env) -> Sshd``: a real sshd on a free loopback port (never 6817-6819),
    with its own host key, the test's client key authorized, and ``env`` set in its sessions
    (sshd_config SetEnv). Stopped at the end of the test."""
    import shutil
    import socket
    import subprocess
    import time

    sshd_bin = shutil.which("sshd") or "/usr/sbin/sshd"
    assert Path(sshd_bin).exists(), "sshd not found (scripts/install.sh --dev installs openssh-server)"
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # sshd's privilege separation dir
    started: list[subprocess.Popen] = []

    def start(name: str, env: dict[str, str]) -> Sshd:
        d = tmp_path / f"sshd-{name}"
        d.mkdir()
        hostkey = d / "host_ed25519"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(hostkey)],
                       check=True)
        auth = d / "authorized_keys"
        auth.write_text(Path(f"{ssh_client_key}.pub").read_text())
        auth.chmod(0o600)
        port = _free_port()
        while port in (6817, 6818, 6819):
            port = _free_port()
        setenv = " ".join(f"{k}={v}" for k, v in env.items())
        (d / "sshd_config").write_text(
            f"Port {port}\nListenAddress 127.0.0.1\nHostKey {hostkey}\nPidFile {d}/sshd.pid\n"
            f"AuthorizedKeysFile {auth}\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nPubkeyAuthentication yes\n"
            "PermitRootLogin prohibit-password\nSubsystem sftp internal-sftp\n"
            + (f"SetEnv {setenv}\n" if setenv else ""))
        with open(d / "sshd.log", "w") as log:
            proc = subprocess.Popen([sshd_bin, "-D", "-e", "-f", str(d / "sshd_config")],
                                    stdout=log, stderr=subprocess.STDOUT)
        started.append(proc)
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"sshd did not start: {(d / 'sshd.log').read_text()}") from None
                time.sleep(0.1)
        return Sshd(port, Path(f"{hostkey}.pub").read_text().strip(), proc)

    try:
        yield start
    finally:
        for proc in started:
            proc.terminate()
            proc.wait(timeout=10)
