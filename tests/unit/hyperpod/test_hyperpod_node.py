"""Is this a SageMaker HyperPod node (hpcflow.hyperpod.node), from the node's own files under a
root folder the test makes, and what ``hpcflow submit`` says and does for a job that asks for
HyperPod's auto-resume there and elsewhere."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from hpcflow.cli.main import cli
from hpcflow.errors import SubmitError
from hpcflow.hyperpod import node
from hpcflow.hyperpod.node import hyperpod_node_fact, submit_verdict
from hpcflow.jobs import service
from hpcflow.slurm.client import SlurmClient

CONFIG = {"InstanceGroups": [
    {"Name": "controller", "Instances": [{"CustomerIpAddress": "10.1.0.10"}]},
    {"Name": "train", "Instances": [{"CustomerIpAddress": "10.1.0.20"}]}]}


def put(root: Path, path: str, text: str | None = None) -> None:
    """A file (or, with no text, a folder) at ``path`` under ``root``."""
    target = root / path.lstrip("/")
    if text is None:
        target.mkdir(parents=True)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


@pytest.mark.parametrize(("files", "env", "fact"), [
    pytest.param({}, {}, None, id="plain-node"),
    pytest.param({"/opt/sagemaker_cluster": None}, {}, "/opt/sagemaker_cluster exists",
                 id="sagemaker-cluster-folder"),
    pytest.param({"/opt/ml/config/resource_config.json": json.dumps(CONFIG)}, {},
                 "HyperPod's resource config /opt/ml/config/resource_config.json lists instance "
                 "groups controller, train", id="resource-config"),
    pytest.param({"/etc/hp/rc.json": json.dumps(CONFIG)},
                 {"SAGEMAKER_RESOURCE_CONFIG_PATH": "/etc/hp/rc.json"},
                 "HyperPod's resource config /etc/hp/rc.json lists instance groups controller, "
                 "train", id="resource-config-the-variable-names"),
    pytest.param({"/opt/ml/config/resource_config.json": json.dumps(CONFIG)},
                 {"SAGEMAKER_RESOURCE_CONFIG_PATH": "/etc/hp/none.json"}, None,
                 id="the-variable-wins-over-the-default-path"),
    pytest.param({"/opt/ml/config/resource_config.json": "{not json"}, {}, None,
                 id="malformed-config-proves-nothing"),
    pytest.param({"/opt/ml/config/resource_config.json": '{"InstanceGroups": []}'}, {}, None,
                 id="config-without-groups"),
    pytest.param({"/opt/ml/config/resource_config.json": "[1, 2]",
                  "/opt/sagemaker_cluster": None}, {}, "/opt/sagemaker_cluster exists",
                 id="malformed-config-then-the-folder"),
    pytest.param({"/opt/sagemaker_cluster": "a file"}, {}, None, id="folder-that-is-a-file"),
    pytest.param({"/opt/ml/config/resource_config.json/x": "folder, not file"}, {}, None,
                 id="config-that-is-a-folder"),
])
def test_the_fact_that_says_hyperpod(tmp_path, files, env, fact):
    for path, text in files.items():
        put(tmp_path, path, text)
    assert hyperpod_node_fact(tmp_path, env) == fact


def test_the_root_defaults_to_the_modules(tmp_path, monkeypatch):
    monkeypatch.setattr(node, "ROOT", tmp_path)
    assert hyperpod_node_fact(env={}) is None
    put(tmp_path, "/opt/sagemaker_cluster")
    assert hyperpod_node_fact(env={}) == "/opt/sagemaker_cluster exists"


FACT = "/opt/sagemaker_cluster exists"


@pytest.mark.parametrize(("auto_resume", "fact", "dry_run", "notes", "warns", "refused"), [
    pytest.param(True, FACT, False, ["(/opt/sagemaker_cluster exists)", "--auto-resume=1",
                                     "excludes no node"], [], False, id="hyperpod-auto-resume"),
    pytest.param(True, FACT, True, ["--auto-resume=1"], [], False, id="hyperpod-dry-run"),
    pytest.param(False, FACT, False, ["(/opt/sagemaker_cluster exists)",
                                      "hyperpod.auto_resume: true would"], [], False,
                 id="hyperpod-without-it-is-told-of-it"),
    pytest.param(False, None, False, [], [], False, id="plain-slurm-plain-job"),
    pytest.param(True, None, True, [], ["hyperpod.auto_resume", "not a SageMaker HyperPod node",
                                        "refuses --auto-resume=1",
                                        "--set hyperpod.auto_resume=false"], False,
                 id="plain-slurm-dry-run-warns"),
    pytest.param(True, None, False, [], [], True, id="plain-slurm-refuses"),
])
def test_what_submit_says(auto_resume, fact, dry_run, notes, warns, refused):
    verdict = submit_verdict(auto_resume=auto_resume, fact=fact, dry_run=dry_run)
    assert (verdict.error is not None) is refused
    assert len(verdict.notes) == (1 if notes else 0) and len(verdict.warnings) == (1 if warns else 0)
    for word in notes:
        assert word in verdict.notes[0]
    for word in warns:
        assert word in verdict.warnings[0]
    if refused:
        assert "hyperpod.auto_resume" in verdict.error and "/opt/sagemaker_cluster" in verdict.error


class FakeSlurm:
    """sbatch and squeue answered from a table; each call kept."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str], *, input: str | None = None, timeout_s: float = 60):
        self.calls.append(list(argv))
        out = "4242\n" if argv[0] == "sbatch" else ""
        return subprocess.CompletedProcess(list(argv), 0, out, "")


@pytest.fixture
def slurm(monkeypatch, tmp_path) -> FakeSlurm:
    fake = FakeSlurm()
    monkeypatch.setattr(service, "SlurmClient", lambda: SlurmClient(fake, attempts=1))
    monkeypatch.setenv("HPCFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SAGEMAKER_RESOURCE_CONFIG_PATH", raising=False)
    monkeypatch.setattr(node, "ROOT", tmp_path / "node")
    (tmp_path / "node").mkdir()
    return fake


def spec(tmp_path: Path, **extra) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({"name": "hp", "time_limit": "10", "run_dir": "run",
                                    "program": {"argv": ["true"]},
                                    "hyperpod": {"auto_resume": True}, **extra}))
    return path


def test_submit_on_a_hyperpod_node_says_which_fact_and_submits(slurm, tmp_path):
    put(tmp_path / "node", "/opt/sagemaker_cluster")
    result = CliRunner().invoke(cli, ["submit", str(spec(tmp_path))])
    assert result.exit_code == 0, result.output
    assert "hpcflow: SageMaker HyperPod node (/opt/sagemaker_cluster exists)" in result.stderr
    assert "submitted job 4242" in result.stdout
    script = (tmp_path / "run" / "job.sbatch").read_text()
    assert '"--auto-resume=1"' in script and '"auto_resume": true' in script
    assert [c[0] for c in slurm.calls].count("sbatch") == 1


def test_submit_elsewhere_refuses_before_anything_is_written(slurm, tmp_path):
    result = CliRunner().invoke(cli, ["submit", str(spec(tmp_path))])
    assert result.exit_code == SubmitError.exit_code == 3, result.output
    assert "not a SageMaker HyperPod node" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "run").exists() and not slurm.calls


def test_a_dry_run_elsewhere_warns_and_prints_the_script(slurm, tmp_path):
    result = CliRunner().invoke(cli, ["submit", str(spec(tmp_path)), "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)["data"]
    assert data["notes"] == [] and "hyperpod.auto_resume" in data["warnings"][0]
    assert '"--auto-resume=1"' in data["script"]
    assert not (tmp_path / "run").exists() and not slurm.calls


def test_the_same_job_without_auto_resume_runs_anywhere(slurm, tmp_path):
    result = CliRunner().invoke(cli, ["submit", str(spec(tmp_path)), "--set",
                                      "hyperpod.auto_resume=false", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)["data"]
    assert data["job_id"] == "4242" and data["notes"] == [] and data["warnings"] == []
    assert "--auto-resume=1" not in (tmp_path / "run" / "job.sbatch").read_text()
