"""`hpcflow bootstrap --hosts` against two real sshd daemons on loopback (two ports = two hosts)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.sshd


def _host_env(sandbox, name: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in sandbox.env.items() if k != "HOME"}
    env["HPCFLOW_BOOTSTRAP_PREFIX"] = str(sandbox.root.parent / f"host-{name}")
    env["PATH"] = f"{sandbox.env['PATH'].split(':', 1)[0]}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
    return {**env, **extra}


def _known_hosts(path: Path, *entries: tuple[int, str]) -> Path:
    path.write_text("".join(f"[127.0.0.1]:{port} {key}\n" for port, key in entries))
    return path


def _bootstrap(*args: str, tmp: Path):
    cmd = [sys.executable, "-m", "hpcflow", "bootstrap", "--user", "root", *args]
    print("+", " ".join(cmd))
    # Its own hpcflow state folder: keys accepted on first use go there, never into the real
    # one, where a later test's sshd on the same random port would meet a stale key.
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "200",
                               "HPCFLOW_HOME": str(tmp / "hpcflow-home")})
    print(proc.stdout, proc.stderr, sep="\n")
    return proc


def test_two_hosts_one_failing_a_step(sandbox, start_sshd, ssh_client_key, tmp_path):
    good = start_sshd("good", _host_env(sandbox, "good"))
    bad = start_sshd("bad", _host_env(sandbox, "bad", HPCFLOW_STUB_GPUS="0"))
    kh = _known_hosts(tmp_path / "known_hosts", (good.port, good.host_pub), (bad.port, bad.host_pub))
    proc = _bootstrap("--hosts", f"127.0.0.1:{good.port},127.0.0.1:{bad.port}", "--steps",
                      "efa,nccl", "--identity", str(ssh_client_key), "--known-hosts", str(kh),
                      "--log-dir", str(tmp_path / "logs"), tmp=tmp_path)
    assert proc.returncode == 1
    rows = {ln.split("│")[1].strip(): ln for ln in proc.stdout.splitlines()
            if ln.count("│") >= 5 and "127.0.0.1" in ln}
    assert "ok" in rows[f"root@127.0.0.1:{good.port}"]
    assert "FAILED" in rows[f"root@127.0.0.1:{bad.port}"]
    assert "cannot choose CUDA architectures" in rows[f"root@127.0.0.1:{bad.port}"]
    # the failing host's log tail is shown
    assert f"--- root@127.0.0.1:{bad.port}: last lines of its log ---" in proc.stderr
    assert "20-nccl: error: no GPU compute capability from nvidia-smi" in proc.stderr
    assert "1 of 2 hosts succeeded" in proc.stderr
    good_root = sandbox.root.parent / "host-good"
    assert (good_root / "opt/hpcflow/nccl/2.27.7-1/lib/gencode.txt").exists()
    assert "EFA installer version: 1.34.0" in (good_root / "opt/amazon/efa_installed_packages").read_text()
    assert not (sandbox.root.parent / "host-bad/opt/hpcflow/nccl").exists()
    assert "installed EFA installer 1.34.0" in (tmp_path / f"logs/root@127.0.0.1:{good.port}.log").read_text()


def test_second_run_over_ssh_has_nothing_to_do(sandbox, start_sshd, ssh_client_key, tmp_path):
    a = start_sshd("a", _host_env(sandbox, "a"))
    kh = _known_hosts(tmp_path / "known_hosts", (a.port, a.host_pub))
    args = ("--hosts", f"127.0.0.1:{a.port}", "--steps", "efa", "--identity", str(ssh_client_key),
            "--known-hosts", str(kh), "--json")
    first = _bootstrap(*args, tmp=tmp_path)
    assert first.returncode == 0, first.stdout
    second = json.loads(_bootstrap(*args, tmp=tmp_path).stdout)
    host = second["data"]["hosts"][0]
    assert host["ok"] and host["summary"] == "efa: installer 1.34.0 already installed, nothing to do"


def test_a_changed_host_key_is_refused(sandbox, start_sshd, ssh_client_key, tmp_path):
    a = start_sshd("a", _host_env(sandbox, "a"))
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    kh = _known_hosts(tmp_path / "known_hosts", (a.port, Path(f"{other}.pub").read_text().strip()))
    proc = _bootstrap("--hosts", f"127.0.0.1:{a.port}", "--steps", "efa", "--identity",
                      str(ssh_client_key), "--known-hosts", str(kh), "--json", tmp=tmp_path)
    assert proc.returncode == 1
    host = json.loads(proc.stdout)["data"]["hosts"][0]
    assert host["exit_code"] is None
    assert f"does NOT match {kh}" in host["summary"] and "SHA256:" in host["summary"]
    assert f"ssh-keygen -f {kh} -R '[127.0.0.1]:{a.port}'" in host["summary"]
    assert not (sandbox.root.parent / "host-a").exists()


def test_an_unknown_host_is_refused_unless_accepted(sandbox, start_sshd, ssh_client_key, tmp_path):
    a = start_sshd("a", _host_env(sandbox, "a"))
    kh = tmp_path / "known_hosts"
    kh.write_text("")
    args = ("--hosts", f"127.0.0.1:{a.port}", "--steps", "efa", "--dry-run", "--identity",
            str(ssh_client_key), "--known-hosts", str(kh), "--json")
    refused = _bootstrap(*args, tmp=tmp_path)
    assert refused.returncode == 1
    assert f"is not in {kh}: refused" in json.loads(refused.stdout)["data"]["hosts"][0]["summary"]
    accepted = _bootstrap(*args, "--accept-new-host-keys", tmp=tmp_path)
    assert accepted.returncode == 0, accepted.stdout
    assert not (sandbox.root.parent / "host-a").exists()  # a dry run changes nothing


def test_a_key_accepted_on_first_use_is_saved_and_a_later_change_refused(
        sandbox, start_sshd, ssh_client_key, tmp_path):
    a = start_sshd("a", _host_env(sandbox, "a"))
    home = tmp_path / "home"  # no ~/.ssh, no hpcflow state folder yet
    args = ("--hosts", f"127.0.0.1:{a.port}", "--steps", "efa", "--dry-run", "--identity",
            str(ssh_client_key), "--accept-new-host-keys", "--json")

    def run():
        cmd = [sys.executable, "-m", "hpcflow", "bootstrap", "--user", "root", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                              env={**{k: v for k, v in os.environ.items()
                                      if k not in ("HPCFLOW_HOME", "XDG_STATE_HOME")},
                                   "HOME": str(home), "COLUMNS": "200"})

    first = run()
    assert first.returncode == 0, first.stdout + first.stderr
    saved = home / ".local/state/hpcflow/known_hosts"  # hpcflow's own file
    assert f"[127.0.0.1]:{a.port} " in saved.read_text()
    assert oct(saved.stat().st_mode & 0o777) == "0o600"
    assert oct(saved.parent.stat().st_mode & 0o777) == "0o700"
    assert not (home / ".ssh" / "known_hosts").exists()  # the user's file is only read
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    _known_hosts(saved, (a.port, Path(f"{other}.pub").read_text().strip()))  # the host "changed"
    again = run()
    assert again.returncode == 1
    assert "does NOT match" in json.loads(again.stdout)["data"]["hosts"][0]["summary"]
