"""``hpcflow cluster ...`` through click: exit codes, the JSON envelope, and no file on failure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from hpcflow.cli.main import cli
from hpcflow.resources import data_dir

P5 = data_dir("pcluster_configs") / "p5-fsx.spec.yaml"


def _run(*args: str):
    return CliRunner().invoke(cli, list(args))


def _write(tmp_path: Path, data: dict, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def test_render_writes_the_file_and_says_so(tmp_path: Path):
    out = tmp_path / "cluster.yaml"
    r = _run("cluster", "render", str(P5), "-o", str(out))
    assert r.exit_code == 0, r.output
    assert yaml.safe_load(out.read_text())["Region"] == "us-east-1"
    assert "aws-parallelcluster" in r.output


def test_render_json_envelope_holds_the_config():
    r = _run("cluster", "render", str(P5), "--json")
    doc = json.loads(r.output)
    assert r.exit_code == 0 and doc["ok"] is True and doc["error"] is None
    assert doc["data"]["config"]["Scheduling"]["Scheduler"] == "slurm"


def test_render_with_set_override_changes_the_config():
    r = _run("cluster", "render", str(P5), "--json", "--set", "region=us-west-2")
    assert json.loads(r.output)["data"]["config"]["Region"] == "us-west-2"


def test_failed_render_exits_2_names_the_field_and_writes_nothing(tmp_path: Path, base_spec):
    base_spec["queues"][0]["compute"][0]["instance_type"] = "p5.48xl"
    spec = _write(tmp_path, base_spec)
    out = tmp_path / "cluster.yaml"
    r = _run("cluster", "render", str(spec), "-o", str(out))
    assert r.exit_code == 2
    assert "queues[0].compute[0].instance_type: 'p5.48xl' is not known; did you mean " \
           "'p5.48xlarge'?" in r.output
    assert "Traceback" not in r.output
    assert list(tmp_path.iterdir()) == [spec]


def test_failed_render_keeps_an_existing_output_untouched(tmp_path: Path, base_spec):
    base_spec["queues"][0]["name"] = "Bad_Name"
    spec = _write(tmp_path, base_spec)
    out = tmp_path / "cluster.yaml"
    out.write_text("old\n")
    r = _run("cluster", "render", str(spec), "-o", str(out))
    assert r.exit_code == 2 and out.read_text() == "old\n"


def test_shape_error_json_envelope(tmp_path: Path, base_spec):
    base_spec["queues"][0]["capacity_type"] = "reserved"
    r = _run("cluster", "render", str(_write(tmp_path, base_spec)), "--json")
    doc = json.loads(r.output)
    assert r.exit_code == 2 and doc["ok"] is False
    assert doc["error"]["type"] == "SpecError"
    assert "queues[0].capacity_type: 'reserved'" in doc["error"]["message"]
    assert "'ondemand', 'spot' or 'capacity_block'" in doc["error"]["message"]


def test_unknown_spec_key_is_named(tmp_path: Path, base_spec):
    base_spec["queues"][0]["compute"][0]["max_node"] = 3
    r = _run("cluster", "render", str(_write(tmp_path, base_spec)))
    assert r.exit_code == 2
    assert "queues[0].compute[0].max_node: 3: unknown field" in r.output


def test_missing_spec_file_is_a_clean_error(tmp_path: Path):
    r = _run("cluster", "render", str(tmp_path / "nope.yaml"))
    assert r.exit_code == 2 and "no such file" in r.output and "Traceback" not in r.output


def test_validate_accepts_a_rendered_example():
    golden = data_dir("pcluster_configs") / "p5-fsx.cluster.yaml"
    r = _run("cluster", "validate", str(golden))
    assert r.exit_code == 0, r.output
    assert "valid" in r.output


def test_validate_reports_schema_errors_by_parallelcluster_key(tmp_path: Path):
    config = yaml.safe_load((data_dir("pcluster_configs") / "g6-dev.cluster.yaml").read_text())
    config["Scheduling"]["SlurmQueues"][0]["CapacityType"] = "SPOTTY"
    path = _write(tmp_path, config, "cluster.yaml")
    r = _run("cluster", "validate", str(path), "--json")
    doc = json.loads(r.output)
    assert r.exit_code == 2 and doc["ok"] is False
    assert "Scheduling.SlurmQueues[0].CapacityType" in doc["error"]["message"]
    assert "Must be one of: CAPACITY_BLOCK, ONDEMAND, SPOT" in doc["error"]["message"]


def test_validate_runs_rules_on_hand_written_files(tmp_path: Path):
    config = yaml.safe_load((data_dir("pcluster_configs") / "p4d.cluster.yaml").read_text())
    del config["Scheduling"]["SlurmQueues"][0]["Networking"]["PlacementGroup"]
    r = _run("cluster", "validate", str(_write(tmp_path, config, "c.yaml")))
    assert r.exit_code == 2
    assert "Scheduling.SlurmQueues[0].Networking.PlacementGroup" in r.output


@pytest.mark.parametrize("family, expected", [
    pytest.param("p5", {"p5.4xlarge", "p5.48xlarge"}, id="p5"),
    pytest.param("trn1n", {"trn1n.32xlarge"}, id="trn1n"),
])
def test_instances_lists_one_family(family: str, expected: set[str]):
    r = _run("cluster", "instances", "--family", family, "--json")
    rows = json.loads(r.output)["data"]["instances"]
    assert {x["instance_type"] for x in rows} == expected


def test_instances_table_shows_efa_and_sources():
    r = _run("cluster", "instances", "--family", "p5")
    assert r.exit_code == 0
    assert "p5.48xlarge" in r.output and "source ec2-api" in r.output


def test_instances_unknown_family_suggests():
    r = _run("cluster", "instances", "--family", "p55")
    assert r.exit_code == 2 and "did you mean 'p5'?" in r.output


def test_cost_from_the_table_says_so_and_bounds_spot(tmp_path: Path):
    spec = data_dir("pcluster_configs") / "spot-finetune.spec.yaml"
    r = _run("cluster", "cost", str(spec), "--hours", "10", "--price-source", "table", "--json")
    data = json.loads(r.output)["data"]
    head, spot, ondemand = data["lines"]
    assert head["usd_min"] == head["usd_max"] == pytest.approx(1.92)
    assert spot["usd_min"] == 0 and spot["usd_max"] > 0
    assert "hpcflow shipped price table" in spot["source"] and "2025-05" in spot["source"]
    assert "UNVERIFIED" in spot["source"]
    low, high = spot["spot_usd_per_node_hour"]
    assert low == pytest.approx(high * 0.10, abs=1e-4) and high == spot["usd_per_node_hour"]
    assert spot["spot_usd_max"] == [pytest.approx(spot["usd_max"] * 0.10, abs=0.01),
                                    spot["usd_max"]]
    assert any("spot" in n for n in data["notes"])
    assert data["total_usd_max"] == pytest.approx(head["usd_max"] + spot["usd_max"]
                                                  + ondemand["usd_max"], abs=0.02)


def test_cost_rejects_non_positive_hours():
    r = _run("cluster", "cost", str(P5), "--hours", "0")
    assert r.exit_code == 2 and "--hours" in r.output


def test_cluster_help_lists_the_commands():
    r = _run("cluster", "--help")
    for name in ("render", "validate", "instances", "cost"):
        assert name in r.output


def test_cost_table_output_shows_spot_as_a_range_and_the_source():
    spec = data_dir("pcluster_configs") / "spot-finetune.spec.yaml"
    r = _run("cluster", "cost", str(spec), "--hours", "10", "--price-source", "table")
    assert r.exit_code == 0, r.output
    spot_row = next(ln for ln in r.output.splitlines() if "spot/g6e-48xlarge" in ln)
    assert "3.0131-30.1312" in spot_row and "120.52-1,205.25" in spot_row
    assert "[1] hpcflow shipped price table" in r.output and "UNVERIFIED" in r.output


def test_cost_capacity_block_is_left_out_of_the_totals_and_says_so():
    spec = data_dir("pcluster_configs") / "p5-capacity-block.spec.yaml"
    r = _run("cluster", "cost", str(spec), "--hours", "10", "--price-source", "table", "--json")
    data = json.loads(r.output)["data"]
    block = data["lines"][1]
    assert block["capacity_type"] == "capacity_block"
    assert block["usd_per_node_hour"] is None and block["usd_max"] is None
    assert data["not_counted"] == ["block/p5-48xlarge"]
    text = _run("cluster", "cost", str(spec), "--hours", "10", "--price-source", "table").output
    assert "(not counting block/p5-48xlarge)" in text


def test_cost_flags_p5_table_price_as_predating_the_2025_cut():
    r = _run("cluster", "cost", str(P5), "--hours", "1", "--price-source", "table", "--json")
    data = json.loads(r.output)["data"]
    p5 = next(x for x in data["lines"] if x["instance_type"] == "p5.48xlarge")
    assert "June 2025" in p5["caveat"]
    assert any(n.startswith("p5.48xlarge: the shipped figure predates") for n in data["notes"])


def test_cost_with_api_only_and_no_aws_is_an_aws_error(monkeypatch):
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    r = _run("cluster", "cost", str(P5), "--hours", "1", "--price-source", "api", "--json")
    err = json.loads(r.output)["error"]
    assert r.exit_code == 7 and err["type"] == "Ec2Error"
    assert "--price-source table" in err["message"]
