"""Hostile cluster specs and configs that used to render or validate although AWS or
ParallelCluster refuses them, and the two that crashed ``cluster validate``: each is now refused
with exit 2, naming the field, the value and what is allowed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from hpcflow.cli.main import cli
from hpcflow.resources import data_dir
from hpcflow.spec.cluster_types import PCLUSTER_REGIONS
from hpcflow.spec.s3uri import is_bucket_name

P5_CONFIG = data_dir("pcluster_configs") / "p5-fsx.cluster.yaml"
FSX = {"name": "f", "storage_capacity_gib": 1200, "per_unit_storage_throughput": 125}


def _run(*args: str):
    r = CliRunner().invoke(cli, list(args))
    assert "Traceback" not in r.output and "internal error" not in r.output, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    return r


def _set(path: str, value: Any):
    def apply(spec: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = spec
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[last] = value
    return apply


def _storage(**extra: Any):
    return _set("storage", [{**FSX, **extra}])


@pytest.mark.parametrize("mutate, field, expected", [
    pytest.param(_set("s3_access", [{"bucket": "a..b"}]), "s3_access[0].bucket",
                 "two dots in a row", id="bucket-double-dot"),
    pytest.param(_set("s3_access", [{"bucket": "192.168.1.1"}]), "s3_access[0].bucket",
                 "cannot be an IP address", id="bucket-ip"),
    pytest.param(_set("s3_access", [{"bucket": "xn--bucket"}]), "s3_access[0].bucket",
                 "the prefix 'xn--' is reserved", id="bucket-xn"),
    pytest.param(_set("s3_access", [{"bucket": "ckpt-s3alias"}]), "s3_access[0].bucket",
                 "the suffix '-s3alias' is reserved", id="bucket-s3alias"),
    pytest.param(_storage(import_path="s3://a..b/data"), "storage[0].import_path",
                 "bucket 'a..b' is not a valid S3 bucket name", id="s3-path-bucket"),
    pytest.param(_set("region", "us-east-9"), "region",
                 "'us-east-9': not an AWS region aws-parallelcluster supports", id="region"),
    pytest.param(_set("head_node.ssh_key", ""), "head_node.ssh_key",
                 "an empty key pair name would leave HeadNode.Ssh out", id="ssh-key-empty"),
    pytest.param(_set("head_node.ssh_key", "k" * 300), "head_node.ssh_key",
                 "300 characters; an EC2 key pair name has at most 255", id="ssh-key-long"),
    pytest.param(_set("queues.0.compute.0.max_nodes", True), "queues[0].compute[0].max_nodes",
                 "a whole number from 1 to 100,000 is expected, not true", id="max-nodes-bool"),
    pytest.param(_set("queues.0.compute.0.min_nodes", False), "queues[0].compute[0].min_nodes",
                 "not false", id="min-nodes-bool"),
    pytest.param(_set("slurm", {"scaledown_idletime_min": 10**12}),
                 "slurm.scaledown_idletime_min", "less than or equal to 35791394",
                 id="scaledown-huge"),
    pytest.param(_storage(storage_capacity_gib=2_400_000_000), "storage[0].storage_capacity_gib",
                 "less than or equal to 2147483647", id="fsx-capacity-huge"),
    pytest.param(_storage(name=""), "storage[0].name", "an empty storage name", id="fsx-no-name"),
    pytest.param(_storage(data_repositories=[
        {"name": "d", "s3_path": "s3://bkt-a/x", "fs_path": "/a"},
        {"name": "d", "s3_path": "s3://bkt-b/y", "fs_path": "/b"}]),
        "storage[0].data_repositories[1].name", "'d' is used twice", id="dra-same-name"),
    pytest.param(_storage(mount_dir="/opt/slurm"), "storage[0].mount_dir",
                 "'/opt/slurm' is a directory the nodes' own system or ParallelCluster uses",
                 id="mount-opt-slurm"),
])
def test_a_spec_aws_would_refuse_is_refused(tmp_path: Path, base_spec, mutate, field, expected):
    mutate(base_spec)
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump(base_spec))
    out = tmp_path / "cluster.yaml"
    r = _run("cluster", "render", str(spec), "-o", str(out))
    assert r.exit_code == 2, r.output
    line = next((ln for ln in r.output.splitlines() if f"{field}:" in ln), "")
    assert expected in line, r.output
    assert not out.exists()


def test_a_5000_digit_node_count_says_at_most_100000(tmp_path: Path, base_spec):
    text = yaml.safe_dump(base_spec).replace("max_nodes: 2", "max_nodes: " + "9" * 5000)
    spec = tmp_path / "s.yaml"
    spec.write_text(text)
    r = _run("cluster", "render", str(spec))
    assert r.exit_code == 2
    assert ("queues[0].compute[0].max_nodes: '99999" in r.output
            and "an integer of 5,000 digits is out of range: at most 100,000" in r.output)


def test_an_unknown_region_gets_no_cost_estimate(tmp_path: Path, base_spec):
    """It used to print "total: 0.00 to 0.00 USD" with exit 0."""
    base_spec["region"] = "us-east-9"
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump(base_spec))
    r = _run("cluster", "cost", str(spec), "--hours", "1")
    assert r.exit_code == 2 and "region: 'us-east-9'" in r.output and "0.00" not in r.output


@pytest.mark.parametrize("name", ["a..b", "192.168.1.1", "xn--a", "sthree-a", "amzn-s3-demo-a",
                                  "a-s3alias", "a--ol-s3", "a.mrap", "a--x-s3", "a--table-s3"])
def test_the_s3_uri_parser_and_the_cluster_spec_share_one_bucket_rule(name: str):
    from hpcflow.spec.s3uri import parse_s3_uri

    assert not is_bucket_name(name)
    with pytest.raises(ValueError, match="is not a valid S3 bucket name"):
        parse_s3_uri(f"s3://{name}/x")


def test_valid_bucket_names_still_pass():
    for name in ("my-checkpoints", "a.b.c", "abc", "x" * 63, "s3alias-first", "1.2.3"):
        assert is_bucket_name(name), name


def test_the_region_list_is_parallelclusters_own():
    from importlib.resources import files

    text = (files("pcluster") / "resources" / "supported-regions").read_text()
    assert PCLUSTER_REGIONS == {line.strip() for line in text.splitlines() if line.strip()}


def _config_with(mutate) -> dict[str, Any]:
    cfg = yaml.safe_load(P5_CONFIG.read_text())
    mutate(cfg)
    return cfg


def _queue(cfg):
    return cfg["Scheduling"]["SlurmQueues"][0]


@pytest.mark.parametrize("mutate, path, expected", [
    pytest.param(lambda c: _queue(c).update(Name=["a"]), "Scheduling.SlurmQueues[0].Name",
                 "['a'] is not a valid queue name: a name is text", id="queue-name-list"),
    pytest.param(lambda c: _queue(c)["ComputeResources"][0].update(Name={"a": 1}),
                 "Scheduling.SlurmQueues[0].ComputeResources[0].Name",
                 "{'a': 1} is not a valid compute resource name", id="cr-name-mapping"),
    pytest.param(lambda c: c["SharedStorage"][0].update(MountDir="/opt/slurm"),
                 "SharedStorage[0].MountDir", "'/opt/slurm' is a directory", id="mount-dir"),
])
def test_validate_refuses_without_crashing(tmp_path: Path, mutate, path, expected):
    cfg = tmp_path / "cluster.yaml"
    cfg.write_text(yaml.safe_dump(_config_with(mutate)))
    r = _run("cluster", "validate", str(cfg))
    assert r.exit_code == 2, r.output
    assert f"{path}: {expected}" in r.output


@pytest.mark.parametrize("name", [
    pytest.param("a b", id="space"), pytest.param("", id="empty"),
    pytest.param("a" * 1000, id="1000-chars"), pytest.param("$(touch pwned)", id="shell"),
    pytest.param("1abc", id="digit-first"),
])
def test_validate_cluster_name_follows_the_spec_name_rule(tmp_path: Path, name: str):
    r = _run("cluster", "validate", str(P5_CONFIG), "--cluster-name", name)
    assert r.exit_code == 2, r.output
    assert "--cluster-name" in r.output and "not a cluster name" in r.output
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()


def test_base_config_is_still_valid_with_a_good_cluster_name():
    r = _run("cluster", "validate", str(P5_CONFIG), "--cluster-name", "train-p5")
    assert r.exit_code == 0, r.output



def test_a_region_without_any_price_is_not_estimated_as_zero(tmp_path: Path, base_spec):
    base_spec["region"] = "ap-south-1"  # the shipped table holds us-east-1 prices only
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump(base_spec))
    r = _run("cluster", "cost", str(spec), "--hours", "1", "--price-source", "table")
    assert r.exit_code == 0, r.output
    assert "total: not estimated: no line has a known price" in r.output
    assert "0.00 to 0.00" not in r.output


@pytest.mark.parametrize("text, expected", [
    pytest.param("~: ~\n", "(top level): a null key (YAML's `~`, `null`, or a line that starts "
                 "with ':') is not allowed", id="top-level"),
    pytest.param("tags: {5: x}\n", "tags: the key 5 (int) is not allowed", id="int-key"),
])
def test_a_key_that_is_not_text_is_named_as_such(tmp_path: Path, base_spec, text, expected):
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump(base_spec) + text)
    r = _run("cluster", "render", str(spec))
    assert r.exit_code == 2 and expected in r.output, r.output
    assert "None: None" not in r.output


def test_a_null_key_in_a_config_is_named_as_such(tmp_path: Path):
    cfg = tmp_path / "cluster.yaml"
    cfg.write_text(P5_CONFIG.read_text() + "~: ~\n")
    r = _run("cluster", "validate", str(cfg))
    assert r.exit_code == 2
    assert "a null key (YAML's `~`, `null`, or a line that starts with ':') is not a field name" \
        in r.output


@pytest.mark.parametrize("mutate, expected", [
    pytest.param(lambda c: _queue(c)["ComputeResources"][0].update(MinCount="x"),
                 "MinCount: 'x' (text): rejected by the ParallelCluster schema: Not a valid "
                 "integer.", id="int-as-text"),
    pytest.param(lambda c: c.update(HeadNode=[1]), "HeadNode: [1] (a list): rejected by the "
                 "ParallelCluster schema: Invalid input type. (expected a mapping of keys)",
                 id="mapping-as-list"),
    pytest.param(lambda c: c["Scheduling"].update(SlurmQueues={"a": 1}),
                 "SlurmQueues: {'a': 1} (a mapping): rejected by the ParallelCluster schema: "
                 "Invalid type. (expected a list)", id="list-as-mapping"),
])
def test_schema_errors_name_the_value_and_the_expected_shape(tmp_path: Path, mutate, expected):
    cfg = tmp_path / "cluster.yaml"
    cfg.write_text(yaml.safe_dump(_config_with(mutate)))
    r = _run("cluster", "validate", str(cfg))
    assert r.exit_code == 2 and expected in r.output, r.output


@pytest.mark.parametrize("command", ["render", "import"])
def test_an_output_name_with_a_trailing_slash_is_refused(tmp_path: Path, command: str):
    source = data_dir("pcluster_configs") / ("p5-fsx.spec.yaml" if command == "render"
                                             else "p5-fsx.cluster.yaml")
    r = _run("cluster", command, str(source), "-o", f"{tmp_path}/new.yaml/")
    assert r.exit_code == 2, r.output
    assert "ends with '/', which names a folder" in r.output
    assert list(tmp_path.iterdir()) == []


def test_an_output_in_proc_says_the_folder_takes_no_new_file():
    r = _run("cluster", "render", str(data_dir("pcluster_configs") / "p5-fsx.spec.yaml"),
             "-o", "/proc/version")
    assert r.exit_code == 1
    assert "'/proc' does not let a new file be created in it" in r.output


@pytest.mark.parametrize("url", ["not a url", "ftp://x", "http://", "http://h:port"])
def test_a_bad_endpoint_url_is_a_usage_error_naming_the_option(url: str):
    r = _run("cluster", "validate", str(P5_CONFIG), "--deep", "--endpoint-url", url)
    assert r.exit_code == 2, r.output
    assert "--endpoint-url" in r.output and "not an http:// or https:// URL" in r.output
    assert "(top level)" not in r.output


def test_a_blocked_deep_validate_prints_no_coroutine_warning():
    import os
    import subprocess
    import sys

    env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing"}
    proc = subprocess.run([sys.executable, "-m", "hpcflow", "cluster", "validate", str(P5_CONFIG),
                           "--deep", "--endpoint-url", "http://127.0.0.1:9"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 7, proc.stderr
    assert "never awaited" not in proc.stderr and "RuntimeWarning" not in proc.stderr


@pytest.mark.parametrize("where", ["queue", "compute"])
def test_a_disabled_placement_group_with_a_name_is_refused_in_the_spec(base_spec, where: str):
    from hpcflow.errors import SpecError
    from hpcflow.spec.cluster_loading import validate_cluster_spec

    node = base_spec["queues"][0] if where == "queue" else base_spec["queues"][0]["compute"][0]
    node.update(placement_group=False, placement_group_name="pg-train")
    with pytest.raises(SpecError, match="placement_group: false with placement_group_name "
                                        "'pg-train': a named placement group must be enabled"):
        validate_cluster_spec(base_spec, "s.yaml")


def test_a_queue_placement_group_name_alone_is_rendered(base_spec):
    """It used to be dropped unless placement_group: true was also set."""
    from hpcflow.pcluster.render import check_spec
    from hpcflow.spec.cluster import ClusterSpec

    base_spec["queues"][0]["compute"][0]["instance_type"] = "m5.xlarge"
    base_spec["queues"][0]["placement_group_name"] = "pg-train"
    result = check_spec(ClusterSpec.model_validate(base_spec))
    assert result.errors == [], [str(f) for f in result.errors]
    queue = result.config["Scheduling"]["SlurmQueues"][0]
    assert queue["Networking"]["PlacementGroup"] == {"Name": "pg-train"}


@pytest.mark.parametrize("mutate, path, expected", [
    pytest.param(lambda c: c.update(Region="us-east-9"), "Region",
                 "'us-east-9': not an AWS region aws-parallelcluster supports", id="region"),
    pytest.param(lambda c: c["HeadNode"].update(Ssh={"KeyName": ""}), "HeadNode.Ssh.KeyName",
                 "an EC2 key pair name has 1 to 255 characters, this one 0", id="key-name"),
    pytest.param(lambda c: c["Scheduling"].update(SlurmSettings={"ScaledownIdletime": 10**12}),
                 "Scheduling.SlurmSettings.ScaledownIdletime", "at most 35,791,394",
                 id="scaledown"),
    pytest.param(lambda c: c["SharedStorage"][0]["FsxLustreSettings"].update(
        StorageCapacity=2_400_000_000), "SharedStorage[0].FsxLustreSettings.StorageCapacity",
        "the FSx API takes at most 2,147,483,647", id="fsx-capacity"),
    pytest.param(lambda c: c["HeadNode"].update(Iam={"S3Access": [{"BucketName": "a..b"}]}),
                 "HeadNode.Iam.S3Access[0].BucketName", "two dots in a row", id="bucket"),
])
def test_validate_refuses_what_aws_refuses_as_the_spec_does(tmp_path: Path, mutate, path,
                                                            expected):
    cfg = tmp_path / "cluster.yaml"
    cfg.write_text(yaml.safe_dump(_config_with(mutate)))
    r = _run("cluster", "validate", str(cfg))
    assert r.exit_code == 2, r.output
    line = next((ln for ln in r.output.splitlines() if f"{path}:" in ln), "")
    assert expected in line and "stricter than ParallelCluster" in line, r.output


def test_an_import_error_names_the_value(tmp_path: Path):
    cfg = _config_with(lambda c: c["HeadNode"]["Networking"].update(SubnetId=5))
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(cfg))
    r = _run("cluster", "import", str(path))
    assert r.exit_code == 2
    assert "cannot import: head_node.subnet_id: 5: Input should be a valid string" in r.output


@pytest.mark.parametrize("bucket, reason", [
    pytest.param("192.168.1.1", "a bucket name cannot be an IP address", id="ip"),
    pytest.param("xn--b", "the prefix 'xn--' is reserved by S3", id="xn"),
    pytest.param("a..b", "two dots in a row are not allowed", id="double-dot"),
])
def test_upload_bootstrap_bucket_uses_the_same_rule(bucket: str, reason: str):
    from hpcflow.aws.s3_bootstrap import check_target
    from hpcflow.errors import SpecError

    with pytest.raises(SpecError, match=f"--bucket: '{bucket}' is not a valid S3 bucket name: "
                                        f"{reason}"):
        check_target(bucket, "bootstrap")
