"""docs/hyperpod.md against the code: its first hpcflow command is a --dry-run that prints the
request shown on the page, byte for byte; every line of its bash blocks that needs no AWS runs
here and exits 0 (tests/integration/aws/test_hyperpod_doc_moto.py runs the cluster part, in
order, against moto). Its "First job" section runs here as written, in a fresh folder, on a node
that HyperPod's resource config (under a root folder of the test's) calls a HyperPod node, with
sbatch answered by a fake: the local Slurm has no HyperPod plugin and refuses
``--auto-resume=1``."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence

import pytest
from click.testing import CliRunner
from hyperpod_doc import blocks, command_lines, job_lines, needs_aws

from hpcflow.cli.main import cli
from hpcflow.hyperpod import node
from hpcflow.jobs import service
from hpcflow.slurm.client import SlurmClient


def test_the_first_command_is_a_dry_run_that_prints_the_request_on_the_page(monkeypatch):
    first = next(w for w in command_lines() if w[0] == "hpcflow")
    assert "--dry-run" in first and "--json" not in first
    result = CliRunner().invoke(cli, first[1:])
    assert result.exit_code == 0, result.output
    [shown] = [b for b in blocks("json") if '"ClusterName"' in b]
    assert result.stdout == shown
    assert json.loads(result.stdout)["InstanceGroups"][2]["InstanceType"] == "ml.p5.48xlarge"


def test_the_json_form_has_the_request_in_the_envelope():
    line = next(w for w in command_lines() if "--json" in w)
    result = CliRunner().invoke(cli, line[1:])
    envelope = json.loads(result.stdout)
    assert envelope["ok"] is True and envelope["error"] is None
    assert envelope["data"]["request"]["ClusterName"] == "train-hp"


def test_every_line_without_aws_runs(tmp_path, monkeypatch):
    from hpcflow.resources import data_dir

    monkeypatch.chdir(tmp_path)
    (tmp_path / "pcluster_configs").symlink_to(data_dir("pcluster_configs"))
    ran = 0
    for words in command_lines():
        if needs_aws(words):
            continue
        assert words[0] == "hpcflow", words
        result = CliRunner().invoke(cli, words[1:])
        assert result.exit_code == 0, (words, result.output)
        ran += 1
    assert ran >= 4
    assert (tmp_path / "bundle" / "on_create.sh").is_file()
    assert (tmp_path / "cluster.yaml").is_file()


def test_the_yaml_block_is_the_example_specs_hyperpod_block():
    import yaml

    from hpcflow.resources import data_dir

    [shown] = [b for b in blocks("yaml") if b.lstrip().startswith("hyperpod:")]
    spec = yaml.safe_load((data_dir("pcluster_configs") / "hyperpod-p5.spec.yaml").read_text())
    assert yaml.safe_load(shown) == {"hyperpod": spec["hyperpod"]}


class Sbatch:
    """sbatch answered with a job id; each call kept with the script it was given."""

    def __init__(self) -> None:
        self.scripts: list[str] = []

    def __call__(self, argv: Sequence[str], *, input: str | None = None, timeout_s: float = 60):
        if argv[0] == "sbatch":
            self.scripts.append(open(argv[-1]).read())
            return subprocess.CompletedProcess(list(argv), 0, "4242\n", "")
        return subprocess.CompletedProcess(list(argv), 0, "", "")


@pytest.fixture
def cluster_node(tmp_path, monkeypatch) -> Sbatch:
    """This test's folder as a HyperPod login node: the resource config lists the groups of the
    request the page shows; sbatch is a fake; the page's job.yaml is written here."""
    [request] = [json.loads(b) for b in blocks("json") if '"ClusterName"' in b]
    config = {"InstanceGroups": [{"Name": g["InstanceGroupName"], "Instances": []}
                                 for g in request["InstanceGroups"]]}
    root = tmp_path / "node"
    (root / "opt/ml/config").mkdir(parents=True)
    (root / "opt/ml/config/resource_config.json").write_text(json.dumps(config))
    monkeypatch.setattr(node, "ROOT", root)
    monkeypatch.delenv("SAGEMAKER_RESOURCE_CONFIG_PATH", raising=False)
    monkeypatch.setenv("HPCFLOW_HOME", str(tmp_path / "home"))
    fake = Sbatch()
    monkeypatch.setattr(service, "SlurmClient", lambda: SlurmClient(fake, attempts=1))
    monkeypatch.chdir(tmp_path)
    [spec] = blocks("yaml", job=True)
    (tmp_path / "job.yaml").write_text(spec)
    return fake


def test_the_first_job_runs_as_written(cluster_node, tmp_path):
    lines = job_lines()
    assert [w[:2] for w in lines] == [["hpcflow", "submit"]] * 2
    outputs = []
    for words in lines:
        result = CliRunner().invoke(cli, words[1:])
        assert result.exit_code == 0, (words, result.output)
        outputs.append(result.output)
    assert "--auto-resume=1" in outputs[0] and "submitted job 4242" in outputs[1]
    [script] = cluster_node.scripts
    assert script == (tmp_path / "runs" / "first-job" / "job.sbatch").read_text()
    assert '"--auto-resume=1"' in script and '"auto_resume": true' in script


def test_the_dry_run_prints_what_the_page_shows(cluster_node):
    [dry_run] = [w for w in job_lines() if "--dry-run" in w]
    result = CliRunner().invoke(cli, dry_run[1:])
    assert result.exit_code == 0, result.output
    [shown] = blocks("text", job=True)
    printed = result.output.splitlines()
    for line in shown.splitlines():
        assert line in printed, line
    assert not cluster_node.scripts  # a dry run submits nothing
