"""The aws-ofi-nccl plugin the bootstrap sets up reaches the job: step 20-nccl runs for real in a
sandbox root (the EFA installer's plugin present, NCCL already built: no download, no compiler),
then the batch script rendered for an EFA instance runs against that root with stub srun and
scontrol on PATH, and the program sees the plugin's directory on its LD_LIBRARY_PATH."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpcflow.jobs.script import job_script
from hpcflow.spec.job import JobSpec

REPO = Path(__file__).resolve().parents[3]
STEP = REPO / "bootstrap" / "steps" / "20-nccl.sh"
NCCL_VERSION = "2.27.7-1"  # the step's pinned default

# srun stub: drop srun's own options, run the program (one task, as rank 0).
SRUN = """#!/usr/bin/env bash
while [[ $# -gt 0 && $1 == --* ]]; do shift; done
exec "$@"
"""
PROGRAM = "import os, sys; open(sys.argv[1], 'w').write(os.environ.get('LD_LIBRARY_PATH', ''))"


def sandbox_root(tmp_path: Path) -> Path:
    """A root where the EFA installer left its plugin (in the triplet folder Debian/Ubuntu
    installs use) and its libfabric, and NCCL is already built at the pinned version."""
    root = tmp_path / "root"
    plugin = root / "opt/amazon/ofi-nccl/lib/x86_64-linux-gnu"
    plugin.mkdir(parents=True)
    (plugin / "libnccl-net.so").write_text("")
    (root / "opt/amazon/efa/lib64").mkdir(parents=True)
    (root / f"opt/hpcflow/nccl/{NCCL_VERSION}/lib").mkdir(parents=True)
    state = root / "var/lib/hpcflow/bootstrap"
    state.mkdir(parents=True)
    (state / "nccl.done").write_text(f"{NCCL_VERSION}\n")
    return root


def run_step(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "HOME": str(root.parent)}
    return subprocess.run(["bash", str(STEP), "--prefix", str(root), *args], env=env,
                          capture_output=True, text=True, timeout=60)


def test_the_step_records_the_plugin_and_names_it_for_the_loader(tmp_path):
    root = sandbox_root(tmp_path)
    first = run_step(root)
    assert first.returncode == 0, first.stderr
    plugin = f"{root}/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu"
    assert (root / "var/lib/hpcflow/bootstrap/ofi-nccl.dir").read_text() == plugin + "\n"
    conf = root / "etc/ld.so.conf.d/hpcflow-aws-ofi-nccl.conf"
    assert conf.read_text() == plugin + "\n"
    assert "sandbox root: ldconfig not run" in first.stdout
    again = run_step(root)
    assert again.returncode == 0, again.stderr
    assert all("nothing to do" in line for line in again.stdout.splitlines()), again.stdout


def test_a_dry_run_writes_no_loader_entry(tmp_path):
    root = sandbox_root(tmp_path)
    (root / "var/lib/hpcflow/bootstrap/ofi-nccl.dir").write_text("/opt/x/lib\n")
    out = run_step(root, "--dry-run")
    assert out.returncode == 0, out.stderr
    assert "would write: " in out.stdout and "would run: ldconfig" in out.stdout
    assert not (root / "etc").exists()


def run_job(tmp_path: Path, root: Path, instance_type: str, user_path: str) -> str:
    """Render the batch script for ``instance_type``, run it as Slurm would (stub srun and
    scontrol), return the LD_LIBRARY_PATH the program saw."""
    seen = tmp_path / "seen.txt"
    spec = JobSpec.model_validate({
        "name": "efa", "nodes": 1, "tasks_per_node": 1, "time_limit": "00:10:00",
        "run_dir": str(tmp_path / "run"), "network": {"instance_type": instance_type},
        "program": {"argv": [sys.executable, "-c", PROGRAM, str(seen)]},
    })
    script = tmp_path / "job.sbatch"
    script.write_text(job_script(spec, python=sys.executable))
    stubs = tmp_path / "bin"
    stubs.mkdir(exist_ok=True)
    for name, text in (("srun", SRUN), ("scontrol", "#!/bin/sh\nexit 0\n"),
                       ("scancel", "#!/bin/sh\nexit 0\n")):
        (stubs / name).write_text(text)
        (stubs / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "HPCFLOW_"))}
    env.update({"PATH": f"{stubs}:{os.environ['PATH']}", "SLURM_JOB_ID": "4242",
                "SLURM_JOB_NODELIST": "n1", "SLURM_NNODES": "1", "SLURMD_NODENAME": "n1",
                "HPCFLOW_BOOTSTRAP_PREFIX": str(root), "LD_LIBRARY_PATH": user_path,
                "PYTHONPATH": str(REPO)})
    out = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert seen.exists(), out.stdout + out.stderr
    return seen.read_text()


def test_after_the_bootstrap_the_program_sees_the_plugin_on_its_path(tmp_path):
    root = sandbox_root(tmp_path)
    assert run_step(root).returncode == 0
    got = run_job(tmp_path, root, "p5.48xlarge", "/home/me/lib")
    plugin = f"{root}/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu"
    assert got.split(":") == ["/home/me/lib", plugin, f"{root}/opt/amazon/ofi-nccl/lib",
                              f"{root}/opt/amazon/efa/lib64"]


@pytest.mark.parametrize("instance_type", [pytest.param("g5.xlarge", id="no-efa"),
                                           pytest.param("m5.large", id="no-gpu")])
def test_without_efa_the_path_is_left_alone(tmp_path, instance_type):
    root = sandbox_root(tmp_path)
    assert run_step(root).returncode == 0
    assert run_job(tmp_path, root, instance_type, "/home/me/lib") == "/home/me/lib"
