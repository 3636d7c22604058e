"""hpcflow's HyperPod rules: each hostile spec gets its finding at the spec field, in the format
of ``hpcflow cluster validate``; none raises anything but a SpecError."""

from __future__ import annotations

import copy
import random

import pytest
from hyperpod_example import example_data

from hpcflow.errors import SpecError
from hpcflow.hyperpod.request import build_request
from hpcflow.hyperpod.rules import check_plan
from hpcflow.pcluster.catalog import Catalog
from hpcflow.pcluster.findings import Finding
from hpcflow.resources import data_dir
from hpcflow.spec.cluster_loading import validate_cluster_spec

CAT = Catalog.offline()
SUBNET = "subnet-0a1b2c3d4e5f60718"


def _findings(data) -> list[Finding]:
    spec = validate_cluster_spec(data, "t")
    return check_plan(spec, build_request(spec, CAT), CAT)


def _queue(name, **compute):
    return {"name": name, "subnet_ids": [SUBNET], "compute": [compute]}


def _set(path, value):
    def change(d):
        *head, last = path
        for key in head:
            d = d[key]
        d[last] = value
    return change


CASES = [
    pytest.param(_set(["queues", 0, "compute", 0, "instance_type"], "p5.48xl"),
                 "HYPERPOD_INSTANCE_TYPE", "queues[0].compute[0].instance_type",
                 "did you mean 'p5.48xlarge'", id="typo-instance-type"),
    pytest.param(_set(["head_node", "instance_type"], "m5n.large"),
                 "HYPERPOD_INSTANCE_TYPE", "head_node.instance_type", "not an instance type "
                 "HyperPod offers", id="ec2-type-hyperpod-lacks"),
    pytest.param(_set(["queues", 0, "compute", 0, "efa"], True), None, None, None,
                 id="efa-on-p5-is-fine"),
    pytest.param(_set(["queues", 0], _queue("dev", instance_type="g5.xlarge", max_nodes=1,
                                            efa=True)),
                 "EFA_UNSUPPORTED", "queues[0].compute[0].efa", "g5.xlarge has no EFA",
                 id="efa-on-g5-xlarge"),
    pytest.param(_set(["queues", 0, "name"], "controller"), "HYPERPOD_GROUP_NAME",
                 "queues[0].name", "also hyperpod.controller_group", id="queue-named-controller"),
    pytest.param(_set(["queues", 0, "name"], "gpu_queue"), "HYPERPOD_GROUP_NAME",
                 "queues[0].name", "ClusterPartitionName", id="underscore-partition"),
    pytest.param(_set(["queues", 0, "name"], "q" * 64), "HYPERPOD_GROUP_NAME",
                 "queues[0].name", "at most 63", id="long-partition"),
    pytest.param(_set(["name"], "train-"), "HYPERPOD_NAME", "name", "HyperPod cluster name",
                 id="trailing-hyphen-cluster-name"),
    pytest.param(_set(["queues", 0, "capacity_type"], "spot"), "HYPERPOD_CAPACITY",
                 "queues[0].capacity_type", "on-demand groups only", id="spot"),
    pytest.param(_set(["queues", 0, "compute", 0, "reservation_id"], "cr-0123456789abcdef0"),
                 "HYPERPOD_CAPACITY", "queues[0].compute[0].reservation_id", "reservation",
                 id="reservation"),
    pytest.param(_set(["queues", 0, "compute"], [{"instance_type": "p5.48xlarge", "max_nodes": 1},
                                                 {"instance_type": "p4d.24xlarge",
                                                  "max_nodes": 1}]),
                 "HYPERPOD_QUEUE_RESOURCES", "queues[0].compute", "one queue per resource",
                 id="two-resources"),
    pytest.param(_set(["queues", 0, "compute", 0], {"instances": ["g5.12xlarge", "g5.24xlarge"],
                                                    "max_nodes": 2}),
                 "HYPERPOD_FLEXIBLE", "queues[0].compute[0].instances", "one instance type",
                 id="flexible-instances"),
    pytest.param(_set(["login_nodes"], [
        {"name": "a", "instance_type": "m5.xlarge", "subnet_id": SUBNET},
        {"name": "b", "instance_type": "m5.xlarge", "subnet_id": SUBNET}]),
        "HYPERPOD_LOGIN_GROUPS", "login_nodes", "one login group", id="two-login-pools"),
    pytest.param(_set(["queues", 0, "compute", 0, "max_nodes"], 7000), "HYPERPOD_REQUEST",
                 "request", "InstanceCount", id="count-past-botocore-bound"),
    pytest.param(_set(["tags"], {f"k{i}": "v" for i in range(51)}), "HYPERPOD_REQUEST",
                 "request", "Tags", id="51-tags"),
    pytest.param(_set(["queues", 0, "compute", 0, "min_nodes"], 1), "HYPERPOD_STATIC_NODES",
                 "queues[0].compute[0].min_nodes", "4 nodes (max_nodes) run", id="min-nodes"),
    pytest.param(_set(["storage"], [{"name": "fsx", "storage_capacity_gib": 1200}]),
                 "HYPERPOD_STORAGE", "storage[0]", "new file system is not created",
                 id="new-fsx"),
    pytest.param(_set(["slurm"], {"custom_settings": {"MaxJobCount": 100}}),
                 "HYPERPOD_NOT_RENDERED", "slurm.custom_settings", "not part of", id="slurm"),
    pytest.param(_set(["hyperpod", "lifecycle_s3_uri"], "s3://my-bucket/lc"),
                 "HYPERPOD_LIFECYCLE_BUCKET", "hyperpod.lifecycle_s3_uri", "sagemaker-",
                 id="bucket-without-sagemaker-prefix"),
    pytest.param(_set(["queues", 0], _queue("cpu", instance_type="c5.18xlarge", max_nodes=2)),
                 "HYPERPOD_HEALTH_CHECKS", "hyperpod.deep_health_checks", "no worker group",
                 id="health-checks-without-gpus"),
]


@pytest.mark.parametrize(("change", "code", "path", "text"), CASES)
def test_hostile_spec_gets_its_finding(change, code, path, text):
    data = example_data()
    change(data)
    found = _findings(data)
    if code is None:
        assert [f for f in found if f.level == "error"] == []
        return
    hits = [f for f in found if f.code == code and f.path == path]
    assert hits, found
    assert text in hits[0].message
    assert str(hits[0]).startswith(f"{hits[0].level}: {path}: ")


def test_botocore_is_asked_only_when_no_rule_failed():
    data = example_data()
    data["queues"][0]["compute"][0].update(instance_type="p5.48xl", max_nodes=7000)
    codes = {f.code for f in _findings(data)}
    assert "HYPERPOD_INSTANCE_TYPE" in codes and "HYPERPOD_REQUEST" not in codes


@pytest.mark.parametrize(("path", "value", "says"), [
    pytest.param(["hyperpod", "execution_role"], "arn:aws:iam::123:role/x", "an IAM role ARN",
                 id="role"),
    pytest.param(["hyperpod", "security_group_ids"], [], "at least 1", id="no-sg"),
    pytest.param(["hyperpod", "fsx", "mount_name"], "toolongname", "mount name", id="mount"),
    pytest.param(["hyperpod", "fsx", "dns_name"], "fsx.example.com", "DNS name", id="dns"),
    pytest.param(["hyperpod", "ebs_volume_gib"], 20000, "16384", id="ebs"),
    pytest.param(["hyperpod", "worker_steps"], ["efa", "rm -rf"], "efa", id="step"),
    pytest.param(["hyperpod", "step_env"], {"PATH": "/x"}, "HPCFLOW_", id="env-name"),
    pytest.param(["hyperpod", "step_env"], {"HPCFLOW_X": "a b"}, "no blank", id="env-value"),
    pytest.param(["hyperpod", "node_recovery"], "Sometimes", "Automatic", id="recovery"),
    pytest.param(["hyperpod", "deep_health_checks"], ["InstanceStress", "Reboot"],
                 "InstanceConnectivity", id="health-check-kind"),
])
def test_hostile_block_values_are_refused_naming_the_field(path, value, says):
    data = example_data()
    _set(path, value)(data)
    with pytest.raises(SpecError) as err:
        validate_cluster_spec(data, "t")
    assert ".".join(str(p) for p in path) in str(err.value)
    assert says in str(err.value)


def test_random_hostile_specs_get_findings_never_a_traceback(tmp_path):
    """Every example spec with random fields swapped for strange values: the HyperPod check ends
    in findings or a SpecError, never in another exception."""
    from hpcflow.hyperpod.service import check_spec

    strange = ["", "x" * 300, -1, 0, 10**12, None, [], {}, "ml.p5.48xlarge", "a-", "Ünï",
               "controller", True, 3.5]
    rng = random.Random(34)
    base = example_data()
    for _ in range(150):
        data = copy.deepcopy(base)
        node = data
        keys = []
        while isinstance(node, (dict, list)) and node:
            key = rng.choice(list(node) if isinstance(node, dict) else range(len(node)))
            keys.append(key)
            if rng.random() < 0.4 or not isinstance(node[key], (dict, list)):
                node[key] = rng.choice(strange)
                break
            node = node[key]
        try:
            spec = validate_cluster_spec(data, "t")
            check_spec(spec, "t", CAT, data_dir("bootstrap"))
        except SpecError:
            pass
