"""Fixtures shared by integration test folders."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def moto_s3_url(tmp_path_factory):
    """URL of a moto server on 127.0.0.1 (a free port), stopped after the module."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exe = Path(sys.executable).with_name("moto_server")
    cmd = [str(exe)] if exe.exists() else [shutil.which("moto_server") or "moto_server"]
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen([*cmd, "-H", "127.0.0.1", "-p", str(port)], stdout=fh,
                                stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(url + "/moto-api/", timeout=1).read()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"moto_server did not start:\n{log.read_text()}")
            time.sleep(0.2)
    yield url
    proc.terminate()
    proc.wait(timeout=10)
