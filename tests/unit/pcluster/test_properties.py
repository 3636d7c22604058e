"""Property-based: valid specs always render to schema-valid configs; invalid ones always fail
with a SpecError (never another exception) and write no file."""

from __future__ import annotations

from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcflow.errors import SpecError
from hpcflow.pcluster.catalog import OFFLINE
from hpcflow.pcluster.render import check_spec, render_file
from hpcflow.spec.cluster import ClusterSpec

TYPES = sorted(OFFLINE)
SUBNET = "subnet-0a1b2c3d4e5f60718"
names = st.from_regex(r"[a-z][a-z0-9-]{0,15}", fullmatch=True).filter(lambda n: n != "default")


@st.composite
def compute(draw, capacity_block: bool):
    it = draw(st.sampled_from(TYPES))
    hi = draw(st.integers(1, 64))
    lo = hi if capacity_block else draw(st.integers(0, hi))
    c = {"instance_type": it, "max_nodes": hi, "min_nodes": lo}
    if draw(st.booleans()):
        c["efa"] = OFFLINE[it].efa_supported and draw(st.booleans())
    return c


@st.composite
def queue(draw, name: str):
    ctype = draw(st.sampled_from(["ondemand", "spot", "capacity_block"]))
    q = {"name": name, "capacity_type": ctype, "subnet_ids": [SUBNET],
         "compute": draw(st.lists(compute(ctype == "capacity_block"), min_size=1, max_size=3))}
    for i, c in enumerate(q["compute"]):
        c["name"] = f"c{i}"
    if ctype == "capacity_block" or draw(st.booleans()):
        q["reservation_id"] = "cr-0123456789abcdef0"
    return q


@st.composite
def storage(draw, i: int):
    if i > 0:  # ParallelCluster creates at most one FSx per cluster; the others exist already
        return {"name": f"fsx{i}", "mount_dir": f"/fsx{i}",
                "file_system_id": f"fs-0123456789abcde{i:02d}"}
    dt = draw(st.sampled_from(["SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2"]))
    s = {"name": f"fsx{i}", "mount_dir": f"/fsx{i}", "deployment_type": dt,
         "storage_capacity_gib": draw(st.sampled_from([1200, 2400, 4800, 9600]))}
    if dt == "PERSISTENT_1":
        s["per_unit_storage_throughput"] = draw(st.sampled_from([50, 100, 200]))
    elif dt == "PERSISTENT_2":
        s["per_unit_storage_throughput"] = draw(st.sampled_from([125, 250, 500, 1000]))
    n = draw(st.integers(0, 8))
    s["data_repositories"] = [{"name": f"d{k}", "s3_path": f"s3://bucket-{k}/x",
                               "fs_path": f"/d{k}"} for k in range(n)]
    return s


@st.composite
def valid_spec(draw):
    qnames = draw(st.lists(names, min_size=1, max_size=4, unique=True))
    nstore = draw(st.integers(0, 2))
    return {
        "region": draw(st.sampled_from(["us-east-1", "us-west-2", "eu-west-1"])),
        "os": draw(st.sampled_from(["alinux2023", "ubuntu2204", "rocky9"])),
        "head_node": {"subnet_id": SUBNET, "ssh_key": "k"},
        "queues": [draw(queue(n)) for n in qnames],
        "storage": [draw(storage(i)) for i in range(nstore)],
        "slurm": {"scaledown_idletime_min": draw(st.integers(-1, 120))},
        "shared_home": draw(st.sampled_from(["head_node", "efs"])),
    }


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_spec())
def test_valid_specs_render_to_schema_valid_configs(spec):
    result = check_spec(ClusterSpec.model_validate(spec))
    assert result.schema_checked
    assert result.errors == [], [str(f) for f in result.errors]


BREAKERS = {
    "efa-unsupported": lambda s: s["queues"][0]["compute"][0].update(
        instance_type="g5.xlarge", efa=True),
    "bad-throughput": lambda s: s.update(storage=[{"name": "f", "storage_capacity_gib": 1200,
                                                   "per_unit_storage_throughput": 300}]),
    "bad-capacity": lambda s: s.update(storage=[{"name": "f", "storage_capacity_gib": 1300,
                                                 "deployment_type": "SCRATCH_2"}]),
    "queue-name": lambda s: s["queues"][0].update(name="Queue_1"),
    "min-above-max": lambda s: s["queues"][0]["compute"][0].update(min_nodes=99, max_nodes=1),
    "unknown-key": lambda s: s.update(regoin="us-east-1"),
    "bad-enum": lambda s: s["queues"][0].update(capacity_type="on-demand"),
    "wrong-type": lambda s: s["queues"][0]["compute"][0].update(max_nodes="many"),
    "forbidden-slurm": lambda s: s.update(slurm={"custom_settings": {"Epilog": "/x"}}),
    "typo-type": lambda s: s["queues"][0]["compute"][0].update(instance_type="p4d.24xl"),
    "upper-type": lambda s: s["queues"][0]["compute"][0].update(instance_type="P5.48XLARGE"),
    "two-new-fsx": lambda s: s.update(storage=[
        {"name": f"f{i}", "mount_dir": f"/f{i}", "storage_capacity_gib": 1200,
         "per_unit_storage_throughput": 125} for i in range(2)]),
    "same-mount-dir": lambda s: s.update(storage=[
        {"name": f"f{i}", "mount_dir": "/fsx", "file_system_id": f"fs-0123456789abcde{i:02d}"}
        for i in range(2)]),
    "efa-two-subnets": lambda s: s["queues"][0].update(
        subnet_ids=[SUBNET, "subnet-0b2c3d4e5f6071829"],
        compute=[{"instance_type": "p5.48xlarge", "max_nodes": 2}]),
    "capacity-block-min-max": lambda s: s["queues"][0].update(
        capacity_type="capacity_block", reservation_id="cr-0123456789abcdef0",
        compute=[{"instance_type": "p5.48xlarge", "min_nodes": 1, "max_nodes": 2}]),
    "empty-file": lambda s: s.clear(),
    # Accepted once although AWS or ParallelCluster refuses them.
    "bucket-double-dot": lambda s: s.update(s3_access=[{"bucket": "a..b"}]),
    "bucket-ip": lambda s: s.update(s3_access=[{"bucket": "192.168.1.1"}]),
    "bucket-reserved-prefix": lambda s: s.update(s3_access=[{"bucket": "xn--ckpt"}]),
    "bucket-reserved-suffix": lambda s: s.update(s3_access=[{"bucket": "ckpt-s3alias"}]),
    "region-unknown": lambda s: s.update(region="us-east-9"),
    "ssh-key-empty": lambda s: s["head_node"].update(ssh_key=""),
    "ssh-key-too-long": lambda s: s["head_node"].update(ssh_key="k" * 300),
    "max-nodes-bool": lambda s: s["queues"][0]["compute"][0].update(max_nodes=True),
    "scaledown-huge": lambda s: s.update(slurm={"scaledown_idletime_min": 10**12}),
    "fsx-capacity-huge": lambda s: s.update(storage=[{"name": "f", "storage_capacity_gib":
                                                      2_400_000_000}]),
    "fsx-empty-name": lambda s: s.update(storage=[{"name": "", "storage_capacity_gib": 1200,
                                                   "per_unit_storage_throughput": 125}]),
    "dra-same-name": lambda s: s.update(storage=[{
        "name": "f", "storage_capacity_gib": 1200, "per_unit_storage_throughput": 125,
        "data_repositories": [{"name": "d", "s3_path": f"s3://bkt-{i}/x", "fs_path": f"/d{i}"}
                              for i in range(2)]}]),
    "mount-opt-slurm": lambda s: s.update(storage=[{"name": "f", "mount_dir": "/opt/slurm",
                                                    "file_system_id": "fs-0123456789abcdef0"}]),
    "placement-group-off-but-named": lambda s: s["queues"][0].update(
        placement_group=False, placement_group_name="pg-train"),
    "null-key": lambda s: s.update({None: None}),
}


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(valid_spec(), st.sampled_from(sorted(BREAKERS)))
def test_invalid_specs_fail_cleanly_and_write_nothing(tmp_path: Path, spec, breaker):
    BREAKERS[breaker](spec)
    workdir = tmp_path / breaker
    workdir.mkdir(exist_ok=True)
    src = workdir / "spec.yaml"
    src.write_text(yaml.safe_dump(spec))
    out = workdir / "cluster.yaml"
    try:
        render_file(src, out)
    except SpecError as exc:
        assert str(exc).strip()
    else:
        raise AssertionError(f"{breaker}: render accepted an invalid spec")
    assert sorted(p.name for p in workdir.iterdir()) == ["spec.yaml"]


# Hostile values for ``cluster validate`` on a hand-written config: none may crash it (exit 1).
HOSTILE = st.sampled_from([
    None, True, 0, -1, 10**30, 1.5, "", " ", "a b", "$(touch pwned)", "a\nb", "\x1b[31m", "x" * 300,
    ["a"], [], {"a": 1}, {}, [{"Name": "x"}], {None: 1}, "/opt/slurm", "us-east-9", "default",
])
CONFIG_PATHS = [
    ("Region",), ("Image", "Os"), ("HeadNode",), ("HeadNode", "InstanceType"),
    ("HeadNode", "Networking", "SubnetId"), ("Scheduling", "SlurmQueues"),
    ("Scheduling", "SlurmQueues", 0, "Name"), ("Scheduling", "SlurmQueues", 0, "Networking"),
    ("Scheduling", "SlurmQueues", 0, "Networking", "PlacementGroup"),
    ("Scheduling", "SlurmQueues", 0, "ComputeResources"),
    ("Scheduling", "SlurmQueues", 0, "ComputeResources", 0, "Name"),
    ("Scheduling", "SlurmQueues", 0, "ComputeResources", 0, "InstanceType"),
    ("Scheduling", "SlurmQueues", 0, "ComputeResources", 0, "MinCount"),
    ("Scheduling", "SlurmQueues", 0, "ComputeResources", 0, "Efa"),
    ("Scheduling", "SlurmSettings"), ("SharedStorage",), ("Tags",), (None,),
]
BASE_CONFIG = {
    "Region": "us-east-1", "Image": {"Os": "alinux2023"},
    "HeadNode": {"InstanceType": "m5.xlarge", "Networking": {"SubnetId": SUBNET}},
    "Scheduling": {"Scheduler": "slurm", "SlurmQueues": [{
        "Name": "train", "Networking": {"SubnetIds": [SUBNET]},
        "ComputeResources": [{"Name": "gpu", "InstanceType": "p5.48xlarge", "MinCount": 0,
                              "MaxCount": 2, "Efa": {"Enabled": True}}]}]},
    "SharedStorage": [{"Name": "fsx", "MountDir": "/fsx", "StorageType": "FsxLustre",
                       "FsxLustreSettings": {"FileSystemId": "fs-0123456789abcdef0"}}],
}


def _put(cfg, path, value) -> None:  # noqa: ANN001
    node = cfg
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(CONFIG_PATHS), HOSTILE), min_size=1, max_size=3))
def test_hostile_configs_never_crash_validate(tmp_path: Path, edits):
    import copy

    from click.testing import CliRunner

    from hpcflow.cli.main import cli

    cfg = copy.deepcopy(BASE_CONFIG)
    for path, value in edits:
        try:
            _put(cfg, path, copy.deepcopy(value))
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit replaced the parent
    src = tmp_path / "cluster.yaml"
    src.write_text(yaml.safe_dump(cfg))
    r = CliRunner().invoke(cli, ["cluster", "validate", str(src)])
    assert r.exit_code in (0, 2), (edits, r.output)
    assert "internal error" not in r.output and "Traceback" not in r.output, r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cluster.yaml"]
