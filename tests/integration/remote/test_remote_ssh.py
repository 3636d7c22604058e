"""`hpcflow --host` against a real sshd on loopback: host keys, a missing remote hpcflow, exit
codes passed through, and no upload left behind by a refused submit."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from hpcflow import __version__
from hpcflow.remote.session import INSTALL_LINE

REPO = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.sshd


def test_an_unknown_head_node_is_refused_with_how_to_accept_it(head):
    # what paramiko drops when it rewrites a file: a comment, a marker line, an unknown key type
    user_known_hosts = ("# my hosts, by hand\n"
                        f"@cert-authority *.example.org {head.host_pub.strip()}\n"
                        "old.example.org ssh-unknown-type AAAAB3NzaC1yc2EAAAADAQAB\n")
    head.known_hosts.write_text(user_known_hosts)
    proc = head.hpcflow("list", "--json")
    assert proc.returncode == 255
    err = json.loads(proc.stdout)["error"]
    assert "is not in" in err["message"] and f"ssh-keyscan -p {head.port} -H 127.0.0.1" in err["message"]
    assert "--accept-new-host-keys" in err["message"] and str(head.accepted) in err["message"]
    # accepted on first use: the key is saved in hpcflow's own file, and the command runs there
    proc = head.hpcflow("list", "--json", global_args=("--accept-new-host-keys",))
    assert proc.returncode == 0 and json.loads(proc.stdout)["data"] == []
    saved_key = head.host_pub.split()[1]
    assert saved_key in head.accepted.read_text()
    assert head.accepted.stat().st_mode & 0o077 == 0
    assert head.known_hosts.read_text() == user_known_hosts  # the user's file, untouched
    assert head.hpcflow("list", "--json").returncode == 0


def test_a_changed_key_in_hpcflows_own_file_is_refused_and_named(head, tmp_path):
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    head.known_hosts.write_text("")
    head.accepted.parent.mkdir(parents=True, exist_ok=True)
    head.accepted.write_text(f"[127.0.0.1]:{head.port} {Path(f'{other}.pub').read_text()}")
    proc = head.hpcflow("status", "1", global_args=("--accept-new-host-keys",))
    assert proc.returncode == 255 and "does NOT match" in proc.stderr
    assert f"ssh-keygen -f {head.accepted} -R '[127.0.0.1]:{head.port}'" in proc.stderr


def test_a_changed_host_key_is_refused_even_with_accept_new(head, tmp_path):
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    head.known_hosts.write_text(f"[127.0.0.1]:{head.port} {Path(f'{other}.pub').read_text()}")
    proc = head.hpcflow("status", "1", global_args=("--accept-new-host-keys",))
    assert proc.returncode == 255
    assert "does NOT match" in proc.stderr and "refused" in proc.stderr
    assert f"ssh-keygen -f {head.known_hosts} -R '[127.0.0.1]:{head.port}'" in proc.stderr


@pytest.mark.parametrize("command", [
    pytest.param("/nonexistent/bin/hpcflow", id="not-on-the-head-node"),
    pytest.param("PYTHONPATH=/nonexistent /usr/bin/env -i python3 -m hpcflow", id="no-module"),
])
def test_a_missing_remote_hpcflow_gives_the_install_line(head, tmp_path, command):
    spec = tmp_path / "job.yaml"
    spec.write_text("name: x\n")
    proc = head.hpcflow("submit", str(spec), global_args=("--remote-hpcflow", command))
    assert proc.returncode == 127
    assert f"hpcflow does not run on {head.host}" in proc.stderr
    assert INSTALL_LINE in proc.stderr and "--remote-hpcflow" in proc.stderr
    assert not head.remote_dir.exists()  # refused before anything was uploaded


def test_a_refused_spec_passes_its_exit_code_and_leaves_no_upload(head, tmp_path):
    spec = tmp_path / "my job.yaml"
    spec.write_text(yaml.safe_dump({"name": "bad", "nodes": 0, "time_limit": "5",
                                    "program": {"argv": ["true"]}}))
    proc = head.hpcflow("submit", str(spec))
    assert proc.returncode == 2
    # the remote hpcflow's own message, streamed back
    assert "nodes: " in proc.stderr and "time_limit" not in proc.stderr
    assert "nothing was submitted; removed" in proc.stderr
    assert list(head.remote_dir.iterdir()) == []


def test_a_dry_run_prints_the_remote_script_and_leaves_nothing(head, tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump({"name": "dry", "run_dir": "runs/dry", "time_limit": "5",
                                    "program": {"argv": ["true"]}}))
    proc = head.hpcflow("submit", "--dry-run", str(spec), "--set", "nodes=2")
    assert proc.returncode == 0, proc.stderr
    assert "#SBATCH --nodes=2" in proc.stdout
    # run_dir is relative to the spec, which lay in the run folder on the head node
    [line] = [ln for ln in proc.stdout.splitlines() if ln.startswith("export HPCFLOW_RUN_DIR=")]
    run_dir = shlex.split(line)[1].split("=", 1)[1]
    assert re.fullmatch(rf"{re.escape(str(head.remote_dir))}/job-\d{{8}}T\d{{6}}Z-\w{{6}}/runs/dry",
                        run_dir), run_dir
    assert list(head.remote_dir.iterdir()) == []


def test_the_key_can_come_from_the_ssh_agent(head, tmp_path):
    """No --identity and no key in ~/.ssh: the agent's key logs in."""
    sock = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        for _ in range(50):
            if sock.exists():
                break
            time.sleep(0.1)
        env = {**os.environ, "SSH_AUTH_SOCK": str(sock), "HOME": str(tmp_path / "empty-home")}
        subprocess.run(["ssh-add", "-q", str(head.key)], env=env, check=True)
        args = [a for a in head.args() if a not in ("--identity", str(head.key))]
        cmd = [sys.executable, "-m", "hpcflow", *args, "list", "--json"]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
        print(proc.stdout, proc.stderr)
        assert proc.returncode == 0 and json.loads(proc.stdout)["data"] == []
        # without the agent (and no key anywhere) the login is refused, with what to check
        env.pop("SSH_AUTH_SOCK")
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 255
        assert f"authentication failed for {head.host}" in json.loads(proc.stdout)["error"]["message"]
    finally:
        agent.terminate()
        agent.wait(10)


def test_another_hpcflow_version_on_the_head_node_is_a_warning(head):
    fake_version = ("sh -c 'if [ \"$1\" = --version ]; then echo \"hpcflow, version 9.9\"; "
                    f"else exec {sys.executable} -m hpcflow \"$@\"; fi' hpcflow")
    proc = head.hpcflow("list", "--json",
                        global_args=("--remote-hpcflow", f"PYTHONPATH={REPO} {fake_version}"))
    assert proc.returncode == 0 and json.loads(proc.stdout)["data"] == []
    assert f"warning: hpcflow 9.9 on {head.host}, {__version__} here" in proc.stderr
