"""The HyperPod lifecycle entry script (bootstrap/hyperpod/on_create.sh), run from a rendered
bundle on a fake node root: a resource config as HyperPod writes it (instance groups with each
instance's CustomerIpAddress), the bundle's provisioning parameters, and fake mount, systemctl
and hpcflow-bootstrap.sh that record what they were asked. It must pick the steps and the Slurm
daemon of the controller, a login node and a worker."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from hpcflow.hyperpod.service import check_spec, write_files
from hpcflow.pcluster.catalog import Catalog
from hpcflow.resources import data_dir
from hpcflow.spec.cluster_loading import validate_cluster_spec

SHA = "ab" * 32
CONTROLLER, LOGIN, WORKER = "10.1.0.10", "10.1.0.20", "10.1.0.32"
RESOURCE_CONFIG = {
    "InstanceGroups": [
        {"Name": "controller", "Instances": [{"InstanceName": "c-1", "CustomerIpAddress": CONTROLLER}]},
        {"Name": "login", "Instances": [{"InstanceName": "l-1", "CustomerIpAddress": LOGIN}]},
        {"Name": "train", "Instances": [{"InstanceName": "t-1", "CustomerIpAddress": "10.1.0.31"},
                                        {"InstanceName": "t-2", "CustomerIpAddress": WORKER}]},
    ],
}
FAKE = """#!/usr/bin/env bash
printf '%s %s\\n' "$(basename "$0")" "$*" >>"{log}"
{tail}
"""


@pytest.fixture
def node(tmp_path: Path) -> dict[str, Path]:
    data = yaml.safe_load((data_dir("pcluster_configs") / "hyperpod-p5.spec.yaml").read_text())
    data["hyperpod"].update(login_steps=["enroot-pyxis"],
                            step_env={"HPCFLOW_ENROOT_SHA256": SHA})
    spec = validate_cluster_spec(data, "t")
    checked = check_spec(spec, "t", Catalog.offline(), data_dir("bootstrap"))
    bundle = tmp_path / "bundle"
    write_files(checked, bundle)
    root = tmp_path / "root"
    (root / "opt/ml/config").mkdir(parents=True)
    (root / "opt/ml/config/resource_config.json").write_text(json.dumps(RESOURCE_CONFIG))
    (root / "opt/slurm/etc").mkdir(parents=True)
    (root / "opt/slurm/etc/slurm.conf").write_text("ClusterName=train-hp\n")
    log = tmp_path / "calls.log"
    fakes = tmp_path / "bin"
    fakes.mkdir()
    for name, tail in (("mount", "exit 0"), ("mountpoint", "exit 1"), ("systemctl", "exit 0")):
        (fakes / name).write_text(FAKE.format(log=log, tail=tail))
        (fakes / name).chmod(0o755)
    return {"bundle": bundle, "root": root, "log": log, "bin": fakes}


def _run(node: dict[str, Path], address: str, *args: str, fake_bootstrap: bool = True,
         **env: str) -> subprocess.CompletedProcess:
    if fake_bootstrap:
        entry = node["bundle"] / "hpcflow-bootstrap.sh"
        entry.write_text(FAKE.format(log=node["log"], tail="exit 0"))
    full = {k: v for k, v in os.environ.items() if not k.startswith(("HPCFLOW_", "SAGEMAKER_"))}
    full.update(PATH=f"{node['bin']}:{os.environ['PATH']}", HPCFLOW_HYPERPOD_ADDRESSES=address,
                HPCFLOW_HYPERPOD_WAIT_S="0", **env)
    cmd = ["bash", str(node["bundle"] / "on_create.sh"), "--prefix", str(node["root"]), *args]
    proc = subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=120)
    print(proc.stdout, proc.stderr)
    return proc


def _calls(node) -> list[str]:
    """What the fakes were asked to do (the read-only ``mountpoint`` question left out)."""
    lines = node["log"].read_text().splitlines() if node["log"].exists() else []
    return [ln for ln in lines if not ln.startswith("mountpoint ")]


DROP_IN = "etc/systemd/system/slurmd.service.d/hpcflow-conf-server.conf"
MOUNT = ("mount -t lustre -o relatime,flock "
         "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh {root}/fsx")


def test_the_controller_mounts_the_file_system_and_starts_slurmctld_with_no_steps(node):
    proc = _run(node, f"172.17.0.1 {CONTROLLER}")
    assert proc.returncode == 0
    assert "node: group controller, role controller" in proc.stdout
    assert _calls(node) == [MOUNT.format(root=node["root"]), "systemctl enable --now slurmctld"]
    fstab = (node["root"] / "etc/fstab").read_text()
    assert fstab == ("fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh /fsx lustre "
                     "defaults,relatime,flock,_netdev 0 0\n")
    assert not (node["root"] / DROP_IN).exists()


def test_a_login_node_runs_its_steps_with_their_settings_and_starts_slurmd(node):
    proc = _run(node, LOGIN)
    assert proc.returncode == 0
    assert "role login" in proc.stdout
    calls = _calls(node)
    [boot] = [c for c in calls if c.startswith("hpcflow-bootstrap.sh")]
    assert "--steps enroot-pyxis " in boot and f"--env HPCFLOW_ENROOT_SHA256={SHA}" in boot
    assert "--instance-type" not in boot
    assert calls[-2:] == ["systemctl daemon-reload", "systemctl enable --now slurmd"]
    assert (node["root"] / DROP_IN).read_text() == (
        f'[Service]\nEnvironment="SLURMD_OPTIONS=--conf-server {CONTROLLER}"\n')


def test_a_worker_runs_the_gpu_steps_for_its_instance_type_and_starts_slurmd(node):
    proc = _run(node, WORKER)
    assert proc.returncode == 0
    assert "node: group train, role worker, partition train" in proc.stdout
    calls = _calls(node)
    [boot] = [c for c in calls if c.startswith("hpcflow-bootstrap.sh")]
    assert boot.startswith("hpcflow-bootstrap.sh --steps efa,nccl,nccl-tests,healthcheck ")
    assert "--instance-type p5.48xlarge" in boot and f"--prefix {node['root']}" in boot
    assert calls[-1] == "systemctl enable --now slurmd"
    assert "slurmctld" not in " ".join(calls)


def test_a_rerun_leaves_the_fstab_line_and_drop_in_as_they_are(node):
    assert _run(node, WORKER).returncode == 0
    drop_in = (node["root"] / DROP_IN).stat().st_mtime_ns
    assert _run(node, WORKER).returncode == 0
    assert len((node["root"] / "etc/fstab").read_text().splitlines()) == 1
    assert (node["root"] / DROP_IN).stat().st_mtime_ns == drop_in


def test_dry_run_goes_through_the_real_steps_and_writes_nothing(node):
    proc = _run(node, WORKER, "--dry-run", fake_bootstrap=False)
    assert proc.returncode == 0, proc.stderr
    for step in ("10-efa", "20-nccl", "30-nccl-tests", "90-healthcheck"):
        assert f"== {step}\n" in proc.stdout
    assert "== 40-enroot-pyxis" not in proc.stdout
    assert "would run: systemctl enable --now slurmd" in proc.stdout
    assert "would write" in proc.stdout and "would add to" in proc.stdout
    assert _calls(node) == []
    assert not (node["root"] / "etc").exists()


def test_the_resource_config_path_from_hyperpods_variable_wins(node, tmp_path):
    moved = tmp_path / "rc.json"
    (node["root"] / "opt/ml/config/resource_config.json").rename(moved)
    assert _run(node, CONTROLLER, SAGEMAKER_RESOURCE_CONFIG_PATH=str(moved)).returncode == 0
    proc = _run(node, CONTROLLER)
    assert proc.returncode == 1
    assert "opt/ml/config/resource_config.json is missing or unreadable" in proc.stderr


def test_a_node_in_no_group_stops_with_exit_1_naming_its_addresses(node):
    proc = _run(node, "192.168.9.9")
    assert proc.returncode == 1
    assert "this node (192.168.9.9) is in no group" in proc.stderr
    assert _calls(node) == []


def test_a_failed_step_stops_before_slurm_starts(node):
    _run(node, WORKER)
    (node["bundle"] / "hpcflow-bootstrap.sh").write_text("#!/usr/bin/env bash\nexit 1\n")
    node["log"].unlink()
    proc = _run(node, WORKER, fake_bootstrap=False)
    assert proc.returncode == 1
    assert "hpcflow-bootstrap.sh --steps efa,nccl,nccl-tests,healthcheck failed" in proc.stderr
    assert not any("slurmd" in c for c in _calls(node))


def test_an_unknown_argument_is_a_usage_error(node):
    proc = _run(node, WORKER, "--bogus")
    assert proc.returncode == 2
    assert "unknown argument '--bogus'" in proc.stderr
