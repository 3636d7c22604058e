"""A moto server on loopback for the ParallelCluster --deep and EC2 facts tests.

Started once per module as a subprocess (``moto_server -H 127.0.0.1 -p <free port>``); every
test gets dummy credentials in its environment and the server's URL.
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
def aws_env(monkeypatch, tmp_path):
    """Dummy credentials and an isolated hpcflow cache, so nothing reaches a real account."""
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1",
                       "HPCFLOW_CACHE_DIR": str(tmp_path / "cache")}.items():
        monkeypatch.setenv(key, value)
    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(key, raising=False)
