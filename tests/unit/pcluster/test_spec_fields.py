"""Each first-class spec field lands on its ParallelCluster key, the real schema accepts the
result, and the ``pcluster:`` block is deep-merged over it by the documented rules."""

from __future__ import annotations

from typing import Any

import pytest

from hpcflow.pcluster.merge import deep_merge, raw_delta
from hpcflow.pcluster.render import check_spec
from hpcflow.spec.cluster import ClusterSpec

ARN_POLICY = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"
ARN_GROUP = "arn:aws:resource-groups:us-east-1:123456789012:group/odcr"
SG = "sg-0123456789abcdef0"


def _at(cfg: Any, path: str) -> Any:
    node = cfg
    for part in path.split("."):
        node = node[int(part)] if part.isdigit() else node[part]
    return node


def _edit(path: str, value: Any):
    def edit(spec: dict[str, Any]) -> None:
        node: Any = spec
        parts = path.split(".")
        for part in parts[:-1]:
            node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
        last = parts[-1]
        node[int(last) if last.isdigit() else last] = value
    return edit


Q = "Scheduling.SlurmQueues.0"
CR = Q + ".ComputeResources.0"
FIELDS = [
    pytest.param("queues.0.compute_root_volume_gib", 200,
                 Q + ".ComputeSettings.LocalStorage.RootVolume.Size", 200, id="compute-root-volume"),
    pytest.param("head_node.additional_iam_policies", [ARN_POLICY],
                 "HeadNode.Iam.AdditionalIamPolicies", [{"Policy": ARN_POLICY}], id="head-iam"),
    pytest.param("queues.0.additional_iam_policies", [ARN_POLICY],
                 Q + ".Iam.AdditionalIamPolicies", [{"Policy": ARN_POLICY}], id="queue-iam"),
    pytest.param("storage", [{"type": "ebs", "name": "scratch", "mount_dir": "/scratch",
                              "size_gib": 500, "volume_type": "gp3"}],
                 "SharedStorage.0.EbsSettings",
                 {"Size": 500, "VolumeType": "gp3", "DeletionPolicy": "Retain"}, id="shared-ebs"),
    pytest.param("queues.0.custom_actions", {"on_node_start": [{"script": "s3://b-x/q.sh"}]},
                 Q + ".CustomActions.OnNodeStart.Sequence", [{"Script": "s3://b-x/q.sh"}],
                 id="queue-custom-actions"),
    pytest.param("head_node.custom_actions",
                 {"on_node_updated": [{"script": "s3://b-x/u.sh", "args": ["-v"]}]},
                 "HeadNode.CustomActions.OnNodeUpdated.Sequence",
                 [{"Script": "s3://b-x/u.sh", "Args": ["-v"]}], id="head-custom-actions"),
    pytest.param("head_node.additional_security_groups", [SG],
                 "HeadNode.Networking.AdditionalSecurityGroups", [SG], id="head-extra-sg"),
    pytest.param("queues.0.additional_security_groups", [SG],
                 Q + ".Networking.AdditionalSecurityGroups", [SG], id="queue-extra-sg"),
    pytest.param("tags", {"team": "ml"}, "Tags", [{"Key": "team", "Value": "ml"}],
                 id="cluster-tags"),
    pytest.param("queues.0.tags", {"queue": "train"}, Q + ".Tags",
                 [{"Key": "queue", "Value": "train"}], id="queue-tags"),
    pytest.param("queues.0.compute.0.disable_smt", True,
                 CR + ".DisableSimultaneousMultithreading", True, id="disable-smt"),
    pytest.param("queues.0.compute.0", {"name": "flex", "instances": ["p5.48xlarge", "p5e.48xlarge"],
                                        "max_nodes": 2},
                 CR + ".Instances", [{"InstanceType": "p5.48xlarge"},
                                     {"InstanceType": "p5e.48xlarge"}], id="flexible-instances"),
    pytest.param("storage", [{"type": "fsx_openzfs", "name": "zfs", "mount_dir": "/zfs",
                              "volume_id": "fsvol-0123456789abcdef0"}],
                 "SharedStorage.0", {"MountDir": "/zfs", "Name": "zfs", "StorageType": "FsxOpenZfs",
                                     "FsxOpenZfsSettings": {"VolumeId": "fsvol-0123456789abcdef0"}},
                 id="fsx-openzfs"),
    pytest.param("storage", [{"type": "fsx_ontap", "name": "ontap", "mount_dir": "/ontap",
                              "volume_id": "fsvol-0123456789abcdef0"}],
                 "SharedStorage.0.StorageType", "FsxOntap", id="fsx-ontap"),
    pytest.param("storage", [{"type": "efs", "name": "efs", "mount_dir": "/efs",
                              "file_system_id": "fs-0123456789abcdef0"}],
                 "SharedStorage.0.EfsSettings", {"FileSystemId": "fs-0123456789abcdef0"},
                 id="existing-efs"),
    pytest.param("head_node.imds_secured", False, "HeadNode.Imds.Secured", False,
                 id="head-imds-secured"),
    pytest.param("login_nodes", [{"name": "login", "instance_type": "m5.xlarge", "count": 2,
                                  "subnet_id": "subnet-0a1b2c3d4e5f60718"}],
                 "LoginNodes.Pools.0.Count", 2, id="login-nodes"),
    pytest.param("queues.0.compute.0.placement_group_name", "pg-x",
                 CR + ".Networking.PlacementGroup", {"Name": "pg-x"},
                 id="compute-placement-group"),
    pytest.param("queues.0.custom_ami", "ami-0123456789abcdef0", Q + ".Image.CustomAmi",
                 "ami-0123456789abcdef0", id="queue-ami"),
    pytest.param("storage", [{"name": "fsx", "storage_capacity_gib": 1800,
                              "deployment_type": "PERSISTENT_1", "storage_type": "HDD",
                              "per_unit_storage_throughput": 40,
                              "import_path": "s3://data-x/in",
                              "automatic_backup_retention_days": 7}],
                 "SharedStorage.0.FsxLustreSettings.ImportPath", "s3://data-x/in",
                 id="fsx-hdd-import-backup"),
    pytest.param("queues.0.reservation_resource_group_arn", ARN_GROUP,
                 Q + ".CapacityReservationTarget",
                 {"CapacityReservationResourceGroupArn": ARN_GROUP}, id="resource-group-arn"),
]


@pytest.mark.parametrize(("field", "value", "key", "want"), FIELDS)
def test_field_renders_its_parallelcluster_key_and_the_schema_accepts_it(base_spec, field, value,
                                                                         key, want):
    _edit(field, value)(base_spec)
    result = check_spec(ClusterSpec.model_validate(base_spec))
    assert result.schema_checked and result.errors == [], [str(f) for f in result.errors]
    assert _at(result.config, key) == want


def test_compute_placement_group_replaces_the_queue_default(base_spec):
    base_spec["queues"][0]["compute"][0]["placement_group"] = True
    config = check_spec(ClusterSpec.model_validate(base_spec), run_schema=False).config
    queue = config["Scheduling"]["SlurmQueues"][0]
    assert "PlacementGroup" not in queue["Networking"]
    assert queue["ComputeResources"][0]["Networking"] == {"PlacementGroup": {"Enabled": True}}


def test_compute_needs_instance_type_or_instances_not_both(base_spec):
    from pydantic import ValidationError

    base_spec["queues"][0]["compute"][0]["instances"] = ["p5.48xlarge"]
    with pytest.raises(ValidationError, match="instance_type, or instances"):
        ClusterSpec.model_validate(base_spec)


# ---- the pcluster: escape hatch --------------------------------------------------------------

MERGE = [
    pytest.param({"a": 1, "b": {"c": 1}}, {"b": {"d": 2}}, {"a": 1, "b": {"c": 1, "d": 2}},
                 id="mappings-merge"),
    pytest.param({"a": 1}, {"a": 2}, {"a": 2}, id="raw-wins"),
    pytest.param({"a": [1, 2]}, {"a": [3]}, {"a": [3]}, id="plain-list-replaced"),
    pytest.param({"a": 1, "b": 2}, {"b": None}, {"a": 1}, id="null-removes"),
    pytest.param({"q": [{"Name": "x", "v": 1}, {"Name": "y", "v": 1}]},
                 {"q": [{"Name": "y", "v": 2, "w": 3}]},
                 {"q": [{"Name": "x", "v": 1}, {"Name": "y", "v": 2, "w": 3}]},
                 id="named-items-merge-by-name"),
    pytest.param({"q": [{"Name": "x"}]}, {"q": [{"Name": "z", "v": None, "u": 1}]},
                 {"q": [{"Name": "x"}, {"Name": "z", "u": 1}]}, id="new-name-appended"),
]


@pytest.mark.parametrize(("base", "raw", "want"), MERGE)
def test_deep_merge_rules(base, raw, want):
    assert deep_merge(base, raw) == want
    delta = raw_delta(base, want)
    assert deep_merge(base, delta or {}) == want


def test_pcluster_block_sets_keys_without_fields_and_wins(base_spec):
    base_spec["pcluster"] = {
        "Scheduling": {"SlurmSettings": {"EnableMemoryBasedScheduling": True},
                       "SlurmQueues": [{"Name": "train", "ComputeResources": [
                           {"Name": "p5-48xlarge", "Efa": {"GdrSupport": False}}]}]},
        "Monitoring": {"DetailedMonitoring": True}, "Imds": None}
    result = check_spec(ClusterSpec.model_validate(base_spec))
    assert result.errors == [] and result.schema_checked
    cfg = result.config
    assert cfg["Scheduling"]["SlurmSettings"]["EnableMemoryBasedScheduling"] is True
    assert cfg["Scheduling"]["SlurmSettings"]["ScaledownIdletime"] == 10  # rendered, kept
    cr = cfg["Scheduling"]["SlurmQueues"][0]["ComputeResources"][0]
    assert cr["Efa"] == {"Enabled": True, "GdrSupport": False}
    assert cfg["Monitoring"]["DetailedMonitoring"] is True and "Imds" not in cfg


def test_a_problem_in_the_pcluster_block_is_reported_on_it(base_spec):
    base_spec["pcluster"] = {"Scheduling": {"SlurmSettings": {"CustomSlurmSettings": [
        {"Prolog": "/x.sh"}]}}}
    result = check_spec(ClusterSpec.model_validate(base_spec), run_schema=False)
    # The item of the list in the pcluster block is named, by its index there.
    assert [(f.code, f.path) for f in result.errors] == [
        ("SLURM_SETTING_FORBIDDEN", "pcluster.Scheduling.SlurmSettings.CustomSlurmSettings[0]")]
    base_spec["pcluster"] = {"HeadNode": {"Bogus": 1}}
    result = check_spec(ClusterSpec.model_validate(base_spec))
    assert [(f.code, f.path) for f in result.errors] == [("SCHEMA", "pcluster.HeadNode.Bogus")]


def test_an_item_of_a_named_list_in_the_pcluster_block_is_named_by_its_index_there(base_spec):
    # SharedStorage merges by Name: the raw block's item 1 lands wherever its Name is rendered.
    base_spec["pcluster"] = {"SharedStorage": [
        {"Name": "ok", "StorageType": "Ebs", "MountDir": "/ok"},
        {"Name": "big", "StorageType": "Ebs", "MountDir": "/big", "EbsSettings": {"Size": 1e20}},
        {"Name": "cut", "StorageType": "Ebs", "MountDir": "/cut", "EbsSettings": {"Size": 40.5}}]}
    result = check_spec(ClusterSpec.model_validate(base_spec), run_schema=False)
    assert sorted((f.code, f.path) for f in result.errors) == [
        ("EBS_TOO_LARGE", "pcluster.SharedStorage[1].EbsSettings.Size"),
        ("NOT_WHOLE", "pcluster.SharedStorage[2].EbsSettings.Size")]
