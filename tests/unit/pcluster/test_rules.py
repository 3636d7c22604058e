"""Each rule: a spec that breaks it fails with its code, naming the spec field."""

from __future__ import annotations

from typing import Any

import pytest

from hpcflow.pcluster.render import check_spec
from hpcflow.pcluster.rules import run_rules
from hpcflow.spec.cluster import ClusterSpec


def _q(spec: dict[str, Any], i: int = 0) -> dict[str, Any]:
    return spec["queues"][i]


def _findings(spec: dict[str, Any]):
    return check_spec(ClusterSpec.model_validate(spec), run_schema=False).findings


def _set(path: str, value: Any):
    """Return an editor that sets a dotted path (list indexes as numbers) in a spec dict."""

    def edit(spec: dict[str, Any]) -> None:
        node: Any = spec
        parts = path.split(".")
        for part in parts[:-1]:
            node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
        node[parts[-1]] = value

    return edit


def _storage(**kw: Any):
    def edit(spec: dict[str, Any]) -> None:
        spec["storage"] = [{"name": "fsx", "storage_capacity_gib": 1200,
                            "deployment_type": "PERSISTENT_2",
                            "per_unit_storage_throughput": 250, **kw}]
    return edit


def _many_queues(n: int):
    def edit(spec: dict[str, Any]) -> None:
        q = spec["queues"][0]
        spec["queues"] = [{**q, "name": f"q{i}"} for i in range(n)]
    return edit


def _many_computes(n: int):
    def edit(spec: dict[str, Any]) -> None:
        spec["queues"][0]["compute"] = [
            {"name": f"c{i}", "instance_type": "p5.48xlarge", "max_nodes": 1} for i in range(n)]
    return edit


def _dras(n: int):
    return _storage(data_repositories=[
        {"name": f"d{i}", "s3_path": f"s3://bucket-x/p{i}", "fs_path": f"/p{i}"} for i in range(n)])


def _two_storages(second: dict[str, Any], mount_dir: str = "/other"):
    """The base FSx at /fsx plus a second file system ``second`` at ``mount_dir``."""
    def edit(spec: dict[str, Any]) -> None:
        _storage()(spec)
        spec["storage"].append({"name": "second", "mount_dir": mount_dir, **second})
    return edit


def _cb(**compute: Any):
    def edit(spec: dict[str, Any]) -> None:
        q = spec["queues"][0]
        q.update(capacity_type="capacity_block", reservation_id="cr-0123456789abcdef0")
        q["compute"][0].update(compute)
    return edit


def _both(*edits):
    def edit(spec: dict[str, Any]) -> None:
        for e in edits:
            e(spec)
    return edit


ERROR_CASES = [
    pytest.param(_both(_set("queues.0.compute.0.instance_type", "g6.xlarge"),
                       _set("queues.0.compute.0.efa", True)),
                 "EFA_UNSUPPORTED", "queues[0].compute[0].efa", id="efa-on-g6-xlarge"),
    pytest.param(_set("queues.0.subnet_ids", ["subnet-0aa", "subnet-0bb"]),
                 "EFA_MULTIPLE_SUBNETS", "queues[0].subnet_ids", id="efa-two-subnets"),
    pytest.param(_storage(per_unit_storage_throughput=200), "FSX_THROUGHPUT",
                 "storage[0].per_unit_storage_throughput", id="persistent2-throughput-200"),
    pytest.param(_storage(deployment_type="PERSISTENT_1", per_unit_storage_throughput=125),
                 "FSX_THROUGHPUT", "storage[0].per_unit_storage_throughput",
                 id="persistent1-throughput-125"),
    pytest.param(_storage(per_unit_storage_throughput=None), "FSX_THROUGHPUT",
                 "storage[0].per_unit_storage_throughput", id="persistent2-throughput-missing"),
    pytest.param(_storage(storage_capacity_gib=3600), "FSX_CAPACITY",
                 "storage[0].storage_capacity_gib", id="capacity-3600"),
    pytest.param(_storage(storage_capacity_gib=1000), "FSX_CAPACITY",
                 "storage[0].storage_capacity_gib", id="capacity-1000"),
    pytest.param(_dras(9), "FSX_TOO_MANY_DRA", "storage[0].data_repositories", id="nine-dras"),
    pytest.param(_cb(min_nodes=1, max_nodes=2), "CAPACITY_BLOCK_NOT_STATIC",
                 "queues[0].compute[0].min_nodes", id="capacity-block-min-below-max"),
    pytest.param(_cb(min_nodes=0, max_nodes=1), "CAPACITY_BLOCK_NOT_STATIC",
                 "queues[0].compute[0].min_nodes", id="capacity-block-min-zero"),
    pytest.param(_set("queues.0.capacity_type", "capacity_block"),
                 "CAPACITY_BLOCK_NO_RESERVATION", "queues[0].capacity_type",
                 id="capacity-block-without-reservation"),
    pytest.param(_set("queues.0.name", "Train_1"), "BAD_NAME", "queues[0].name",
                 id="queue-name-uppercase"),
    pytest.param(_set("queues.0.name", "default"), "BAD_NAME", "queues[0].name",
                 id="queue-name-default"),
    pytest.param(_set("queues.0.name", "q" * 26), "NAME_TOO_LONG", "queues[0].name",
                 id="queue-name-26-chars"),
    pytest.param(_set("queues.0.compute.0.name", "9gpu"), "BAD_NAME",
                 "queues[0].compute[0].name", id="compute-name-starts-with-digit"),
    pytest.param(_set("queues.0.compute.0.name", "c" * 26), "NAME_TOO_LONG",
                 "queues[0].compute[0].name", id="compute-name-26-chars"),
    pytest.param(_many_queues(51), "TOO_MANY_QUEUES", "queues", id="51-queues"),
    pytest.param(_many_computes(51), "TOO_MANY_COMPUTE_RESOURCES", "queues[0].compute",
                 id="51-compute-resources"),
    pytest.param(_set("slurm.custom_settings", {"Prolog": "/x.sh"}), "SLURM_SETTING_FORBIDDEN",
                 "slurm.custom_settings.Prolog", id="slurm-prolog"),
    pytest.param(_set("slurm.custom_settings", {"TaskPlugin": "task/affinity"}),
                 "SLURM_SETTING_FORBIDDEN", "slurm.custom_settings.TaskPlugin",
                 id="slurm-taskplugin"),
    pytest.param(_set("queues.0.custom_slurm_settings", {"OverSubscribe": "YES"}),
                 "SLURM_SETTING_FORBIDDEN", "queues[0].custom_slurm_settings.OverSubscribe",
                 id="queue-oversubscribe"),
    pytest.param(_set("queues.0.compute.0.instance_type", "p5.48xl"), "UNKNOWN_INSTANCE_TYPE",
                 "queues[0].compute[0].instance_type", id="instance-type-typo"),
    pytest.param(_both(_many_queues(2), _set("queues.1.name", "q0")), "DUPLICATE_NAME",
                 "queues[1].name", id="duplicate-queue-name"),
    pytest.param(_two_storages({"storage_capacity_gib": 1200, "per_unit_storage_throughput": 125}),
                 "TOO_MANY_NEW_FSX", "storage[1]", id="two-new-fsx"),
    pytest.param(_two_storages({"file_system_id": "fs-0123456789abcdef1"}, mount_dir="/fsx"),
                 "DUPLICATE_MOUNT_DIR", "storage[1].mount_dir", id="same-mount-dir"),
    pytest.param(_both(_storage(), _set("queues.0.compute.0.instance_type", "g6.xlarge"),
                       _set("queues.0.subnet_ids", ["subnet-0aa", "subnet-0bb"])),
                 "MANAGED_FSX_MULTI_SUBNET", "storage[0]", id="new-fsx-with-two-subnets"),
    pytest.param(_storage(name="my fsx!"), "BAD_NAME", "storage[0].name", id="storage-name-chars"),
]


@pytest.mark.parametrize("edit, code, path", ERROR_CASES)
def test_rule_violation_is_an_error_naming_the_spec_field(base_spec, edit, code, path):
    edit(base_spec)
    errors = [(f.code, f.path) for f in _findings(base_spec) if f.level == "error"]
    assert (code, path) in errors


def test_the_base_spec_has_no_findings(base_spec):
    assert _findings(base_spec) == []


def test_unknown_instance_type_message_suggests_the_closest(base_spec):
    _set("queues.0.compute.0.instance_type", "p5.48xl")(base_spec)
    msgs = [f"{f.path}: {f.message}" for f in _findings(base_spec)]
    assert any(m.startswith("queues[0].compute[0].instance_type: 'p5.48xl' is not known; "
                            "did you mean 'p5.48xlarge'? (stricter than") for m in msgs)


def test_mixed_instance_types_in_one_queue_is_a_warning(base_spec):
    base_spec["queues"][0]["compute"].append({"instance_type": "p4d.24xlarge", "max_nodes": 1})
    found = [(f.level, f.code, f.path) for f in _findings(base_spec)]
    assert ("warning", "MIXED_INSTANCE_TYPES", "queues[0].compute") in found
    assert not [x for x in found if x[0] == "error"]


def test_efa_queue_with_placement_group_off_warns_unless_reserved(base_spec):
    base_spec["queues"][0]["placement_group"] = False
    found = [(f.level, f.code) for f in _findings(base_spec)]
    assert ("warning", "EFA_PLACEMENT_GROUP_OFF") in found
    base_spec["queues"][0]["reservation_id"] = "cr-0123456789abcdef0"
    found = [(f.level, f.code) for f in _findings(base_spec)]
    assert ("info", "EFA_PLACEMENT_GROUP_OFF") in found


def test_unknown_type_is_an_error_and_a_type_outside_the_training_table_gets_its_efa_default(
        base_spec):
    _set("queues.0.compute.0.instance_type", "qq.huge")(base_spec)
    result = check_spec(ClusterSpec.model_validate(base_spec), run_schema=False)
    assert [(f.level, f.code) for f in result.findings] == [("error", "UNKNOWN_INSTANCE_TYPE")]
    assert "--refresh" in result.findings[0].message
    _set("queues.0.compute.0.instance_type", "c5n.18xlarge")(base_spec)
    result = check_spec(ClusterSpec.model_validate(base_spec), run_schema=False)
    assert result.findings == []
    queue = result.config["Scheduling"]["SlurmQueues"][0]
    assert queue["ComputeResources"][0]["Efa"] == {"Enabled": True}
    assert queue["Networking"]["PlacementGroup"] == {"Enabled": True}


def _hand_written_efa_queue(**networking: Any) -> dict[str, Any]:
    return {"Region": "us-east-1", "Scheduling": {"SlurmQueues": [{
        "Name": "q", "CapacityType": "ONDEMAND",
        "Networking": {"SubnetIds": ["subnet-1"], **networking},
        "ComputeResources": [{"Name": "c", "InstanceType": "p5.48xlarge", "MinCount": 0,
                              "MaxCount": 1, "Efa": {"Enabled": True}}]}]}}


def test_hand_written_efa_queue_without_placement_group_key_is_an_error():
    findings = run_rules(_hand_written_efa_queue())
    assert [(f.code, f.path) for f in findings if f.level == "error"] == [
        ("EFA_NO_PLACEMENT_GROUP", "Scheduling.SlurmQueues[0].Networking.PlacementGroup")]


def test_hand_written_efa_queue_with_explicit_placement_group_passes():
    assert run_rules(_hand_written_efa_queue(PlacementGroup={"Enabled": True})) == []


def test_fsx_delete_policy_warns(base_spec):
    _storage(deletion_policy="Delete")(base_spec)
    found = [(f.level, f.code, f.path) for f in _findings(base_spec)]
    assert ("warning", "FSX_DELETE_ON_CLUSTER_DELETE", "storage[0].deletion_policy") in found


def test_one_new_and_one_existing_fsx_on_their_own_dirs_pass(base_spec):
    _two_storages({"file_system_id": "fs-0123456789abcdef1"})(base_spec)
    assert [f for f in _findings(base_spec) if f.level == "error"] == []


def test_own_security_groups_on_an_efa_queue_warn_that_only_deep_checks_them():
    findings = run_rules(_hand_written_efa_queue(PlacementGroup={"Enabled": True},
                                                 SecurityGroups=["sg-0123456789abcdef0"]))
    assert [(f.level, f.code, f.path) for f in findings] == [
        ("warning", "EFA_SECURITY_GROUP_UNCHECKED",
         "Scheduling.SlurmQueues[0].Networking.SecurityGroups")]
    assert "--deep" in findings[0].message and "to and from itself" in findings[0].message
