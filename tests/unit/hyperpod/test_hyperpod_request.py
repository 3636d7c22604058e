"""The CreateCluster request and the provisioning parameters rendered from a HyperPod spec: the
shape botocore's parameter validation takes, and hpcflow's mapping of head node, login pool and
queues onto instance groups."""

from __future__ import annotations

import json

import pytest
from hyperpod_example import EXAMPLE

from hpcflow.aws.requests import request_problems
from hpcflow.hyperpod.bundle import NODE_PLAN, PROVISIONING, provisioning_parameters
from hpcflow.hyperpod.request import build_request
from hpcflow.hyperpod.service import check_file, check_spec
from hpcflow.pcluster.catalog import Catalog
from hpcflow.resources import data_dir
from hpcflow.spec.cluster_loading import validate_cluster_spec

CAT = Catalog.offline()


def _plan(data):
    return build_request(validate_cluster_spec(data, "t"), CAT)


def test_the_example_request_passes_botocore_parameter_validation():
    checked = check_file(EXAMPLE)
    assert request_problems("sagemaker", "CreateCluster", checked.request) == []
    assert [f.level for f in checked.findings if f.level == "error"] == []


def test_groups_are_controller_login_and_one_worker_group_per_queue(spec_data):
    req = _plan(spec_data).request
    groups = {g["InstanceGroupName"]: g for g in req["InstanceGroups"]}
    assert list(groups) == ["controller", "login", "train"]
    assert groups["controller"]["InstanceType"] == "ml.m5.2xlarge"
    assert groups["controller"]["InstanceCount"] == 1
    assert groups["login"]["InstanceType"] == "ml.m5.xlarge"
    assert groups["train"]["InstanceType"] == "ml.p5.48xlarge"
    assert groups["train"]["InstanceCount"] == 4  # max_nodes: HyperPod keeps them all running
    assert groups["train"]["ThreadsPerCore"] == 1  # disable_smt: true
    assert groups["controller"]["ThreadsPerCore"] == 2
    for g in groups.values():
        assert g["LifeCycleConfig"] == {"SourceS3Uri": "s3://sagemaker-example-lifecycle/hpcflow",
                                        "OnCreate": "on_create.sh"}
        assert g["ExecutionRole"] == "arn:aws:iam::123456789012:role/hyperpod-execution"
        assert g["InstanceStorageConfigs"] == [{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}]
    # deep health checks only where there are GPUs (p5), not on the m5 controller and login
    assert groups["train"]["OnStartDeepHealthChecks"] == ["InstanceStress", "InstanceConnectivity"]
    assert "OnStartDeepHealthChecks" not in groups["controller"]
    assert req["VpcConfig"] == {"SecurityGroupIds": ["sg-0123456789abcdef0"],
                                "Subnets": ["subnet-0a1b2c3d4e5f60718"]}
    assert req["NodeRecovery"] == "Automatic"
    assert req["Tags"] == [{"Key": "team", "Value": "ml"}]
    assert "Orchestrator" not in req  # Slurm through lifecycle scripts


def test_without_login_pool_or_options_the_request_stays_minimal(spec_data):
    del spec_data["login_nodes"], spec_data["tags"]
    for key in ("ebs_volume_gib", "deep_health_checks", "fsx"):
        del spec_data["hyperpod"][key]
    spec_data["queues"][0]["compute"][0].pop("disable_smt")
    spec_data["queues"][0]["subnet_ids"] = ["subnet-0b", "subnet-0a1b2c3d4e5f60718"]
    plan = _plan(spec_data)
    req = plan.request
    assert [g["InstanceGroupName"] for g in req["InstanceGroups"]] == ["controller", "train"]
    assert all("InstanceStorageConfigs" not in g and "OnStartDeepHealthChecks" not in g
               for g in req["InstanceGroups"])
    assert req["InstanceGroups"][1]["ThreadsPerCore"] == 2
    assert "Tags" not in req
    assert req["VpcConfig"]["Subnets"] == ["subnet-0a1b2c3d4e5f60718", "subnet-0b"]
    params = provisioning_parameters(plan)
    assert "login_group" not in params and "fsx_dns_name" not in params
    assert request_problems("sagemaker", "CreateCluster", req) == []


def test_provisioning_parameters_name_the_groups_partitions_and_file_system(spec_data):
    spec_data["queues"].append({"name": "dev", "subnet_ids": ["subnet-0a1b2c3d4e5f60718"],
                                "compute": [{"instance_type": "g5.12xlarge", "max_nodes": 2}]})
    plan = _plan(spec_data)
    assert provisioning_parameters(plan) == {
        "version": "1.0.0", "workload_manager": "slurm", "controller_group": "controller",
        "login_group": "login",
        "worker_groups": [{"instance_group_name": "train", "partition_name": "train"},
                          {"instance_group_name": "dev", "partition_name": "dev"}],
        "fsx_dns_name": "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
        "fsx_mountname": "abcdefgh"}


def test_the_bundle_holds_the_entry_script_the_parameters_and_the_same_bootstrap_files():
    checked = check_file(EXAMPLE)
    root = data_dir("bootstrap")
    assert checked.files["on_create.sh"] == (root / "hyperpod" / "on_create.sh").read_bytes()
    for rel in ("hpcflow-bootstrap.sh", "lib/common.sh", "steps/10-efa.sh", "steps/20-nccl.sh",
                "steps/40-enroot-pyxis.sh", "steps/90-healthcheck.sh", "prolog/hpcflow-health.sh"):
        assert checked.files[rel] == (root / rel).read_bytes(), rel  # same pins and sha256
    plan = json.loads(checked.files[NODE_PLAN])
    assert plan["groups"]["train"] == {"role": "worker", "partition": "train",
                                       "steps": ["efa", "nccl", "nccl-tests", "healthcheck"],
                                       "instance_type": "p5.48xlarge"}
    assert plan["groups"]["controller"]["steps"] == []
    assert json.loads(checked.files[PROVISIONING])["controller_group"] == "controller"


def test_a_spec_without_the_block_is_refused_naming_it():
    from hpcflow.errors import SpecError
    from hpcflow.spec.cluster_loading import load_cluster_spec

    spec = load_cluster_spec(data_dir("pcluster_configs") / "p5-fsx.spec.yaml")
    with pytest.raises(SpecError, match="hyperpod: the spec has no hyperpod block"):
        check_spec(spec, "p5-fsx.spec.yaml", CAT, data_dir("bootstrap"))


def test_the_same_spec_still_renders_a_parallelcluster_config(tmp_path):
    from hpcflow.pcluster.render import render_file

    result, text = render_file(EXAMPLE, tmp_path / "c.yaml")
    assert result.config["Scheduling"]["SlurmQueues"][0]["Name"] == "train"
    assert "hyperpod" not in text.lower().split("\n", 3)[-1]


BLOCK = {"execution_role": "arn:aws:iam::123456789012:role/hp",
         "lifecycle_s3_uri": "s3://sagemaker-x/lc", "security_group_ids": ["sg-0123456789abcdef0"]}
#: What keeps an example off HyperPod: one queue of several resources, capacity kinds hpcflow
#: does not render there. Every other example's request passes botocore and the model.
REFUSED = {"all-fields": {"HYPERPOD_QUEUE_RESOURCES"}, "p5-capacity-block": {"HYPERPOD_CAPACITY"},
           "spot-finetune": {"HYPERPOD_CAPACITY"}}


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in
                                  sorted(data_dir("pcluster_configs").glob("*.spec.yaml"))])
def test_every_example_spec_with_a_hyperpod_block_validates_or_says_why_not(path):
    import yaml

    from hpcflow.aws.requests import constraint_problems
    from hpcflow.hyperpod.rules import check_plan

    data = yaml.safe_load(path.read_text())
    data.setdefault("hyperpod", BLOCK)
    spec = validate_cluster_spec(data, path.name)
    plan = build_request(spec, CAT)
    errors = {f.code for f in check_plan(spec, plan, CAT) if f.level == "error"}
    assert errors == REFUSED.get(path.name.removesuffix(".spec.yaml"), set())
    if not errors:
        assert request_problems("sagemaker", "CreateCluster", plan.request) == []
        assert constraint_problems("sagemaker", "CreateCluster", plan.request) == []
