"""Against a moto server: EC2 instance facts (--refresh) and ParallelCluster's own validators
(--deep). EFA support and network cards come from DescribeInstanceTypes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from hpcflow.cli.main import cli

pytestmark = pytest.mark.moto


def _ec2(url: str):
    import boto3

    return boto3.client("ec2", region_name="us-east-1", endpoint_url=url)


def _network(url: str) -> dict[str, str]:
    """A VPC, one subnet, a key pair and an AMI in moto, for a config to point at."""
    ec2 = _ec2(url)
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24",
                               AvailabilityZone="us-east-1a")["Subnet"]["SubnetId"]
    key = f"key-{subnet}"
    ec2.create_key_pair(KeyName=key)
    ami = ec2.register_image(Name=f"ami-{subnet}", Architecture="x86_64",
                             RootDeviceName="/dev/xvda")["ImageId"]
    return {"subnet": subnet, "key": key, "ami": ami}


def _config(net: dict[str, str], instance_type: str) -> dict:
    return {
        "Region": "us-east-1",
        "Image": {"Os": "alinux2023", "CustomAmi": net["ami"]},
        "HeadNode": {"InstanceType": "m5.xlarge", "Networking": {"SubnetId": net["subnet"]},
                     "Ssh": {"KeyName": net["key"]}},
        "Scheduling": {"Scheduler": "slurm", "SlurmQueues": [{
            "Name": "train", "Networking": {"SubnetIds": [net["subnet"]],
                                            "PlacementGroup": {"Enabled": True}},
            "ComputeResources": [{"Name": "gpu", "InstanceType": instance_type, "MinCount": 0,
                                  "MaxCount": 2, "Efa": {"Enabled": True}}]}]},
    }


def _deep(tmp_path: Path, url: str, config: dict):
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(config))
    r = CliRunner().invoke(cli, ["cluster", "validate", str(path), "--deep", "--endpoint-url",
                                 url, "--json"])
    print(r.output)
    return r, json.loads(r.output)


def test_instances_refresh_reads_efa_and_network_cards_from_ec2(aws_env, moto_url, tmp_path):
    r = CliRunner().invoke(cli, ["cluster", "instances", "--family", "p5", "--refresh",
                                 "--endpoint-url", moto_url, "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)["data"]
    rows = {x["instance_type"]: x for x in data["instances"]}
    p5 = rows["p5.48xlarge"]
    assert (p5["efa_supported"], p5["max_network_cards"], p5["accelerator_count"]) == (True, 32, 8)
    assert p5["source"].startswith("ec2:us-east-1@")
    cache = Path(tmp_path / "cache" / "ec2-instance-types-us-east-1.json")
    assert "p5.48xlarge" in json.loads(cache.read_text())["instance_types"]


def test_deep_validation_reports_efa_on_a_type_ec2_says_lacks_it(aws_env, moto_url, tmp_path):
    net = _network(moto_url)
    r, doc = _deep(tmp_path, moto_url, _config(net, "g6.xlarge"))
    assert r.exit_code == 2
    assert ("ParallelCluster EfaValidator: Instance type 'g6.xlarge' does not support EFA"
            in doc["error"]["message"])


def test_deep_validation_raises_no_efa_finding_for_p5(aws_env, moto_url, tmp_path):
    net = _network(moto_url)
    r, doc = _deep(tmp_path, moto_url, _config(net, "p5.48xlarge"))
    text = doc["error"]["message"] if not doc["ok"] else json.dumps(doc["data"])
    assert "EfaValidator" not in text and "does not support EFA" not in text
    # ParallelCluster's validators really ran: moto's missing pieces show up as their findings.
    assert "ParallelCluster InstanceTypeBaseAMICompatibleValidator" in text


def test_deep_validation_checks_the_efa_security_group_self_rule(aws_env, moto_url, tmp_path):
    """Offline, a queue's own SecurityGroups only warn; --deep asks EC2 for their rules."""
    net = _network(moto_url)
    ec2 = _ec2(moto_url)
    vpc = ec2.describe_subnets(SubnetIds=[net["subnet"]])["Subnets"][0]["VpcId"]
    sg = ec2.create_security_group(GroupName=f"no-self-{net['subnet']}", Description="x",
                                   VpcId=vpc)["GroupId"]
    config = _config(net, "p5.48xlarge")
    config["Scheduling"]["SlurmQueues"][0]["Networking"]["SecurityGroups"] = [sg]
    r, doc = _deep(tmp_path, moto_url, config)
    assert r.exit_code == 2
    assert "ParallelCluster EfaSecurityGroupValidator" in doc["error"]["message"]
    assert "to and from the security group itself" in doc["error"]["message"]


def _accounting(cfg: dict) -> None:
    cfg["Scheduling"]["SlurmSettings"] = {"CustomSlurmSettings": [
        {"JobAcctGatherType": "jobacct_gather/cgroup"}]}


def _compute_level_pg(cfg: dict) -> None:
    queue = cfg["Scheduling"]["SlurmQueues"][0]
    del queue["Networking"]["PlacementGroup"]
    queue["ComputeResources"][0]["Networking"] = {"PlacementGroup": {"Enabled": True}}


def _hdd(cfg: dict) -> None:
    cfg["SharedStorage"] = [{"Name": "fsx", "MountDir": "/fsx", "StorageType": "FsxLustre",
                             "FsxLustreSettings": {"StorageCapacity": 6000,
                                                   "DeploymentType": "PERSISTENT_1",
                                                   "StorageType": "HDD",
                                                   "PerUnitStorageThroughput": 12,
                                                   "DeletionPolicy": "Retain"}}]


def _partition_line(cfg: dict) -> None:
    cfg["Scheduling"]["SlurmSettings"] = {"CustomSlurmSettings": [
        {"PartitionName": "all", "Nodes": "ALL", "SuspendTime": "INFINITE"}]}


@pytest.mark.parametrize(("edit", "validators"), [
    pytest.param(_accounting, ["CustomSlurmSettingsValidator"], id="accounting-without-db"),
    pytest.param(_compute_level_pg, ["EfaPlacementGroupValidator"], id="compute-level-pg"),
    pytest.param(_hdd, ["FsxStorageCapacityValidator", "FsxStorageTypeOptionsValidator"],
                 id="fsx-hdd"),
    pytest.param(_partition_line, ["CustomSlurmSettingsValidator"], id="partition-line"),
])
def test_configs_hpcflow_once_refused_pass_hpcflow_and_parallelclusters_validators(
        aws_env, moto_url, tmp_path, edit, validators):
    """ParallelCluster's own validators against moto agree with hpcflow's new verdict: no error
    from the validator each case is about, and no error from hpcflow's rules."""
    net = _network(moto_url)
    config = _config(net, "p5.48xlarge")
    edit(config)
    r, doc = _deep(tmp_path, moto_url, config)
    findings = doc["data"]["findings"]  # kept on failure too: moto lacks pieces other checks need
    errors = [(f["code"], f["message"]) for f in findings if f["level"] == "error"]
    for name in validators:
        assert not [e for e in errors if e[0] == name], errors
    hpcflow_codes = {"SLURM_SETTING_FORBIDDEN", "EFA_NO_PLACEMENT_GROUP", "FSX_CAPACITY",
                     "FSX_THROUGHPUT", "SCHEMA"}
    assert not [e for e in errors if e[0] in hpcflow_codes], errors
    ran = {f["code"] for f in findings}
    assert any(code.endswith("Validator") for code in ran), "ParallelCluster's validators ran"
