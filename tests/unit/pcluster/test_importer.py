"""``hpcflow cluster import``: render(import(C)) == C as data, on the configs hpcflow ships, on
hand-written configs covering every spec field, and on random valid specs."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_verdicts import BASE, CASES

from hpcflow.cli.main import cli
from hpcflow.errors import SpecError
from hpcflow.pcluster.builder import build_cluster_config
from hpcflow.pcluster.importer import import_config
from hpcflow.pcluster.render import check_spec
from hpcflow.resources import data_dir
from hpcflow.spec.cluster import ClusterSpec

GOLDEN = sorted(data_dir("pcluster_configs").glob("*.cluster.yaml"))


def _round_trip(cfg: dict[str, Any]) -> dict[str, Any]:
    spec = import_config(cfg, "t")
    yaml_text = yaml.safe_dump(spec, sort_keys=False)  # what `import -o` writes, read back
    assert build_cluster_config(ClusterSpec.model_validate(yaml.safe_load(yaml_text))) == cfg
    return spec


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in GOLDEN])
def test_shipped_configs_round_trip_into_fields_only(path: Path):
    cfg = yaml.safe_load(path.read_text())
    spec = _round_trip(cfg)
    if path.name != "all-fields.cluster.yaml":
        assert "pcluster" not in spec, spec["pcluster"]  # hpcflow's own output needs no raw keys


def test_all_fields_config_imports_every_field_and_keeps_only_the_rest_raw():
    cfg = yaml.safe_load((data_dir("pcluster_configs") / "all-fields.cluster.yaml").read_text())
    spec = _round_trip(cfg)
    assert spec["pcluster"] == {
        "Scheduling": {"SlurmSettings": {"EnableMemoryBasedScheduling": True},
                       "SlurmQueues": [{"Name": "train", "ComputeResources": [
                           {"Name": "flex", "SpotPrice": 3.5}]}]},
        "DeploymentSettings": cfg["DeploymentSettings"]}
    queue = spec["queues"][0]
    for field in ("compute_root_volume_gib", "additional_iam_policies", "additional_security_groups",
                  "tags", "custom_ami", "reservation_resource_group_arn", "custom_slurm_settings"):
        assert field in queue, field
    assert {"disable_smt", "placement_group_name"} <= set(queue["compute"][0])
    assert queue["compute"][1]["instances"] == ["c5n.18xlarge", "c5n.metal"]
    assert {"imds_secured", "additional_iam_policies", "custom_actions"} <= set(spec["head_node"])
    assert [s.get("type", "fsx_lustre") for s in spec["storage"]] == [
        "fsx_lustre", "fsx_openzfs", "fsx_ontap", "efs", "ebs", "fsx_lustre"]
    assert spec["login_nodes"][0]["count"] == 2 and spec["tags"] == {"team": "ml",
                                                                     "cost-center": "42"}


@pytest.mark.parametrize(("cfg", "codes"), [c for c in CASES if not c.values[1]])
def test_hand_written_configs_parallelcluster_accepts_round_trip(cfg, codes):
    _round_trip(cfg)


def test_a_minimal_hand_written_config_keeps_its_omissions():
    cfg = copy.deepcopy(BASE)
    cfg["HeadNode"]["CustomActions"] = {"OnNodeConfigured": {"Script": "s3://b-x/one.sh"}}
    cfg["Scheduling"]["SlurmQueues"][0]["ComputeResources"][0]["Efa"] = {"Enabled": False,
                                                                          "GdrSupport": False}
    spec = _round_trip(cfg)
    raw = spec["pcluster"]
    assert raw["Imds"] is None and raw["Monitoring"] is None  # absent from the config
    assert raw["HeadNode"]["CustomActions"] == cfg["HeadNode"]["CustomActions"]  # Script form


def test_import_refuses_a_config_that_no_spec_can_hold():
    with pytest.raises(SpecError, match="cannot import: region"):
        import_config({"HeadNode": {}, "Scheduling": {"SlurmQueues": []}})
    with pytest.raises(SpecError, match="Scheduler must be slurm"):
        import_config({"Region": "us-east-1", "Scheduling": {"Scheduler": "awsbatch"}})


# ---- property: random valid specs -----------------------------------------------------------

SUBNET = "subnet-0a1b2c3d4e5f60718"
TYPES = ["g6.xlarge", "g6.12xlarge", "p5.48xlarge", "p4d.24xlarge", "m5.xlarge", "c5n.18xlarge"]
_opt = st.none()


def _compute(i: int):
    return st.builds(
        lambda it, hi, lo, smt, feats: {k: v for k, v in {
            "name": f"c{i}", "instance_type": it, "max_nodes": hi,
            "min_nodes": None if lo is None else min(lo, hi), "disable_smt": smt,
            "custom_slurm_settings": {"Features": feats} if feats else None}.items()
            if v is not None},
        st.sampled_from(TYPES), st.integers(1, 8), st.one_of(_opt, st.integers(0, 8)),
        st.one_of(_opt, st.booleans()), st.one_of(_opt, st.sampled_from(["gpu", "big"])))


def _queue(i: int):
    return st.builds(
        lambda crs, cap, vol, tags, maxtime: {k: v for k, v in {
            "name": f"q{i}", "subnet_ids": [SUBNET], "capacity_type": cap, "compute": crs,
            "compute_root_volume_gib": vol, "tags": tags or None,
            "custom_slurm_settings": {"MaxTime": maxtime} if maxtime else None}.items()
            if v is not None},
        st.integers(1, 2).flatmap(lambda n: st.tuples(*[_compute(j) for j in range(n)]).map(list)),
        st.sampled_from(["ondemand", "spot"]), st.one_of(_opt, st.integers(35, 500)),
        st.dictionaries(st.sampled_from(["team", "env"]), st.sampled_from(["a", "b"]), max_size=2),
        st.one_of(_opt, st.sampled_from(["1:00:00", "2-00:00:00"])))


SPECS = st.builds(
    lambda queues, storage, exclusive, idle, raw, tags: {k: v for k, v in {
        "name": "prop", "region": "us-east-1",
        "head_node": {"instance_type": "m5.2xlarge", "subnet_id": SUBNET},
        "queues": queues, "storage": storage, "tags": tags or None,
        "slurm": {"job_exclusive_allocation": exclusive, "scaledown_idletime_min": idle},
        "pcluster": raw}.items() if v is not None},
    st.integers(1, 3).flatmap(lambda n: st.tuples(*[_queue(i) for i in range(n)]).map(list)),
    st.one_of(_opt, st.sampled_from([
        [{"name": "fsx", "storage_capacity_gib": 1200, "per_unit_storage_throughput": 125}],
        [{"type": "ebs", "name": "scratch", "mount_dir": "/scratch", "size_gib": 100}],
        [{"name": "old", "file_system_id": "fs-0123456789abcdef0"},
         {"type": "efs", "name": "e", "mount_dir": "/efs", "deletion_policy": None}]])),
    st.booleans(), st.integers(1, 60),
    st.one_of(_opt, st.sampled_from([
        {"Scheduling": {"SlurmSettings": {"EnableMemoryBasedScheduling": True}}},
        {"Monitoring": None}, {"HeadNode": {"Dcv": {"Enabled": True}}}])),
    st.dictionaries(st.sampled_from(["owner", "project"]), st.sampled_from(["x", "y"]),
                    max_size=2),
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SPECS)
def test_random_specs_render_to_valid_configs_that_import_back(data):
    spec = ClusterSpec.model_validate(data)
    result = check_spec(spec)
    assert result.schema_checked and result.errors == [], [str(f) for f in result.errors]
    imported = import_config(result.config, "prop")
    again = build_cluster_config(ClusterSpec.model_validate(imported))
    assert again == result.config


# ---- the command ----------------------------------------------------------------------------

def _run(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_import_command_writes_a_spec_that_renders_the_config_back(tmp_path: Path):
    src = data_dir("pcluster_configs") / "spot-finetune.cluster.yaml"
    out = tmp_path / "cluster.spec.yaml"
    r = _run("cluster", "import", str(src), "-o", str(out), "--name", "ft")
    assert r.exit_code == 0, r.output
    assert out.read_text().startswith("# hpcflow cluster spec imported from spot-finetune")
    back = tmp_path / "cluster.yaml"
    assert _run("cluster", "render", str(out), "-o", str(back)).exit_code == 0
    assert yaml.safe_load(back.read_text()) == yaml.safe_load(src.read_text())


def test_import_json_and_refusals(tmp_path: Path):
    src = tmp_path / "c.yaml"
    src.write_text(yaml.safe_dump(BASE))
    doc = json.loads(_run("cluster", "import", str(src), "--json").output)
    assert doc["ok"] is True and doc["data"]["spec"]["region"] == "us-east-1"
    before = src.read_text()
    r = _run("cluster", "import", str(src), "-o", str(src))
    assert r.exit_code == 2 and "the config being imported" in r.output
    assert src.read_text() == before
    src.write_text("Region: us-east-1\nScheduling: {Scheduler: awsbatch}\n")
    r = _run("cluster", "import", str(src))
    assert r.exit_code == 2 and "Traceback" not in r.output
