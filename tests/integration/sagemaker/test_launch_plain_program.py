"""The container launcher with a program that does not use hpcflow's runtime: torchrun starts
it once per rank with torchrun's variables and the toolkit's SM_* ones, its arguments and exit
status pass through untouched, and SIGTERM reaches it as it would without hpcflow."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from container_runner import free_port

pytestmark = [pytest.mark.dist, pytest.mark.timeout(120)]

# Each rank writes its line with one write(2) of under PIPE_BUF bytes, so the two ranks' lines on
# the shared pipe never interleave (print() writes its pieces separately when unbuffered).
PROGRAM = ("import os, sys, time; os.write(1, ('rank %s %s %s\\n' % (os.environ['RANK'], "
           "os.environ['SM_CURRENT_HOST'], sys.argv[1:])).encode()); "
           "time.sleep(float(sys.argv[1])); sys.exit(int(sys.argv[2]))")


def launch(tmp_path, *args: str) -> subprocess.Popen:
    config = tmp_path / "input" / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "resourceconfig.json").write_text(json.dumps(
        {"current_host": "algo-1", "hosts": ["algo-1"], "network_interface_name": "lo"}))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SM_", "RANK", "WORLD_SIZE", "MASTER_", "LOCAL_"))}
    env.update(SAGEMAKER_BASE_DIR=str(tmp_path), MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(free_port()), PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "hpcflow.sagemaker.launch", "--nproc-per-node",
                             "2", "--", sys.executable, "-c", PROGRAM, *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def test_plain_program_runs_with_its_arguments_and_its_exit_status(tmp_path):
    proc = launch(tmp_path, "0", "0")
    out, _ = proc.communicate(timeout=90)
    assert proc.returncode == 0, out
    lines = sorted(line for line in out.splitlines() if line.startswith("rank "))
    assert lines == ["rank 0 algo-1 ['0', '0']", "rank 1 algo-1 ['0', '0']"], out
    failing = launch(tmp_path, "0", "3")
    out, _ = failing.communicate(timeout=90)
    assert failing.returncode != 0, out  # torchrun reports the program's failure


def test_sigterm_reaches_a_plain_program(tmp_path):
    proc = launch(tmp_path, "60", "0")
    deadline = time.monotonic() + 60
    seen = ""
    while seen.count("rank ") < 2 and time.monotonic() < deadline:
        seen += proc.stdout.readline()
    assert seen.count("rank ") == 2, seen
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode != 0 and time.monotonic() - started < 30, out
