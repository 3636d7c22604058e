"""doctor's HyperPod node lines on a fake node root: the resource config and the provisioning
parameters name the node's group, the group's Slurm partition exists, the FSx for Lustre file
system of the provisioning parameters is mounted (/proc/mounts under the root), and hpcflow's
on_create.sh finished (its last line in the bootstrap log). Files are real files under a
temporary root, read by the real Probe; only commands are faked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcflow.doctor.checks import run_all
from hpcflow.doctor.hyperpod_checks import (
    hyperpod_node_checks,
    parse_mounts,
    parse_provisioning,
)
from hpcflow.doctor.probe import Output, Probe

RESOURCE = {"InstanceGroups": [
    {"Name": "controller", "Instances": [{"CustomerIpAddress": "10.1.0.10"}]},
    {"Name": "login", "Instances": [{"CustomerIpAddress": "10.1.0.20"}]},
    {"Name": "train", "Instances": [{"CustomerIpAddress": "10.1.0.31"},
                                    {"CustomerIpAddress": "10.1.0.32"}]},
]}
PARAMS = {"version": "1.0.0", "workload_manager": "slurm", "controller_group": "controller",
          "login_group": "login",
          "worker_groups": [{"instance_group_name": "train", "partition_name": "train"}],
          "fsx_dns_name": "fs-0123.fsx.us-east-1.amazonaws.com", "fsx_mountname": "abcdefgh"}
MOUNTS = ("proc /proc proc rw 0 0\n"
          "10.1.0.99@tcp:/abcdefgh /fsx lustre rw,flock,lazystatfs 0 0\n")
LOG = ("2026-01-01T00:00:00Z hyperpod-on-create: node: group train, role worker, partition train\n"
       "2026-01-01T00:01:00Z efa: installed 1.38.0\n"
       "2026-01-01T00:09:00Z hyperpod-on-create: done: worker node of group train\n")


class NodeProbe(Probe):
    """The real file reads; commands from a table (None: not installed)."""

    def __init__(self, commands: dict[str, Output], env: dict[str, str] | None = None) -> None:
        super().__init__(env=env or {})
        self.commands = commands

    def run(self, argv):  # noqa: ANN001, ANN201
        return self.commands.get(" ".join(argv))


def node_root(tmp_path: Path, *, resource=RESOURCE, params=PARAMS, mounts=MOUNTS,
              log=LOG) -> str:
    """A fake node: the files a HyperPod node created with hpcflow's bundle has."""
    files = {"opt/ml/config/resource_config.json": resource,
             "opt/ml/config/provisioning_parameters.json": params,
             "proc/mounts": mounts, "var/log/hpcflow-bootstrap.log": log}
    for rel, body in files.items():
        if body is None:
            continue
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body if isinstance(body, str) else json.dumps(body))
    return str(tmp_path)


def probe(address="10.1.0.32", partitions="dev\ntrain\n", sinfo_rc=0, env=None):
    commands = {"hostname -I": Output(0, f"172.17.0.1 {address} ")}
    if partitions is not None:
        commands["sinfo --noheader --format=%R"] = Output(sinfo_rc, partitions)
    return NodeProbe(commands, env)


def lines(results):
    return {r.name: r for r in results}


def test_a_healthy_worker_passes_every_line(tmp_path):
    out = lines(hyperpod_node_checks(probe(), node_root(tmp_path)))
    assert list(out) == ["hyperpod-config", "hyperpod-partition", "hyperpod-fsx",
                         "hyperpod-lifecycle"]
    assert all(r.level == "pass" for r in out.values()), out
    assert out["hyperpod-config"].message.startswith("group train (worker, partition train)")
    assert out["hyperpod-partition"].message == "group train -> Slurm partition train"
    assert out["hyperpod-fsx"].message == ("FSx for Lustre fs-0123.fsx.us-east-1.amazonaws.com"
                                           "@tcp:/abcdefgh mounted at /fsx")
    assert "worker node of group train" in out["hyperpod-lifecycle"].message


def test_the_bundles_own_provisioning_parameters_are_read_as_hyperpod_reads_them(tmp_path):
    """The file in hpcflow's bundle for the example spec is what these checks read."""
    from hpcflow.hyperpod.service import check_file
    from hpcflow.pcluster.catalog import Catalog
    from hpcflow.resources import data_dir

    checked = check_file(data_dir("pcluster_configs") / "hyperpod-p5.spec.yaml",
                         catalog=Catalog.offline())
    params = parse_provisioning(checked.files["provisioning_parameters.json"].decode())
    assert params.partitions == {g.name: g.partition for g in checked.plan.groups
                                 if g.role == "worker"} != {}
    assert all(params.role(g.name) == g.role for g in checked.plan.groups)
    assert (params.fsx_dns, params.fsx_mount) == (checked.plan.hyperpod.fsx.dns_name,
                                                   checked.plan.hyperpod.fsx.mount_name)


def test_the_controller_has_no_partition_of_its_own(tmp_path):
    out = lines(hyperpod_node_checks(probe("10.1.0.10"), node_root(
        tmp_path, log=LOG.replace("worker node of group train", "controller node of group "
                                  "controller"))))
    assert out["hyperpod-config"].message.startswith("group controller (controller)")
    assert out["hyperpod-partition"].level == "pass"
    assert "no partition of its own" in out["hyperpod-partition"].message
    assert out["hyperpod-lifecycle"].level == "pass"


def test_not_a_hyperpod_node_gets_no_line(tmp_path):
    assert hyperpod_node_checks(probe(), node_root(tmp_path, resource=None)) == []


@pytest.mark.parametrize(("changes", "message"), [
    pytest.param({"params": None}, "provisioning_parameters.json is missing or unreadable",
                 id="no-provisioning-parameters"),
    pytest.param({"params": "{"}, "is not HyperPod provisioning parameters",
                 id="provisioning-not-json"),
    pytest.param({"params": {"worker_groups": []}}, "no controller_group",
                 id="no-controller"),
    pytest.param({"params": {**PARAMS, "worker_groups": [{"instance_group_name": "x"}]}},
                 "without instance_group_name and partition_name", id="worker-without-partition"),
    pytest.param({"params": {**PARAMS, "worker_groups": []}},
                 "does not name this node's group train (it names controller, login)",
                 id="group-not-named"),
    pytest.param({"resource": "[]"}, "is not a HyperPod resource config", id="resource-bad"),
])
def test_config_problems_fail_naming_the_file_and_what_is_wrong(tmp_path, changes, message):
    out = lines(hyperpod_node_checks(probe(), node_root(tmp_path, **changes)))
    assert out["hyperpod-config"].level == "fail"
    assert message in out["hyperpod-config"].message
    assert out["hyperpod-config"].fix


def test_a_node_the_resource_config_does_not_list_fails_and_skips_the_group_checks(tmp_path):
    out = lines(hyperpod_node_checks(probe("192.168.9.9"), node_root(tmp_path)))
    assert out["hyperpod-config"].level == "fail"
    assert "none of this node's addresses" in out["hyperpod-config"].message
    assert "hyperpod-partition" not in out and "hyperpod-lifecycle" not in out
    assert out["hyperpod-fsx"].level == "pass"  # the mount does not depend on the group


@pytest.mark.parametrize(("kwargs", "level", "message"), [
    pytest.param({"partitions": "dev\nother\n"}, "fail",
                 "group train's partition train is not a Slurm partition (sinfo lists: dev, "
                 "other)", id="missing-partition"),
    pytest.param({"partitions": None}, "warn", "not checked (sinfo not found)", id="no-sinfo"),
    pytest.param({"partitions": "slurm_load_partitions: Unable to contact slurm controller\n",
                  "sinfo_rc": 1}, "warn", "sinfo failed: slurm_load_partitions",
                 id="sinfo-fails"),
])
def test_the_partition_line(tmp_path, kwargs, level, message):
    out = lines(hyperpod_node_checks(probe(**kwargs), node_root(tmp_path)))
    assert out["hyperpod-partition"].level == level
    assert message in out["hyperpod-partition"].message


@pytest.mark.parametrize(("mounts", "level", "message"), [
    pytest.param("fs-0123.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh /mnt/my\\040fsx lustre rw 0 0\n",
                 "pass", "mounted at /mnt/my fsx", id="dns-nid-escaped-path"),
    pytest.param("proc /proc proc rw 0 0\n", "fail", "is not mounted (no Lustre file system)",
                 id="not-mounted"),
    pytest.param("10.1.0.99@tcp:/zzzz /fsx lustre rw 0 0\n", "fail",
                 "is not mounted (10.1.0.99@tcp:/zzzz at /fsx)", id="another-lustre"),
    pytest.param("10.1.0.99@tcp:/abcdefgh /fsx nfs4 rw 0 0\n", "fail", "is not mounted",
                 id="not-lustre"),
    pytest.param(None, "warn", "unreadable", id="no-proc-mounts"),
])
def test_the_fsx_line(tmp_path, mounts, level, message):
    out = lines(hyperpod_node_checks(probe(), node_root(tmp_path, mounts=mounts)))
    assert out["hyperpod-fsx"].level == level
    assert message in out["hyperpod-fsx"].message
    if level == "fail":
        assert out["hyperpod-fsx"].fix.startswith("mount -t lustre -o relatime,flock "
                                                  "fs-0123.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh")


def test_no_fsx_in_the_provisioning_parameters_means_no_fsx_line(tmp_path):
    params = {k: v for k, v in PARAMS.items() if not k.startswith("fsx_")}
    out = lines(hyperpod_node_checks(probe(), node_root(tmp_path, params=params)))
    assert "hyperpod-fsx" not in out and out["hyperpod-config"].level == "pass"


@pytest.mark.parametrize(("log", "level", "message"), [
    pytest.param(LOG + "2026-01-02T00:00:00Z hyperpod-on-create: error: hpcflow-bootstrap.sh "
                 "--steps efa failed\n", "fail", "on_create.sh stopped: hpcflow-bootstrap.sh "
                 "--steps efa failed", id="last-run-failed"),
    pytest.param("2026-01-01T00:00:00Z hyperpod-on-create: + mount -t lustre x /fsx\n", "warn",
                 "has not finished (last line: + mount -t lustre x /fsx)", id="unfinished"),
    pytest.param("2026-01-01T00:00:00Z efa: installed\n", "warn",
                 "no line of hpcflow's on_create.sh", id="not-hpcflows-bundle"),
    pytest.param(None, "warn", "no line of hpcflow's on_create.sh", id="no-log"),
    pytest.param(LOG.replace("of group train", "of group other"), "warn",
                 "finished for group other, but this node is in group train", id="other-group"),
    pytest.param("2026-01-01T00:00:00Z hyperpod-on-create: error: x\n" + LOG, "pass",
                 "on_create.sh finished", id="a-rerun-that-succeeded"),
])
def test_the_lifecycle_line(tmp_path, log, level, message):
    out = lines(hyperpod_node_checks(probe(), node_root(tmp_path, log=log)))
    assert out["hyperpod-lifecycle"].level == level
    assert message in out["hyperpod-lifecycle"].message


def test_the_log_variable_names_the_log(tmp_path):
    root = node_root(tmp_path, log=None)
    other = tmp_path / "elsewhere.log"
    other.write_text(LOG)
    out = lines(hyperpod_node_checks(probe(env={"HPCFLOW_BOOTSTRAP_LOG": str(other)}), root))
    assert out["hyperpod-lifecycle"].level == "pass" and str(other) in \
        out["hyperpod-lifecycle"].message


def test_parse_mounts_decodes_octal_escapes():
    assert parse_mounts("a@tcp:/m /x\\040y lustre rw 0 0\nshort\n") == [
        ("a@tcp:/m", "/x y", "lustre")]


def test_run_all_puts_the_node_lines_after_the_hyperpod_line(tmp_path):
    root = node_root(tmp_path)
    env = {"SAGEMAKER_RESOURCE_CONFIG_PATH": f"{root}/opt/ml/config/resource_config.json"}
    names = [r.name for r in run_all(probe(env=env), instance="p5.48xlarge", root=root)]
    assert names[:6] == ["hyperpod", "hyperpod-config", "hyperpod-partition", "hyperpod-fsx",
                         "hyperpod-lifecycle", "instance"]
    assert not any(n.startswith("hyperpod") for n in
                   (r.name for r in run_all(probe(), instance="p5.48xlarge",
                                            root=str(tmp_path / "none"))))
