"""``hpcflow cluster import`` refuses what ``render`` and ``validate`` refuse, with render's
message and before it says it succeeded or writes anything; it refuses more queues or compute
resources than ParallelCluster allows before its search (which renders the config once per
field); and it names what the input held where a list was due. A raw ``pcluster:`` block cannot
carry a mount path with a newline or a 10^20 GiB volume through import, render or validate."""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from hpcflow.cli.main import cli
from hpcflow.resources import data_dir

P5_CONFIG = data_dir("pcluster_configs") / "p5-fsx.cluster.yaml"


def _run(*args: str):
    r = CliRunner().invoke(cli, list(args))
    assert "Traceback" not in r.output and "internal error" not in r.output, r.output
    return r


def _config(mutate=None) -> dict[str, Any]:
    cfg = yaml.safe_load(P5_CONFIG.read_text())
    if mutate:
        mutate(cfg)
    return cfg


def _write(tmp_path: Path, cfg: dict[str, Any], name: str = "cluster.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(cfg))
    return path


def _queues(n: int, crs: int = 1):
    def mutate(cfg: dict[str, Any]) -> None:
        q0 = cfg["Scheduling"]["SlurmQueues"][0]
        out = []
        for i in range(n):
            q = copy.deepcopy(q0)
            q["Name"] = f"q{i}"
            q["ComputeResources"] = [{**q0["ComputeResources"][0], "Name": f"c{j}"}
                                     for j in range(crs)]
            out.append(q)
        cfg["Scheduling"]["SlurmQueues"] = out
    return mutate


@pytest.mark.parametrize("queues, crs, expected", [
    pytest.param(1000, 1, "Scheduling.SlurmQueues: 1000 queues; ParallelCluster allows at "
                 "most 50", id="1000-queues"),
    pytest.param(51, 1, "Scheduling.SlurmQueues: 51 queues; ParallelCluster allows at most 50",
                 id="51-queues"),
    pytest.param(1, 51, "Scheduling.SlurmQueues[0].ComputeResources: 51 compute resources; "
                 "ParallelCluster allows at most 50 per queue", id="51-per-queue"),
    pytest.param(2, 26, "Scheduling.SlurmQueues: 52 compute resources in the cluster; "
                 "ParallelCluster allows at most 50", id="52-in-the-cluster"),
])
def test_more_queues_or_compute_resources_than_parallelcluster_allows_are_refused_at_once(
        tmp_path, queues, crs, expected):
    path = _write(tmp_path, _config(_queues(queues, crs)))
    start = time.monotonic()
    r = _run("cluster", "import", str(path), "-o", str(tmp_path / "spec.yaml"))
    assert r.exit_code == 2, r.output
    assert f"cannot import: {expected}" in r.output
    assert time.monotonic() - start < 30  # 200 queues took 28.6 s before the bound
    assert not (tmp_path / "spec.yaml").exists()


@pytest.mark.parametrize("mutate, expected", [
    pytest.param(lambda c: c["Scheduling"].update(SlurmQueues="train"),
                 "Scheduling.SlurmQueues: 'train' is a string; ParallelCluster takes a list of "
                 "queues", id="queues-a-string"),
    pytest.param(lambda c: c["Scheduling"].update(SlurmQueues={"Name": "train"}),
                 "Scheduling.SlurmQueues: {'Name': 'train'} is a mapping", id="queues-a-mapping"),
    pytest.param(lambda c: c["Scheduling"]["SlurmQueues"][0]["Networking"].update(
        SubnetIds={"a": "subnet-0a1b2c3d4e5f60718"}),
        "Scheduling.SlurmQueues[0].Networking.SubnetIds: {'a': 'subnet-0a1b2c3d4e5f60718'} is a "
        "mapping; ParallelCluster takes a list of subnet ids", id="subnets-a-mapping"),
    pytest.param(lambda c: c["Scheduling"]["SlurmQueues"][0]["Networking"].update(
        SubnetIds="subnet-0a1b2c3d4e5f60718"),
        "Scheduling.SlurmQueues[0].Networking.SubnetIds: 'subnet-0a1b2c3d4e5f60718' is a string",
        id="subnets-a-string"),
    pytest.param(lambda c: c["Scheduling"]["SlurmQueues"][0].update(ComputeResources="p5"),
                 "Scheduling.SlurmQueues[0].ComputeResources: 'p5' is a string",
                 id="compute-resources-a-string"),
])
def test_a_list_that_is_a_string_or_a_mapping_is_named_as_such(tmp_path, mutate, expected):
    r = _run("cluster", "import", str(_write(tmp_path, _config(mutate))))
    assert r.exit_code == 2, r.output
    assert f"cannot import: {expected}" in r.output
    assert "queues: []" not in r.output and "subnet_ids: None" not in r.output


def _raw_mount(c: dict[str, Any]) -> None:
    c["SharedStorage"][0]["MountDir"] = "/fsx\nevil"


def _raw_root(c: dict[str, Any]) -> None:
    c["HeadNode"]["LocalStorage"]["RootVolume"]["Size"] = 10**20


def _raw_root_as(size: Any):
    def mutate(c: dict[str, Any]) -> None:
        c["HeadNode"]["LocalStorage"]["RootVolume"]["Size"] = size
    return mutate


def _raw_max_count(c: dict[str, Any]) -> None:
    c["Scheduling"]["SlurmQueues"][0]["ComputeResources"][0]["MaxCount"] = 1e20


def _raw_bucket(c: dict[str, Any]) -> None:
    c["HeadNode"]["Iam"]["S3Access"][0]["BucketName"] = "a..b"


@pytest.mark.parametrize("mutate, path, words", [
    pytest.param(_raw_mount, "SharedStorage[0].MountDir", "is not an absolute path of letters",
                 id="newline-in-mount-dir"),
    pytest.param(_raw_root, "HeadNode.LocalStorage.RootVolume.Size",
                 "an EBS volume has at most 65,536 GiB", id="root-volume-1e20-gib"),
    # YAML's 1e20 is a float (10^20 to ParallelCluster's schema), "1000...0" a text of digits.
    pytest.param(_raw_root_as(1e20), "HeadNode.LocalStorage.RootVolume.Size",
                 "1e+20 GiB; an EBS volume has at most 65,536 GiB", id="root-volume-float-1e20"),
    pytest.param(_raw_root_as("1" + "0" * 20), "HeadNode.LocalStorage.RootVolume.Size",
                 "an EBS volume has at most 65,536 GiB", id="root-volume-digits-text"),
    pytest.param(_raw_root_as(40.5), "HeadNode.LocalStorage.RootVolume.Size",
                 "40.5 is not a whole number: ParallelCluster's schema would cut it to 40",
                 id="root-volume-fraction"),
    pytest.param(_raw_bucket, "HeadNode.Iam.S3Access[0].BucketName", "two dots in a row",
                 id="bucket-name"),
])
def test_import_refuses_what_validate_refuses_with_renders_message(tmp_path, mutate, path,
                                                                  words):
    cfg = _write(tmp_path, _config(mutate))
    validated = _run("cluster", "validate", str(cfg))
    assert validated.exit_code == 2 and words in validated.output, validated.output
    out = tmp_path / "spec.yaml"
    imported = _run("cluster", "import", str(cfg), "-o", str(out))
    assert imported.exit_code == 2, imported.output
    assert "gives back" not in imported.output and not out.exists()
    assert "`hpcflow cluster render` would refuse" in imported.output
    problems = [ln.split(": ", 1)[1] for ln in imported.output.splitlines()[1:] if ln.strip()]
    assert any(words in p for p in problems), imported.output
    # The spec the import found, rendered: the same problems, word for word.
    from hpcflow.pcluster.importer import import_config

    spec = _write(tmp_path, import_config(_config(mutate)), "found.spec.yaml")
    rendered = _run("cluster", "render", str(spec))
    assert rendered.exit_code == 2, rendered.output
    assert [ln.split(": ", 1)[1] for ln in rendered.output.splitlines()[1:] if ln.strip()] \
        == problems


def test_a_node_count_of_1e20_is_refused_by_validate_as_by_import(tmp_path):
    cfg = _write(tmp_path, _config(_raw_max_count))
    validated = _run("cluster", "validate", str(cfg))
    assert validated.exit_code == 2, validated.output
    assert ("Scheduling.SlurmQueues[0].ComputeResources[0].MaxCount: 1e+20 nodes; at most "
            "100,000") in validated.output
    out = tmp_path / "spec.yaml"
    imported = _run("cluster", "import", str(cfg), "-o", str(out))
    assert imported.exit_code == 2 and not out.exists(), imported.output
    assert "max_nodes: 1e+20" in imported.output


def test_an_empty_queue_list_is_refused_by_validate_as_by_import(tmp_path):
    # ParallelCluster's schema takes `SlurmQueues: []`; a cluster without a queue runs no job.
    cfg = _write(tmp_path, _config(lambda c: c["Scheduling"].update(SlurmQueues=[])))
    validated = _run("cluster", "validate", str(cfg))
    assert validated.exit_code == 2, validated.output
    assert "Scheduling.SlurmQueues: an empty list: a Slurm cluster needs at least one queue" \
        in validated.output
    out = tmp_path / "spec.yaml"
    imported = _run("cluster", "import", str(cfg), "-o", str(out))
    assert imported.exit_code == 2 and not out.exists(), imported.output
