"""The command blocks of docs/admin-guide.md sections 9 and 10 run as written: upload against a
moto server (AWS_ENDPOINT_URL), bootstrap against two real sshd daemons (only the HOSTS and
SSH_USER lines are replaced), doctor on this machine."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "admin-guide.md"


def _blocks() -> list[str]:
    text = GUIDE.read_text()
    section = text[text.index("## 9. Bootstrap the nodes"):]
    return re.findall(r"```bash\n(.*?)```", section, re.S)


def _block(word: str) -> str:
    found = [b for b in _blocks() if word in b]
    assert len(found) == 1, f"expected one block with {word!r} in the admin guide"
    return found[0]


def _run(script: str, env: dict[str, str], cwd: Path):
    env = {**env, "PATH": f"{Path(sys.executable).parent}:{env.get('PATH', os.environ['PATH'])}",
           "COLUMNS": "200"}
    print("+", script)
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=300)
    print(proc.stdout, proc.stderr, sep="\n")
    return proc


def test_every_block_of_the_sections_is_run_here():
    assert len(_blocks()) == 3


@pytest.mark.moto
def test_upload_block(moto_url, tmp_path):
    import boto3

    env = {**os.environ, "AWS_ENDPOINT_URL": moto_url, "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=moto_url,
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    s3.create_bucket(Bucket="example-cluster-scripts")
    proc = _run(_block("upload-bootstrap"), env, tmp_path)
    assert proc.returncode == 0
    assert "s3://example-cluster-scripts/hpcflow/hpcflow-bootstrap.sh" in proc.stdout
    # the example spec carries exactly the action the command prints
    spec = (GUIDE.parents[1] / "pcluster_configs/p5-fsx.spec.yaml").read_text()
    assert "script: s3://example-cluster-scripts/hpcflow/hpcflow-bootstrap.sh" in proc.stdout
    assert "script: s3://example-cluster-scripts/hpcflow/hpcflow-bootstrap.sh" in spec


@pytest.mark.sshd
def test_bootstrap_block(sandbox, start_sshd, ssh_client_key, tmp_path):
    hosts = []
    for name in ("n1", "n2"):
        env = {k: v for k, v in sandbox.env.items() if k != "HOME"}
        env["HPCFLOW_BOOTSTRAP_PREFIX"] = str(tmp_path / f"root-{name}")
        env["PATH"] = f"{sandbox.env['PATH'].split(':', 1)[0]}:/usr/local/bin:/usr/bin:/bin"
        hosts.append(start_sshd(name, env))
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    shutil.copy(ssh_client_key, home / ".ssh/id_ed25519")
    (home / ".ssh/known_hosts").write_text(
        "".join(f"[127.0.0.1]:{h.port} {h.host_pub}\n" for h in hosts))
    script = _block("hpcflow bootstrap")
    script = re.sub(r"^HOSTS=.*$", "HOSTS=" + ",".join(f"127.0.0.1:{h.port}" for h in hosts),
                    script, flags=re.M)
    script = re.sub(r"^SSH_USER=.*$", "SSH_USER=root", script, flags=re.M)
    proc = _run(script, {**os.environ, "HOME": str(home)}, tmp_path)
    assert proc.returncode == 0
    assert "2 of 2 hosts succeeded" in proc.stdout
    for h, name in zip(hosts, ("n1", "n2"), strict=True):
        assert (tmp_path / f"bootstrap-logs/root@127.0.0.1:{h.port}.log").exists()
        root = tmp_path / f"root-{name}"
        assert (root / "opt/hpcflow/nccl-tests/2.17.6/bin/all_reduce_perf").exists()
        assert (root / "opt/slurm/etc/scripts/prolog.d/90-hpcflow-health.sh").exists()


# The checks the guide lists for `hpcflow doctor` (section 10), in the order doctor prints them.
DOCTOR_CHECKS = ["instance", "gpus", "efa", "nccl", "nccl-plugin", "env-preset", "nccl-ifname",
                 "slurm", "preempt-signal", "requeue", "shared-fs", "checkpoint-dir"]


def test_doctor_block(tmp_path):
    """What passes depends on the machine (here: no GPU, no EFA, no /fsx), so this checks what
    the guide promises of any machine: one PASS, WARN or FAIL line per listed check, a fix under
    each WARN and FAIL, the summary counting those lines, and exit 0 when nothing failed, 1
    otherwise."""
    proc = _run(_block("hpcflow doctor"), dict(os.environ), tmp_path)
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    results = [(i, m[1], m[2]) for i, ln in enumerate(lines)
               if (m := re.match(r"^(PASS|WARN|FAIL)  (\S+) ", ln))]
    assert [name for _, _, name in results] == DOCTOR_CHECKS, proc.stdout
    for i, level, name in results:
        if level != "PASS":
            assert lines[i + 1].lstrip().startswith("fix: "), f"{name}: no fix line\n{proc.stdout}"
    count = {lv: sum(1 for _, level, _ in results if level == lv) for lv in ("PASS", "WARN", "FAIL")}
    assert (f"doctor: {count['PASS']} passed, {count['WARN']} warnings, {count['FAIL']} failed"
            in proc.stdout), proc.stdout
    assert proc.returncode == (1 if count["FAIL"] else 0), proc.stdout
