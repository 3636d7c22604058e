"""The real ParallelCluster schema as the last gate: its errors land on spec fields, and the
offline check leaves the process environment as it found it."""

from __future__ import annotations

import os

import pytest

from hpcflow.pcluster.builder import build_cluster_config
from hpcflow.pcluster.render import check_spec
from hpcflow.pcluster.schema import flatten_messages, schema_check
from hpcflow.spec.cluster import ClusterSpec


def test_flatten_messages_keeps_list_indexes_and_schema_keys():
    msgs = {"Scheduling": {"SlurmQueues": {0: {"Name": ["Missing."]}}},
            "HeadNode": {"_schema": ["Bad."]}}
    assert flatten_messages(msgs) == [(("Scheduling", "SlurmQueues", 0, "Name"), "Missing."),
                                      (("HeadNode",), "Bad.")]


def test_schema_error_is_reported_on_the_spec_field(base_spec):
    base_spec["monitoring"] = {"log_retention_days": 2}
    result = check_spec(ClusterSpec.model_validate(base_spec))
    assert [(f.code, f.path) for f in result.errors] == [
        ("SCHEMA", "monitoring.log_retention_days")]
    assert "Must be one of: 0, 1, 3" in result.errors[0].message
    assert "Monitoring.Logs.CloudWatch.RetentionInDays" in result.errors[0].message


def test_schema_error_without_spec_names_the_parallelcluster_key(base_spec):
    config = build_cluster_config(ClusterSpec.model_validate(base_spec))
    config["Scheduling"]["SlurmQueues"][0]["ComputeResources"][0]["MaxCount"] = 0
    findings = schema_check(config)
    assert [(f.path, f.value) for f in findings] == [
        ("Scheduling.SlurmQueues[0].ComputeResources[0].MaxCount", 0)]


@pytest.mark.parametrize("preset", [
    pytest.param({}, id="no-aws-env"),
    pytest.param({"AWS_PROFILE": "prod", "AWS_DEFAULT_REGION": "eu-west-1"}, id="user-env"),
])
def test_offline_check_restores_the_environment(monkeypatch, base_spec, preset):
    for key in ("AWS_PROFILE", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID"):
        monkeypatch.delenv(key, raising=False)
    for key, value in preset.items():
        monkeypatch.setenv(key, value)
    import pcluster.config.cluster_config as cc

    before = dict(os.environ)
    get_region = cc.get_region
    base_spec["queues"][0].update(capacity_type="capacity_block",
                                  reservation_id="cr-0123456789abcdef0")
    config = build_cluster_config(ClusterSpec.model_validate(base_spec))
    assert schema_check(config) == []
    assert dict(os.environ) == before
    assert cc.get_region is get_region
