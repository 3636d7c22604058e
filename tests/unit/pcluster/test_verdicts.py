"""hpcflow's verdict next to ParallelCluster's on configs as admins write them.

Every row is a ParallelCluster config written here, on the pattern of a real config that hpcflow
once judged wrongly. ParallelCluster's verdict is its real schema plus its offline validators
(``_pcluster_oracle``); hpcflow's is ``hpcflow cluster validate``'s (rules, then the schema).
hpcflow's errors must cover ParallelCluster's, and an error ParallelCluster does not raise must
say why hpcflow is stricter.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from _pcluster_oracle import pcluster_verdict

from hpcflow.pcluster.rules import run_rules
from hpcflow.pcluster.schema import schema_check

SUBNET = "subnet-0a1b2c3d4e5f60718"
SUBNET2 = "subnet-0b1b2c3d4e5f60719"
BASE: dict[str, Any] = {
    "Region": "us-east-1",
    "Image": {"Os": "alinux2023"},
    "HeadNode": {"InstanceType": "m5.2xlarge", "Networking": {"SubnetId": SUBNET}},
    "Scheduling": {"Scheduler": "slurm", "SlurmQueues": [{
        "Name": "train", "Networking": {"SubnetIds": [SUBNET]},
        "ComputeResources": [{"Name": "gpu", "InstanceType": "g6.xlarge", "MinCount": 0,
                              "MaxCount": 2}]}]},
}


def _cfg(*edits) -> dict[str, Any]:
    cfg = copy.deepcopy(BASE)
    for edit in edits:
        edit(cfg)
    return cfg


def _q(cfg: dict[str, Any]) -> dict[str, Any]:
    return cfg["Scheduling"]["SlurmQueues"][0]


def _slurm(*settings: dict[str, Any], database: bool = False):
    def edit(cfg: dict[str, Any]) -> None:
        s = cfg["Scheduling"].setdefault("SlurmSettings", {})
        s["CustomSlurmSettings"] = list(settings)
        if database:
            s["Database"] = {"Uri": "db.example.com:3306", "UserName": "slurm",
                             "PasswordSecretArn": "arn:aws:secretsmanager:us-east-1:123456789012:"
                                                  "secret:slurmdb-AbCdEf"}
    return edit


def _queue(**keys: Any):
    return lambda cfg: _q(cfg).update(keys)


def _compute(i: int = 0, **keys: Any):
    return lambda cfg: _q(cfg)["ComputeResources"][i].update(keys)


def _queue_net(**keys: Any):
    return lambda cfg: _q(cfg)["Networking"].update(keys)


def _efa_crs(*crs: dict[str, Any]):
    def edit(cfg: dict[str, Any]) -> None:
        _q(cfg)["ComputeResources"] = [
            {"Name": f"c{i}", "InstanceType": "p5.48xlarge", "MinCount": 0, "MaxCount": 1,
             "Efa": {"Enabled": True}, **cr} for i, cr in enumerate(crs)]
    return edit


def _fsx(**settings: Any):
    def edit(cfg: dict[str, Any]) -> None:
        cfg["SharedStorage"] = [{"Name": "fsx", "MountDir": "/fsx", "StorageType": "FsxLustre",
                                 "FsxLustreSettings": {"DeletionPolicy": "Retain", **settings}}]
    return edit


def _storages(*kinds: tuple[str, str], name: str | None = None):
    def edit(cfg: dict[str, Any]) -> None:
        cfg["SharedStorage"] = [{"Name": name or f"s{i}", "MountDir": mount, "StorageType": kind}
                                for i, (kind, mount) in enumerate(kinds)]
    return edit


PG_ON = {"Networking": {"PlacementGroup": {"Enabled": True}}}
PG_OFF = {"Networking": {"PlacementGroup": {"Enabled": False}}}

# (config, hpcflow error codes expected (empty: accepted)).
CASES = [
    pytest.param(_cfg(_slurm({"JobAcctGatherType": "jobacct_gather/cgroup"},
                             {"AccountingStorageType": "accounting_storage/slurmdbd"})),
                 set(), id="accounting-settings-without-database"),
    pytest.param(_cfg(_slurm({"JobAcctGatherType": "jobacct_gather/cgroup"}, database=True)),
                 {"SLURM_SETTING_FORBIDDEN"}, id="accounting-settings-with-database"),
    pytest.param(_cfg(_slurm({"Prolog": "/opt/x.sh"})), {"SLURM_SETTING_FORBIDDEN"},
                 id="global-prolog"),
    pytest.param(_cfg(_slurm({"PartitionName": "all", "Nodes": "ALL", "SuspendTime": "INFINITE",
                              "ResumeTimeout": 1800})),
                 set(), id="partition-line-with-suspend-settings"),
    pytest.param(_cfg(_slurm({"NodeName": "burst-st-1", "CPUs": 4})),
                 {"SLURM_CUSTOM_NODE_NAME"}, id="custom-node-st-name"),
    pytest.param(_cfg(_slurm({"NodeName": "burst[1-4]", "CPUs": 4, "State": "CLOUD"})),
                 set(), id="custom-node-line"),
    pytest.param(_cfg(_queue(CustomSlurmSettings={"MaxTime": "2-00:00:00", "Default": "NO"})),
                 set(), id="queue-settings-mapping"),
    pytest.param(_cfg(_queue(CustomSlurmSettings={"OverSubscribe": "YES"})),
                 {"SLURM_SETTING_FORBIDDEN"}, id="queue-oversubscribe"),
    pytest.param(_cfg(_queue(CustomSlurmSettings=[{"MaxTime": "2-00:00:00"}])),
                 {"SCHEMA"}, id="queue-settings-as-list"),
    pytest.param(_cfg(_compute(CustomSlurmSettings={"Weight": 5})),
                 {"SLURM_SETTING_FORBIDDEN"}, id="compute-weight"),
    pytest.param(_cfg(_compute(CustomSlurmSettings={"Features": "l4"})),
                 set(), id="compute-features"),
    pytest.param(_cfg(_slurm({"Prolog ": "/tmp/p.sh"})),
                 {"SLURM_SETTING_KEY", "SLURM_SETTING_FORBIDDEN"}, id="key-trailing-space"),
    pytest.param(_cfg(_slurm({"Pro\u200blog": "/tmp/p.sh"})),
                 {"SLURM_SETTING_KEY", "SLURM_SETTING_FORBIDDEN"}, id="key-zero-width"),
    pytest.param(_cfg(_slurm({"SchedulerParameters": "x\nProlog=/tmp/p.sh"})),
                 {"SLURM_SETTING_VALUE"}, id="value-with-newline"),
    pytest.param(_cfg(_queue(CustomSlurmSettings={"MaxTime": "1\nProlog=/tmp/p.sh"})),
                 {"SLURM_SETTING_VALUE"}, id="queue-value-with-newline"),
    pytest.param(_cfg(_efa_crs(PG_ON)), set(), id="efa-compute-level-placement-group"),
    pytest.param(_cfg(_efa_crs(PG_OFF, PG_ON)), set(), id="efa-compute-level-pg-off-and-on"),
    pytest.param(_cfg(_efa_crs(PG_ON, {})), {"EFA_NO_PLACEMENT_GROUP"},
                 id="efa-one-compute-without-placement-group"),
    pytest.param(_cfg(_efa_crs({}), _queue_net(PlacementGroup={"Name": "my-pg"})), set(),
                 id="efa-queue-placement-group-by-name"),
    pytest.param(_cfg(_efa_crs({}), _queue(CapacityType="CAPACITY_BLOCK",
                                           CapacityReservationTarget={
                                               "CapacityReservationId": "cr-0123456789abcdef0"}),
                      _compute(MinCount=1, MaxCount=1)),
                 set(), id="efa-capacity-block-needs-no-placement-group"),
    pytest.param(_cfg(_fsx(StorageCapacity=6000, DeploymentType="PERSISTENT_1",
                           StorageType="HDD", PerUnitStorageThroughput=12)),
                 set(), id="fsx-hdd-12-6000"),
    pytest.param(_cfg(_fsx(StorageCapacity=1800, DeploymentType="PERSISTENT_1",
                           StorageType="HDD", PerUnitStorageThroughput=40,
                           DriveCacheType="READ")),
                 set(), id="fsx-hdd-40-1800-with-cache"),
    pytest.param(_cfg(_fsx(StorageCapacity=1800, DeploymentType="PERSISTENT_1",
                           StorageType="HDD", PerUnitStorageThroughput=12)),
                 {"FSX_CAPACITY"}, id="fsx-hdd-12-1800"),
    pytest.param(_cfg(_fsx(StorageCapacity=6000, DeploymentType="PERSISTENT_2",
                           StorageType="HDD", PerUnitStorageThroughput=12)),
                 {"FSX_STORAGE_TYPE"}, id="fsx-hdd-on-persistent-2"),
    pytest.param(_cfg(_fsx(StorageCapacity=2400, DeploymentType="PERSISTENT_1",
                           PerUnitStorageThroughput=40)),
                 {"FSX_THROUGHPUT"}, id="fsx-ssd-with-hdd-throughput"),
    pytest.param(_cfg(_compute(InstanceType=None, Efa={"Enabled": True}),
                      lambda c: _q(c)["ComputeResources"][0].pop("InstanceType"),
                      _compute(Instances=[{"InstanceType": "m5.xlarge"},
                                          {"InstanceType": "m5a.xlarge"}]),
                      _queue_net(PlacementGroup={"Enabled": True})),
                 {"EFA_UNSUPPORTED"}, id="efa-on-flexible-instances-without-efa"),
    pytest.param(_cfg(lambda c: _q(c)["ComputeResources"][0].pop("InstanceType"),
                      _compute(Instances=[{"InstanceType": "c5n.18xlarge"},
                                          {"InstanceType": "c5n.metal"}],
                               Efa={"Enabled": True}),
                      _queue_net(PlacementGroup={"Enabled": True})),
                 set(), id="efa-on-flexible-instances-with-efa"),
    pytest.param(_cfg(lambda c: _q(c)["ComputeResources"][0].pop("InstanceType"),
                      _compute(Instances=[{"InstanceType": "c5n.18xlarge"},
                                          {"InstanceType": "c5n.9xlarge"}])),
                 {"FLEXIBLE_TYPES_DIFFER"}, id="flexible-types-with-different-vcpus"),
    pytest.param(_cfg(lambda c: _q(c)["ComputeResources"][0].pop("InstanceType"),
                      _compute(Instances=[{"InstanceType": "c5n.18xlarge"},
                                          {"InstanceType": "c5n.9xlarge"}],
                               DisableSimultaneousMultithreading=True)),
                 {"FLEXIBLE_TYPES_DIFFER"}, id="flexible-types-with-different-cores"),
    pytest.param(_cfg(lambda c: _q(c)["ComputeResources"][0].pop("InstanceType"),
                      _compute(Instances=[{"InstanceType": "g6.12xlarge"},
                                          {"InstanceType": "g6e.12xlarge"}])),
                 set(), id="flexible-types-alike"),
    pytest.param(_cfg(lambda c: _q(c)["ComputeResources"][0].pop("InstanceType"),
                      _compute(Instances=[{"InstanceType": "g5.8xlarge"},
                                          {"InstanceType": "m5.8xlarge"}])),
                 {"FLEXIBLE_TYPES_DIFFER"}, id="flexible-gpu-and-cpu-types"),
    pytest.param(_cfg(_compute(InstanceType="m5.xlarge", Efa={"Enabled": True}),
                      _queue_net(PlacementGroup={"Enabled": True})),
                 {"EFA_UNSUPPORTED"}, id="efa-on-m5-outside-training-table"),
    pytest.param(_cfg(_compute(InstanceType="t3.micro", Efa={"Enabled": True}),
                      _queue_net(PlacementGroup={"Enabled": True})),
                 {"EFA_UNSUPPORTED"}, id="efa-on-t3"),
    pytest.param(_cfg(_compute(InstanceType="c5.xlarge")), set(), id="c5-without-efa"),
    pytest.param(_cfg(lambda c: c["HeadNode"].update(InstanceType="m5.2xl")),
                 {"UNKNOWN_INSTANCE_TYPE"}, id="head-node-type-typo"),
    pytest.param(_cfg(_efa_crs({}), _queue_net(SubnetIds=[SUBNET, SUBNET2])),
                 {"EFA_MULTIPLE_SUBNETS"}, id="efa-two-subnets"),
    pytest.param(_cfg(_queue(CapacityType="CAPACITY_BLOCK"), _compute(MinCount=1, MaxCount=1)),
                 {"CAPACITY_BLOCK_NO_RESERVATION"}, id="capacity-block-without-reservation"),
    pytest.param(_cfg(_compute(MinCount=3, MaxCount=2)), {"MIN_ABOVE_MAX"}, id="min-above-max"),
    pytest.param(_cfg(_fsx(StorageCapacity=3600, DeploymentType="SCRATCH_1")), set(),
                 id="fsx-scratch1-3600"),
    pytest.param(_cfg(_storages(("Efs", "/a"), ("Efs", "/b"))), {"TOO_MANY_NEW_EFS"},
                 id="two-new-efs"),
    pytest.param(_cfg(_storages(*[("Ebs", f"/e{i}") for i in range(6)])), {"TOO_MANY_EBS"},
                 id="six-shared-ebs"),
    pytest.param(_cfg(_storages(("Efs", "/a"), name="x" * 31)), {"NAME_TOO_LONG"},
                 id="storage-name-31-chars"),
    pytest.param(_cfg(_storages(("Efs", "/opt/slurm"))), {"RESERVED_MOUNT_DIR"},
                 id="mount-dir-opt-slurm"),
    pytest.param(_cfg(_storages(("Efs", "/var"))), {"RESERVED_MOUNT_DIR"}, id="mount-dir-var"),
    pytest.param(_cfg(_storages(("Efs", "/shared"))), set(), id="mount-dir-shared"),
    pytest.param(_cfg(_queue_net(PlacementGroup={"Enabled": False, "Id": "pg-train"})),
                 {"PLACEMENT_GROUP_NAMED_BUT_OFF"}, id="queue-pg-off-with-id"),
    pytest.param(_cfg(_queue_net(PlacementGroup={"Enabled": False, "Name": "pg-train"})),
                 {"PLACEMENT_GROUP_NAMED_BUT_OFF"}, id="queue-pg-off-with-name"),
    pytest.param(_cfg(_queue_net(PlacementGroup={"Name": "pg-a", "Id": "pg-b"})),
                 {"PLACEMENT_GROUP_NAME_AND_ID"}, id="queue-pg-id-and-name"),
    pytest.param(_cfg(_compute(Networking={"PlacementGroup": {"Enabled": False, "Id": "pg"}})),
                 {"PLACEMENT_GROUP_NAMED_BUT_OFF"}, id="compute-pg-off-with-id"),
    pytest.param(_cfg(_compute(Networking={"PlacementGroup": {"Name": "a", "Id": "b"}})),
                 {"PLACEMENT_GROUP_NAME_AND_ID"}, id="compute-pg-id-and-name"),
    pytest.param(_cfg(_queue_net(PlacementGroup={"Name": "pg-train"})), set(),
                 id="queue-pg-name-implies-enabled"),
    pytest.param(_cfg(_queue_net(PlacementGroup={"Enabled": True, "Id": "pg-train"})), set(),
                 id="queue-pg-on-with-id"),
    pytest.param(_cfg(lambda c: c.update(Region="us-east-9")), {"UNKNOWN_REGION"},
                 id="unknown-region"),
    pytest.param(_cfg(lambda c: c["HeadNode"].update(Ssh={"KeyName": ""})), {"BAD_KEY_NAME"},
                 id="empty-key-name"),
    pytest.param(_cfg(lambda c: c["HeadNode"].update(Iam={"S3Access": [{"BucketName": "a..b"}]})),
                 {"BAD_BUCKET_NAME"}, id="bucket-double-dot"),
    pytest.param(_cfg(lambda c: c["HeadNode"].update(Iam={"S3Access": [{"BucketName": "ck*"}]})),
                 set(), id="bucket-wildcard"),
    pytest.param(_cfg(lambda c: c["Scheduling"].update(SlurmSettings={"ScaledownIdletime":
                                                                      10**12})),
                 {"SCALEDOWN_TOO_LONG"}, id="scaledown-huge"),
    pytest.param(_cfg(_fsx(StorageCapacity=2_400_000_000, DeploymentType="PERSISTENT_2",
                           PerUnitStorageThroughput=125)), {"FSX_CAPACITY"},
                 id="fsx-capacity-huge"),
    # ParallelCluster's schema reads counts as marshmallow's non-strict Integer: a float or a
    # text of digits is taken as its int, and a fraction cut off without a word.
    pytest.param(_cfg(lambda c: c["HeadNode"].update(LocalStorage={"RootVolume": {"Size":
                                                                                1e20}})),
                 {"EBS_TOO_LARGE"}, id="root-volume-float-1e20"),
    pytest.param(_cfg(lambda c: c["HeadNode"].update(LocalStorage={"RootVolume": {
        "Size": "100000000000000000000"}})), {"EBS_TOO_LARGE"}, id="root-volume-digits-text"),
    pytest.param(_cfg(lambda c: c["HeadNode"].update(LocalStorage={"RootVolume": {"Size":
                                                                                40.5}})),
                 {"NOT_WHOLE"}, id="root-volume-fraction"),
    pytest.param(_cfg(lambda c: c["HeadNode"].update(LocalStorage={"RootVolume": {"Size":
                                                                                "100"}})),
                 set(), id="root-volume-digits-text-in-range"),
    pytest.param(_cfg(lambda c: c["Scheduling"].update(SlurmSettings={"ScaledownIdletime":
                                                                      1e20})),
                 {"SCALEDOWN_TOO_LONG"}, id="scaledown-float"),
    pytest.param(_cfg(_fsx(StorageCapacity=1.2e20, DeploymentType="PERSISTENT_2",
                           PerUnitStorageThroughput=125)), {"FSX_CAPACITY"},
                 id="fsx-capacity-float"),
    pytest.param(_cfg(_compute(MaxCount=1e20)), {"TOO_MANY_NODES"}, id="max-count-float"),
    pytest.param(_cfg(_compute(MaxCount=10**20)), {"TOO_MANY_NODES"}, id="max-count-huge"),
    pytest.param(_cfg(_compute(MaxCount=100_000)), set(), id="max-count-at-the-bound"),
]


def _hpcflow_errors(cfg: dict[str, Any]):
    return [f for f in run_rules(cfg) + schema_check(cfg) if f.level == "error"]


@pytest.mark.parametrize(("cfg", "codes"), CASES)
def test_hpcflow_verdict_covers_parallelclusters_and_explains_any_extra(cfg, codes):
    schema_errors, validator_errors = pcluster_verdict(cfg)
    pcluster_rejects = bool(schema_errors or validator_errors)
    errors = _hpcflow_errors(cfg)
    assert {f.code for f in errors} == codes, [str(f) for f in errors]
    if pcluster_rejects:
        assert errors, f"ParallelCluster rejects it, hpcflow does not: {schema_errors} " \
                       f"{validator_errors}"
    else:
        for f in errors:
            assert "stricter than ParallelCluster" in f.message, (
                f"ParallelCluster accepts it; {f} must say why hpcflow is stricter")


def test_flexible_resource_types_are_named_in_the_mixed_types_warning():
    cfg = _cfg(lambda c: _q(c)["ComputeResources"][0].pop("InstanceType"),
               _compute(Instances=[{"InstanceType": "g6.xlarge"}, {"InstanceType": "g6.2xlarge"}]))
    warnings = [f for f in run_rules(cfg) if f.code == "MIXED_INSTANCE_TYPES"]
    assert [w.value for w in warnings] == [["g6.2xlarge", "g6.xlarge"]]


def test_two_subnets_in_one_zone_are_refused_with_the_reason(monkeypatch):
    """ParallelCluster accepts an EFA queue over two subnets of one zone; hpcflow cannot see
    zones offline and says so."""
    import _pcluster_oracle

    monkeypatch.setattr(_pcluster_oracle, "_zone", lambda subnet_id: "us-east-1-az1")
    cfg = _cfg(_efa_crs({}), _queue_net(SubnetIds=[SUBNET, SUBNET2],
                                        PlacementGroup={"Enabled": True}))
    assert pcluster_verdict(cfg) == ([], [])
    errors = _hpcflow_errors(cfg)
    assert [f.code for f in errors] == ["EFA_MULTIPLE_SUBNETS"]
    assert "stricter than ParallelCluster" in errors[0].message


def test_the_oracle_runs_at_least_the_expected_validators():
    import _pcluster_oracle

    assert pcluster_verdict(copy.deepcopy(BASE)) == ([], [])
    assert len(_pcluster_oracle.LAST_RUN) >= _pcluster_oracle.MIN_OFFLINE_VALIDATORS
    assert {"NameValidator", "EfaValidator", "MaxCountValidator"} <= set(_pcluster_oracle.LAST_RUN)
    pcluster_verdict(_cfg(_storages(("Efs", "/a")),
                          _queue_net(PlacementGroup={"Enabled": True, "Name": "pg"})))
    assert {"PlacementGroupNamingValidator", "SharedStorageMountDirValidator"} \
        <= set(_pcluster_oracle.LAST_RUN)


def test_the_oracle_fails_when_a_registration_fails(monkeypatch):
    """It used to skip such a resource's validators silently (``except Exception: continue``)."""
    from pcluster.config.cluster_config import SlurmClusterConfig

    def broken(self, context=None):  # noqa: ANN001, ANN202
        raise RuntimeError("asks AWS")

    monkeypatch.setattr(SlurmClusterConfig, "_register_validators", broken)
    with pytest.raises(AssertionError, match="could not register the validators of "
                                             "SlurmClusterConfig: RuntimeError: asks AWS"):
        pcluster_verdict(copy.deepcopy(BASE))


def test_the_oracle_fails_when_too_few_validators_ran(monkeypatch):
    import _pcluster_oracle

    monkeypatch.setattr(_pcluster_oracle, "OFFLINE", frozenset({"NameValidator"}))
    with pytest.raises(AssertionError, match="only 1 offline validators ran"):
        pcluster_verdict(copy.deepcopy(BASE))
