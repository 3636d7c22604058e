"""docs/spot.md says only what the code does: its command blocks run here as written (the
bootstrap one under a sandbox root, through HPCFLOW_BOOTSTRAP_PREFIX; spot-watch against a local
HTTP server that imitates IMDSv2), the exit codes it names are the ones returned, and its report
line is the one the report prints."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from hpcflow.jobs.notices import NoticeOutcome

REPO = Path(__file__).resolve().parents[3]
DOC = (REPO / "docs" / "spot.md").read_text()


def _bash_blocks() -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```", DOC, re.M | re.S)



@pytest.fixture
def node_env(tmp_path) -> dict[str, str]:
    """A node's PATH: an ``hpcflow`` command (this interpreter, this checkout) first."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "hpcflow"
    exe.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m hpcflow \"$@\"\n")
    exe.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def _run(line: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    print("+", line)
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", line], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    print(proc.stdout, proc.stderr, sep="\n")
    return proc


def test_the_doc_has_these_two_commands():
    assert [b.strip() for b in _bash_blocks()] == [
        "bash bootstrap/hpcflow-bootstrap.sh --steps spot-watch --env HPCFLOW_SPOT_INTERVAL_S=5",
        "hpcflow spot-watch --once"]


def test_the_bootstrap_block_installs_and_enables_the_service(node_env, tmp_path):
    root = tmp_path / "node-root"
    root.mkdir()
    proc = _run(_bash_blocks()[0], {**node_env, "HPCFLOW_BOOTSTRAP_PREFIX": str(root)})
    assert proc.returncode == 0
    unit = (root / "etc/systemd/system/hpcflow-spot-watch.service").read_text()
    assert f"ExecStart={tmp_path / 'bin/hpcflow'} spot-watch\n" in unit
    assert "EnvironmentFile=/etc/hpcflow/spot-watch.env\n" in unit
    settings = (root / "etc/hpcflow/spot-watch.env").read_text()
    assert "HPCFLOW_SPOT_INTERVAL_S=5\n" in settings
    assert "HPCFLOW_SPOT_ENDPOINT=http://169.254.169.254\n" in settings
    assert (root / "etc/systemd/system/multi-user.target.wants/hpcflow-spot-watch.service").is_symlink()


def test_the_check_block_and_its_exit_codes(node_env, imds, tmp_path):
    line = _bash_blocks()[1]
    env = {**node_env, "HPCFLOW_SPOT_ENDPOINT": imds.url, "HPCFLOW_SPOT_NODE": "n2"}
    ok = _run(line, env)
    assert ok.returncode == 0 and ok.stdout.strip() == "node n2: no interruption notice"
    # exit 7: nothing answers at the endpoint
    down = _run(line, {**env, "HPCFLOW_SPOT_ENDPOINT": "http://127.0.0.1:9"})
    assert down.returncode == 7 and "interruption notice: PUT http://127.0.0.1:9" in down.stderr
    # exit 4: a notice is posted and Slurm cannot be asked which jobs run here
    urllib.request.urlopen(urllib.request.Request(imds.url + "/_fake/notice", data=b"{}",
                                                  method="POST"), timeout=5).read()
    stub = tmp_path / "no-slurm"
    stub.mkdir()
    (stub / "squeue").write_text("#!/bin/sh\necho 'squeue: error: Unable to contact slurm "
                                 "controller (connect failure)' >&2\nexit 1\n")
    (stub / "squeue").chmod(0o755)
    failed = _run(line, {**env, "PATH": f"{stub}:{env['PATH']}"})
    assert failed.returncode == 4
    assert "node n2: interruption notice: terminate at " in failed.stdout
    assert "Unable to contact slurm controller" in failed.stderr


def test_the_report_line_in_the_doc_is_what_the_report_prints():
    [example] = re.findall(r"^```\n(attempt .*)\n```", DOC, re.M)
    t = 1_800_000_000
    assert NoticeOutcome(0, "terminate", "n1", t, t + 120, t + 1.2, 5).line() == example
