"""The bootstrap scripts run for real in a sandbox root (see conftest.py for what is stubbed)."""

from __future__ import annotations

from pathlib import Path

import pytest

BOOTSTRAP = Path(__file__).resolve().parents[3] / "bootstrap"

STEPS = "efa,nccl,nccl-tests,healthcheck"


def test_happy_path_installs_every_step(sandbox):
    proc = sandbox.run("hpcflow-bootstrap.sh", "--steps", STEPS, "--instance-type", "p5.48xlarge")
    assert proc.returncode == 0, proc.stderr
    root = sandbox.root
    assert "EFA installer version: 1.34.0" in (root / "opt/amazon/efa_installed_packages").read_text()
    assert (root / "efa-installer-calls").read_text().split() == ["-y"]
    nccl = root / "opt/hpcflow/nccl/2.27.7-1/lib"
    # NCCL was built for the stub GPUs' compute capability 9.0
    assert (nccl / "gencode.txt").read_text().strip() == "-gencode=arch=compute_90,code=sm_90"
    assert "the plugin the EFA installer ships in" in proc.stdout
    tests_bin = root / "opt/hpcflow/nccl-tests/2.17.6/bin/all_reduce_perf"
    # built with MPI, because the (stubbed) EFA installer left Open MPI behind
    assert tests_bin.read_text().startswith("#!/bin/sh\necho MPI=1")
    prolog = root / "opt/slurm/etc/scripts/prolog.d/90-hpcflow-health.sh"
    assert prolog.stat().st_mode & 0o111
    assert "INSTANCE_TYPE=p5.48xlarge" in (root / "etc/hpcflow/health.env").read_text()
    log = (root / "var/log/hpcflow-bootstrap.log").read_text()
    assert "verified" in log and "installed EFA installer 1.34.0" in log


def test_second_run_is_a_no_op(sandbox):
    first = sandbox.run("hpcflow-bootstrap.sh", "--steps", STEPS, "--instance-type", "p5.48xlarge")
    assert first.returncode == 0, first.stderr
    before = {p: p.stat().st_mtime_ns for p in sandbox.root.rglob("*") if "var/log" not in str(p)}
    second = sandbox.run("hpcflow-bootstrap.sh", "--steps", STEPS, "--instance-type", "p5.48xlarge")
    assert second.returncode == 0, second.stderr
    lines = [ln for ln in second.stdout.splitlines() if not ln.startswith("==")]
    assert lines and all("nothing to do" in ln for ln in lines), second.stdout
    after = {p: p.stat().st_mtime_ns for p in sandbox.root.rglob("*") if "var/log" not in str(p)}
    assert after == before
    assert (sandbox.root / "efa-installer-calls").read_text().count("-y") == 1


def test_wrong_sha256_stops_before_anything_is_installed(sandbox):
    env = dict(sandbox.env)
    del env["HPCFLOW_EFA_SHA256"]  # the real pinned sum: the served test tarball does not match it
    sandbox.env = env
    proc = sandbox.run("hpcflow-bootstrap.sh", "--steps", STEPS)
    assert proc.returncode == 1
    assert "sha256 mismatch" in proc.stderr and "nothing was installed" in proc.stderr
    assert "bd68839e741b0afd3ec2e37d50603803cfa7a279c120f0a736cc57c2ff2d7fdc" in proc.stderr
    assert not (sandbox.root / "efa-installer-calls").exists()
    assert not (sandbox.root / "opt").exists()
    assert not list((sandbox.root / "var/cache").rglob("*.tar.gz*"))


@pytest.mark.parametrize(("url", "loopback_http"), [
    pytest.param("file:///etc/shadow", "1", id="file"),
    pytest.param("http://example.com/nccl.tar.gz", "1", id="http-elsewhere"),
    pytest.param("ftp://127.0.0.1/nccl.tar.gz", "1", id="ftp"),
    pytest.param(None, "0", id="loopback-http-not-allowed"),
])
def test_a_download_url_that_is_not_https_is_refused(sandbox, url, loopback_http):
    url = url or sandbox.url + "/nccl.tar.gz"
    proc = sandbox.run("steps/20-nccl.sh", HPCFLOW_NCCL_URL=url,
                       HPCFLOW_BOOTSTRAP_LOOPBACK_HTTP=loopback_http)
    assert proc.returncode == 1
    assert f"download URL '{url}' is not https://; allowed: https:// URLs" in proc.stderr
    assert not list((sandbox.root / "var/cache").rglob("*.tar.gz*"))
    assert not (sandbox.root / "opt").exists()


def test_dry_run_changes_nothing(sandbox):
    proc = sandbox.run("hpcflow-bootstrap.sh", "--steps", STEPS, "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "would download: " + sandbox.url + "/aws-efa-installer-1.34.0.tar.gz" in proc.stdout
    assert "would run: efa_installer.sh -y" in proc.stdout
    assert "would install: " in proc.stdout
    assert list(sandbox.root.iterdir()) == []


def test_unknown_step_is_refused_with_the_allowed_ones(sandbox):
    proc = sandbox.run("hpcflow-bootstrap.sh", "--steps", "efa,cuda")
    assert proc.returncode == 2
    assert "--steps: 'cuda' is not a step; allowed: efa,nccl,nccl-tests,enroot-pyxis,spot-watch,healthcheck" \
        in proc.stderr


def test_nccl_without_gpus_names_the_fix(sandbox):
    proc = sandbox.run("steps/20-nccl.sh", HPCFLOW_STUB_GPUS="0")
    assert proc.returncode == 1
    assert "cannot choose CUDA architectures (set HPCFLOW_NVCC_GENCODE" in proc.stderr
    assert not (sandbox.root / "opt/hpcflow/nccl").exists()


def test_enroot_pyxis_refuse_without_a_checksum(sandbox):
    proc = sandbox.run("steps/40-enroot-pyxis.sh")
    assert proc.returncode == 1
    assert "HPCFLOW_ENROOT_SHA256 is not set" in proc.stderr


def test_enroot_pyxis_present_is_left_alone(sandbox):
    (sandbox.root / "usr/bin").mkdir(parents=True)
    (sandbox.root / "usr/bin/enroot").write_text("#!/bin/sh\n")
    (sandbox.root / "usr/bin/enroot").chmod(0o755)
    (sandbox.root / "opt/slurm/lib/slurm").mkdir(parents=True)
    (sandbox.root / "opt/slurm/lib/slurm/spank_pyxis.so").write_text("")
    proc = sandbox.run("steps/40-enroot-pyxis.sh")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["enroot: present, nothing to do",
                                        "pyxis: present, nothing to do"]
    assert "warning: pyxis is not enabled" in proc.stderr



def test_prefix_with_a_blank_is_refused(sandbox, tmp_path):
    import subprocess

    bad = tmp_path / "a b"
    proc = subprocess.run(["bash", str(BOOTSTRAP / "steps/10-efa.sh"), "--prefix", str(bad)],
                          env=sandbox.env, capture_output=True, text=True)
    assert proc.returncode == 1
    assert f"--prefix: '{bad}' contains a blank" in proc.stderr
    assert not bad.exists()


# pyxis' Makefile interface (prefix, libdir, CPPFLAGS from the environment, install into
# $(libdir)/slurm), with a shell command where the real one compiles C.
PYXIS_MAKEFILE = (
    "prefix ?= /usr/local\nlibdir ?= $(prefix)/lib\n"
    "all:\n\techo \"$$CPPFLAGS\" > cppflags.txt\n\ttouch spank_pyxis.so\n"
    "install: all\n\tinstall -d $(libdir)/slurm\n\tinstall -m 644 spank_pyxis.so $(libdir)/slurm\n"
    "\tinstall -m 644 cppflags.txt $(libdir)/slurm\n"
)


def test_pyxis_is_built_where_absent_when_its_checksum_is_given(sandbox):
    import hashlib
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = PYXIS_MAKEFILE.encode()
        info = tarfile.TarInfo("pyxis-0.20.0/Makefile")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    (sandbox.www / "pyxis.tar.gz").write_bytes(buf.getvalue())
    (sandbox.root / "usr/bin").mkdir(parents=True)
    (sandbox.root / "usr/bin/enroot").write_text("#!/bin/sh\n")
    (sandbox.root / "usr/bin/enroot").chmod(0o755)
    env = {"HPCFLOW_PYXIS_URL": f"{sandbox.url}/pyxis.tar.gz",
           "HPCFLOW_PYXIS_SHA256": hashlib.sha256(buf.getvalue()).hexdigest()}
    proc = sandbox.run("steps/40-enroot-pyxis.sh", **env)
    assert proc.returncode == 0, proc.stderr
    plugins = sandbox.root / "opt/slurm/lib/slurm"
    assert (plugins / "spank_pyxis.so").exists()
    assert (plugins / "cppflags.txt").read_text().strip() == f"-I {sandbox.root}/opt/slurm/include"
    conf = (sandbox.root / "opt/slurm/etc/plugstack.conf.d/pyxis.conf").read_text()
    assert conf == f"required {plugins}/spank_pyxis.so\n"
    again = sandbox.run("steps/40-enroot-pyxis.sh", **env)
    assert again.stdout.splitlines() == ["enroot: present, nothing to do",
                                         "pyxis: present, nothing to do"]
    assert "not enabled" not in again.stderr


def test_entry_script_env_reaches_the_steps_and_only_hpcflow_names_pass(sandbox):
    # The nccl step on a node without GPUs takes its CUDA architectures from --env.
    refused = sandbox.run("hpcflow-bootstrap.sh", "--steps", "nccl", HPCFLOW_STUB_GPUS="0")
    assert "cannot choose CUDA architectures" in refused.stderr
    given = sandbox.run("hpcflow-bootstrap.sh", "--steps", "nccl", "--dry-run", "--env",
                        "HPCFLOW_NVCC_GENCODE=-gencode=arch=compute_90,code=sm_90",
                        HPCFLOW_STUB_GPUS="0")
    assert "cannot choose CUDA architectures" not in given.stderr
    assert "compute_90" in given.stdout + given.stderr
    bad = sandbox.run("hpcflow-bootstrap.sh", "--steps", "nccl", "--env", "PATH=/tmp")
    assert bad.returncode == 2 and "--env PATH=/tmp: give HPCFLOW_NAME=VALUE" in bad.stderr
