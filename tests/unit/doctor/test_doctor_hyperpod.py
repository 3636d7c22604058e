"""doctor on a SageMaker HyperPod node: recognised from the resource config HyperPod writes,
with the node's instance group found by its own address; no line on any other node."""

from __future__ import annotations

import json

import pytest
from test_doctor_checks import FakeProbe

from hpcflow.doctor.checks import run_all
from hpcflow.doctor.hyperpod import RESOURCE_CONFIG, check_hyperpod, parse_resource_config
from hpcflow.doctor.probe import Output

CONFIG = json.dumps({"InstanceGroups": [
    {"Name": "controller", "Instances": [{"InstanceName": "c-1", "CustomerIpAddress": "10.1.0.10"}]},
    {"Name": "train", "Instances": [{"InstanceName": "t-1", "CustomerIpAddress": "10.1.0.31"},
                                    {"InstanceName": "t-2", "CustomerIpAddress": "10.1.0.32"}]},
]})


def _probe(text, addresses="172.17.0.1 10.1.0.32 ", path=RESOURCE_CONFIG, env=None):
    return FakeProbe(commands={"hostname -I": Output(0, addresses)},
                     files={path: text} if text is not None else {}, env=env)


def test_a_worker_is_recognised_with_its_group_and_address():
    result = check_hyperpod(_probe(CONFIG))
    assert result.level == "pass"
    assert result.message.startswith("SageMaker HyperPod node: instance group train at 10.1.0.32")
    assert "controller (1), train (2)" in result.message


def test_hyperpods_variable_names_the_file():
    probe = _probe(CONFIG, path="/tmp/rc.json", env={"SAGEMAKER_RESOURCE_CONFIG_PATH":
                                                     "/tmp/rc.json"})
    assert "(/tmp/rc.json:" in check_hyperpod(probe).message


def test_no_resource_config_means_no_line():
    assert check_hyperpod(_probe(None)) is None


def test_a_node_the_file_does_not_list_is_a_warning():
    result = check_hyperpod(_probe(CONFIG, addresses="192.168.1.5"))
    assert result.level == "warn" and "none of this node's addresses" in result.message


@pytest.mark.parametrize("text", [
    pytest.param("{", id="not-json"), pytest.param("[]", id="a-list"),
    pytest.param('{"InstanceGroups": []}', id="no-groups"),
    pytest.param('{"InstanceGroups": [{"Instances": []}]}', id="no-name"),
    pytest.param('{"InstanceGroups": [{"Name": "g", "Instances": 3}]}', id="instances-not-list"),
])
def test_a_malformed_resource_config_is_a_warning_never_an_exception(text):
    result = check_hyperpod(_probe(text))
    assert result.level == "warn"
    assert "is not a HyperPod resource config" in result.message


def test_parse_resource_config_keeps_the_files_order():
    assert parse_resource_config(CONFIG) == {"controller": ["10.1.0.10"],
                                             "train": ["10.1.0.31", "10.1.0.32"]}


def test_run_all_puts_the_hyperpod_line_first_on_a_hyperpod_node():
    results = [r.name for r in run_all(_probe(CONFIG), instance="p5.48xlarge")]
    assert results[0] == "hyperpod"
    # then the node's own lines (test_doctor_hyperpod_node.py), then the checks of any node
    first = next(i for i, name in enumerate(results) if not name.startswith("hyperpod"))
    assert results[first] == "instance" and results[1] == "hyperpod-config"
    assert "hyperpod" not in [r.name for r in run_all(_probe(None), instance="p5.48xlarge")]
