"""Fixtures shared by integration test folders: a moto server on loopback (AWS is never
reachable; boto3 and ParallelCluster's validators talk to it through ``endpoint_url``), started
once per module as a subprocess (``moto_server -H 127.0.0.1 -p <free port>``), and a real full
disk (a 64 KiB tmpfs).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from sshd_server import ssh_client_key, start_sshd  # noqa: F401 - fixtures for every folder


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _moto_server_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("moto_server")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("moto_server")
    if found:
        return [found]
    return [sys.executable, "-m", "moto.server"]


@pytest.fixture(scope="module")
def moto_url(tmp_path_factory) -> str:
    """URL of a fresh moto server; the server is stopped after the module."""
    port = _free_port()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    cmd = [*_moto_server_cmd(), "-H", "127.0.0.1", "-p", str(port)]
    print("starting:", " ".join(cmd))
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(url + "/moto-api/", timeout=1).read()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"moto_server did not start; log:\n{log.read_text()}")
            time.sleep(0.2)
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture
def full_disk(tmp_path) -> Path:
    """A folder on a 64 KiB tmpfs: a real full disk for checkpoint writes (ENOSPC).

    Needs root to mount, as the suite has (tests/run.sh runs as root); fails, never skips, when
    the mount is refused. Unmounted after the test.
    """
    disk = tmp_path / "small disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.fail(f"a small tmpfs cannot be mounted (the suite runs as root, as tests/run.sh "
                    f"does): {mounted.stderr.strip()}")
    yield disk
    subprocess.run(["umount", str(disk)], check=False)
