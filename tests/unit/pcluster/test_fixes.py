"""Wrong verdicts found on real configs, at the spec and CLI level: each row's input is written
here, and what hpcflow writes still passes the real ParallelCluster schema."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from hpcflow.aws.pricing import lookup_prices
from hpcflow.cli.main import cli
from hpcflow.errors import Ec2Error, SpecError
from hpcflow.pcluster.render import check_spec
from hpcflow.spec.cluster import ClusterSpec
from hpcflow.spec.cluster_loading import load_cluster_spec, validate_cluster_spec


def _run(*args: str):
    return CliRunner().invoke(cli, list(args))


def _set(spec: dict[str, Any], path: str, value: Any) -> None:
    node: Any = spec
    parts = path.split(".")
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
    node[parts[-1]] = value


@pytest.mark.parametrize(("path", "value"), [
    pytest.param("region", "us-east-1\n", id="region"),
    pytest.param("name", "train\n", id="cluster-name"),
    pytest.param("head_node.subnet_id", "subnet-0a1b2c3d4e5f60718\n", id="head-subnet"),
    pytest.param("queues.0.subnet_ids", ["subnet-0a1b2c3d4e5f60718\n"], id="queue-subnet"),
    pytest.param("queues.0.compute.0.instance_type", "p5.48xlarge\n", id="instance-type"),
    pytest.param("s3_access", [{"bucket": "my-bucket\n"}], id="bucket"),
    pytest.param("queues.0.reservation_id", "cr-0123456789abcdef0\n", id="reservation"),
])
def test_a_value_ending_in_a_newline_is_refused_naming_the_field(base_spec, path, value):
    _set(base_spec, path, value)
    with pytest.raises(SpecError) as err:
        validate_cluster_spec(base_spec, "c.yaml")
    field = path.replace(".0.", "[0].").replace(".0", "[0]")
    assert f"c.yaml: {field}" in str(err.value)


def test_min_nodes_above_max_nodes_is_a_spec_error(base_spec):
    base_spec["queues"][0]["compute"][0].update(min_nodes=5, max_nodes=2)
    with pytest.raises(SpecError) as err:
        validate_cluster_spec(base_spec, "c.yaml")
    assert "c.yaml: queues[0].compute[0]: " in str(err.value)
    assert "min_nodes (5) is above max_nodes (2)" in str(err.value)


@pytest.mark.parametrize("level", ["queue", "compute"])
def test_queue_and_compute_custom_settings_render_as_a_mapping_the_schema_accepts(base_spec,
                                                                                   level):
    settings = {"MaxTime": "2-00:00:00"} if level == "queue" else {"Features": "h100"}
    holder = base_spec["queues"][0] if level == "queue" else base_spec["queues"][0]["compute"][0]
    holder["custom_slurm_settings"] = settings
    result = check_spec(ClusterSpec.model_validate(base_spec))
    assert result.schema_checked and result.errors == []
    queue = result.config["Scheduling"]["SlurmQueues"][0]
    rendered = queue if level == "queue" else queue["ComputeResources"][0]
    assert rendered["CustomSlurmSettings"] == settings


def test_a_forbidden_queue_setting_is_reported_on_the_spec_key(base_spec):
    base_spec["queues"][0]["custom_slurm_settings"] = {"MaxTime": "1", "OverSubscribe": "YES"}
    result = check_spec(ClusterSpec.model_validate(base_spec), run_schema=False)
    assert [(f.code, f.path) for f in result.errors] == [
        ("SLURM_SETTING_FORBIDDEN", "queues[0].custom_slurm_settings.OverSubscribe")]


@pytest.mark.parametrize("value", [{"a": 1}, [1, 2]], ids=["mapping", "list"])
def test_a_custom_setting_value_must_be_a_scalar(base_spec, value):
    base_spec["slurm"] = {"custom_settings": {"SchedulerParameters": value}}
    with pytest.raises(SpecError, match=r"slurm\.custom_settings\.SchedulerParameters"):
        validate_cluster_spec(base_spec, "c.yaml")


def test_a_newline_in_a_spec_setting_value_is_an_error_on_the_spec_key(base_spec):
    base_spec["slurm"] = {"custom_settings": {"SchedulerParameters": "x\nProlog=/tmp/p.sh"}}
    result = check_spec(ClusterSpec.model_validate(base_spec), run_schema=False)
    assert [(f.code, f.path) for f in result.errors] == [
        ("SLURM_SETTING_VALUE", "slurm.custom_settings.SchedulerParameters")]


BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 9) + "]\n"
    for i in range(8))


def test_an_alias_bomb_in_a_cluster_spec_is_refused(tmp_path: Path, base_spec):
    text = "x-anchors:\n" + "".join("  " + line + "\n" for line in BOMB.splitlines()) + \
        yaml.safe_dump(base_spec) + "slurm:\n  custom_settings:\n    Bomb: *i\n"
    spec = tmp_path / "c.spec.yaml"
    spec.write_text(text)
    with pytest.raises(SpecError, match="expands to more than"):
        load_cluster_spec(spec)
    out = tmp_path / "cluster.yaml"
    r = _run("cluster", "render", str(spec), "-o", str(out))
    assert r.exit_code == 2 and "expands to more than" in r.output and not out.exists()


def test_an_alias_bomb_in_a_parallelcluster_file_is_refused_by_validate(tmp_path: Path):
    path = tmp_path / "cluster.yaml"
    path.write_text("Region: us-east-1\n" + BOMB)
    r = _run("cluster", "validate", str(path))
    assert r.exit_code == 2 and "expands to more than" in r.output


def test_validate_json_on_a_failing_file_keeps_every_finding(tmp_path: Path):
    cfg = {"Region": "us-east-1", "Image": {"Os": "alinux2023"},
           "HeadNode": {"InstanceType": "m5.xlarge",
                        "Networking": {"SubnetId": "subnet-0a1b2c3d4e5f60718"}},
           "Scheduling": {"Scheduler": "slurm", "SlurmQueues": [{
               "Name": "q", "Networking": {"SubnetIds": ["subnet-0a1b2c3d4e5f60718"]},
               "ComputeResources": [
                   {"Name": "a", "InstanceType": "g6.xlarge", "MinCount": 3, "MaxCount": 2},
                   {"Name": "b", "InstanceType": "g6.2xlarge", "MaxCount": 2}]}]}}
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(cfg))
    r = _run("cluster", "validate", str(path), "--json")
    doc = json.loads(r.output)
    assert r.exit_code == 2 and doc["ok"] is False
    codes = {(f["level"], f["code"]) for f in doc["data"]["findings"]}
    assert ("error", "MIN_ABOVE_MAX") in codes and ("warning", "MIXED_INSTANCE_TYPES") in codes


def test_render_refuses_to_write_over_its_own_spec(tmp_path: Path, base_spec):
    spec = tmp_path / "c.spec.yaml"
    spec.write_text(yaml.safe_dump(base_spec))
    before = spec.read_text()
    for target in (str(spec), str(tmp_path / "." / "c.spec.yaml")):
        r = _run("cluster", "render", str(spec), "-o", target)
        assert r.exit_code == 2 and "would replace the spec" in r.output
    assert spec.read_text() == before


def test_cost_table_prices_need_no_botocore(monkeypatch):
    for name in [m for m in sys.modules if m == "botocore" or m.startswith("botocore.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "botocore", None)  # import botocore now raises ImportError
    prices, notes = lookup_prices(["p5.48xlarge"], "us-east-1", "table")
    assert prices["p5.48xlarge"].usd_per_hour > 0 and notes == []
    prices, notes = lookup_prices(["p5.48xlarge"], "us-east-1", "auto")
    assert "p5.48xlarge" in prices and "boto3 is not installed" in notes[0]
    with pytest.raises(Ec2Error, match="needs boto3"):
        lookup_prices(["p5.48xlarge"], "us-east-1", "api")


def test_cost_does_not_price_another_region_with_us_east_1_figures(tmp_path: Path, base_spec):
    base_spec["region"] = "eu-west-1"
    spec = tmp_path / "c.spec.yaml"
    spec.write_text(yaml.safe_dump(base_spec))
    r = _run("cluster", "cost", str(spec), "--hours", "10", "--price-source", "table", "--json")
    doc = json.loads(r.output)["data"]
    assert all(line["usd_per_node_hour"] is None for line in doc["lines"])
    assert any("us-east-1 prices only" in n for n in doc["notes"])


@pytest.mark.parametrize("hours", ["1e308", "inf", "87601"])
def test_cost_refuses_hours_that_make_no_estimate(hours):
    from hpcflow.resources import data_dir

    spec = data_dir("pcluster_configs") / "p5-fsx.spec.yaml"
    r = _run("cluster", "cost", str(spec), "--hours", hours, "--price-source", "table")
    assert r.exit_code == 2 and "--hours" in r.output and "nan" not in r.output


def test_cost_of_min_above_max_is_refused_before_pricing(tmp_path: Path, base_spec):
    base_spec["queues"][0]["compute"][0].update(min_nodes=4, max_nodes=2)
    spec = tmp_path / "c.spec.yaml"
    spec.write_text(yaml.safe_dump(base_spec))
    r = _run("cluster", "cost", str(spec), "--hours", "1", "--price-source", "table")
    assert r.exit_code == 2 and "min_nodes (4) is above max_nodes (2)" in r.output


def test_storage_errors_name_the_storage_field_without_the_kind(base_spec):
    base_spec["storage"] = [{"name": "f", "storage_capacity_gib": "big"},
                            {"type": "ebs", "name": "e", "mount_dir": "/e", "size": 5},
                            {"type": "nfs", "name": "n"}]
    with pytest.raises(SpecError) as err:
        validate_cluster_spec(base_spec, "c.yaml")
    text = str(err.value)
    assert "c.yaml: storage[0].storage_capacity_gib: 'big': Input should be a valid integer" in text
    assert "c.yaml: storage[1].size: 5: unknown field" in text
    assert "c.yaml: storage[2]: {'name': 'n', 'type': 'nfs'}: type must be one of fsx_lustre" in text
    assert ".fsx_lustre" not in text and ".ebs." not in text


def test_cost_counts_login_nodes_and_prices_a_flexible_resource_at_its_dearest_type(base_spec):
    from hpcflow.aws.pricing import Price
    from hpcflow.pcluster.cost import estimate_cost

    base_spec["login_nodes"] = [{"name": "login", "instance_type": "m5.xlarge", "count": 2,
                                 "subnet_id": "subnet-0a1b2c3d4e5f60718"}]
    base_spec["queues"][0]["compute"] = [{"name": "flex", "instances": ["g6.xlarge", "g6e.xlarge"],
                                          "max_nodes": 2}]
    prices = {t: Price(t, usd, "test") for t, usd in
              (("m5.xlarge", 0.2), ("g6.xlarge", 1.0), ("g6e.xlarge", 2.0))}
    est = estimate_cost(ClusterSpec.model_validate(base_spec), 10, prices)
    lines = {ln.what: ln for ln in est.lines}
    assert (lines["login/login"].usd_min, lines["login/login"].usd_max) == (4.0, 4.0)
    assert lines["train/flex"].instance_type == "g6e.xlarge" and lines["train/flex"].usd_max == 40.0


def test_render_json_on_a_failing_spec_keeps_every_finding(tmp_path: Path, base_spec):
    base_spec["queues"][0]["compute"].append({"instance_type": "p4d.24xlarge", "max_nodes": 1})
    base_spec["queues"][0]["compute"][0]["instance_type"] = "p5.48xl"
    spec = tmp_path / "c.spec.yaml"
    spec.write_text(yaml.safe_dump(base_spec))
    doc = json.loads(_run("cluster", "render", str(spec), "--json").output)
    assert doc["ok"] is False
    codes = {(f["level"], f["code"]) for f in doc["data"]["findings"]}
    assert ("error", "UNKNOWN_INSTANCE_TYPE") in codes
    assert ("warning", "MIXED_INSTANCE_TYPES") in codes


@pytest.mark.parametrize(("path", "value", "where"), [
    pytest.param("queues.0.name", "train\n", "queues[0].name", id="queue-name"),
    pytest.param("head_node.ssh_key", "admin\nx", "head_node.ssh_key", id="ssh-key"),
    pytest.param("tags", {"team": "ml\r"}, "tags.team", id="tag-value"),
    pytest.param("queues.0.placement_group_name", "pg\n", "queues[0].placement_group_name",
                 id="placement-group-name"),
])
def test_a_line_break_in_any_spec_text_is_refused_on_its_field(tmp_path: Path, base_spec, path,
                                                                value, where):
    _set(base_spec, path, value)
    spec = tmp_path / "c.spec.yaml"
    spec.write_text(yaml.safe_dump(base_spec))
    with pytest.raises(SpecError) as err:
        load_cluster_spec(spec)
    assert f"{spec}: {where}: " in str(err.value) and "line break" in str(err.value)
