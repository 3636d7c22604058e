"""Every example spec in pcluster_configs/ renders to exactly the YAML committed beside it, and
that YAML passes the real ParallelCluster schema and round-trips.

Regenerate the committed YAML with ``HPCFLOW_REGEN_GOLDEN=1 pytest tests/unit/pcluster``.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest
import yaml

from hpcflow.pcluster.render import render_file
from hpcflow.pcluster.rules import run_rules
from hpcflow.pcluster.schema import schema_check
from hpcflow.resources import data_dir

EXAMPLES = data_dir("pcluster_configs")
SPECS = sorted(EXAMPLES.glob("*.spec.yaml"))
REGEN = os.environ.get("HPCFLOW_REGEN_GOLDEN") == "1"
REQUIRED = ["p4d", "p5-fsx", "p5-capacity-block", "spot-finetune", "trn1", "g6-dev"]


def _golden(spec: Path) -> Path:
    return spec.with_name(spec.name.replace(".spec.yaml", ".cluster.yaml"))


def test_the_documented_examples_exist():
    names = [s.name.removesuffix(".spec.yaml") for s in SPECS]
    assert sorted(REQUIRED) == sorted(set(REQUIRED) & set(names))


@pytest.mark.parametrize("spec", [pytest.param(s, id=s.name) for s in SPECS])
def test_example_renders_to_its_committed_yaml(spec: Path, tmp_path: Path):
    out = tmp_path / "cluster.yaml"
    render_file(spec, out)
    got = out.read_text()
    golden = _golden(spec)
    if REGEN:
        golden.write_text(got)
    assert golden.exists(), f"{golden} is missing; run with HPCFLOW_REGEN_GOLDEN=1"
    want = golden.read_text()
    diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                        str(golden), "rendered"))
    assert got == want, f"rendered YAML differs from {golden.name}:\n{diff}"


@pytest.mark.parametrize("spec", [pytest.param(s, id=s.name) for s in SPECS])
def test_committed_yaml_round_trips_and_passes_the_schema(spec: Path):
    golden = _golden(spec)
    text = golden.read_text()
    config = yaml.safe_load(text)
    assert yaml.safe_load(yaml.safe_dump(config, sort_keys=False)) == config
    assert schema_check(config, "example") == []
    assert [f for f in run_rules(config) if f.level == "error"] == []


def test_p5_example_has_efa_placement_group_and_fsx_with_s3():
    config = yaml.safe_load(_golden(EXAMPLES / "p5-fsx.spec.yaml").read_text())
    queue = config["Scheduling"]["SlurmQueues"][0]
    assert queue["ComputeResources"][0]["Efa"] == {"Enabled": True}
    assert queue["Networking"]["PlacementGroup"] == {"Enabled": True}
    fsx = config["SharedStorage"][0]["FsxLustreSettings"]
    assert fsx["DeploymentType"] == "PERSISTENT_2"
    assert fsx["DataRepositoryAssociations"][0]["DataRepositoryPath"].startswith("s3://")


def test_capacity_block_example_is_static_without_placement_group():
    config = yaml.safe_load(_golden(EXAMPLES / "p5-capacity-block.spec.yaml").read_text())
    queue = config["Scheduling"]["SlurmQueues"][0]
    cr = queue["ComputeResources"][0]
    assert queue["CapacityType"] == "CAPACITY_BLOCK"
    assert cr["MinCount"] == cr["MaxCount"] == 4
    assert queue["Networking"]["PlacementGroup"] == {"Enabled": False}


def test_admin_guide_spec_renders_to_a_valid_p5_config_with_efa_and_fsx(tmp_path: Path):
    guide = Path(__file__).resolve().parents[3] / "docs" / "admin-guide.md"
    text = guide.read_text()
    block = text.split("Save this as `cluster.spec.yaml`:\n\n```yaml\n", 1)[1].split("```", 1)[0]
    spec = tmp_path / "cluster.spec.yaml"
    spec.write_text(block)
    result, _ = render_file(spec, tmp_path / "cluster.yaml")
    assert result.schema_checked and result.errors == []
    queue = result.config["Scheduling"]["SlurmQueues"][0]
    assert queue["ComputeResources"][0]["Efa"] == {"Enabled": True}
    assert result.config["SharedStorage"][0]["StorageType"] == "FsxLustre"
