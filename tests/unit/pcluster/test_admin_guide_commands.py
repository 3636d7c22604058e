"""Every ``hpcflow`` command of docs/admin-guide.md's cluster steps (1 to 8) runs, in the guide's
order, on the files the guide writes (the step 3 spec, the step 8 config), and exits 0. Commands
that need AWS (``--deep``, ``--refresh``) are left out: tests/integration/pcluster runs them
against moto. The node steps (9, 10) run in tests/integration/bootstrap."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from hpcflow.cli.main import cli

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "admin-guide.md"
NEEDS_AWS = ("--deep", "--refresh")


def _blocks(text: str, lang: str) -> list[str]:
    parts = text.split(f"```{lang}\n")[1:]
    return [p.split("```", 1)[0] for p in parts]


def _commands(text: str) -> list[list[str]]:
    out = []
    text = text.split("\n## 9.", 1)[0]  # the cluster steps; the node steps need sshd and S3
    for block in _blocks(text, "bash"):
        for line in block.splitlines():
            line = line.split(" #", 1)[0].strip()
            if line.startswith("hpcflow ") and not any(flag in line for flag in NEEDS_AWS):
                out.append(shlex.split(line)[1:])
    return out


def test_the_guide_has_the_commands_this_test_runs():
    words = [" ".join(c[:2]) for c in _commands(GUIDE.read_text())]
    for cmd in ("cluster instances", "cluster render", "cluster validate", "cluster cost",
                "cluster import"):
        assert cmd in words, cmd


def test_every_hpcflow_command_in_the_admin_guide_runs(tmp_path: Path, monkeypatch):
    text = GUIDE.read_text()
    spec = text.split("Save this as `cluster.spec.yaml`:\n\n```yaml\n", 1)[1].split("```", 1)[0]
    existing = text.split("## 8.", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "cluster.spec.yaml").write_text(spec)
    (tmp_path / "existing.yaml").write_text(existing)
    monkeypatch.chdir(tmp_path)
    for key in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for args in _commands(text):
        print("$ hpcflow", " ".join(args))
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
    # step 8: the imported spec renders back the config the admin started from
    assert yaml.safe_load((tmp_path / "cluster.yaml").read_text()) == yaml.safe_load(existing)
    imported = yaml.safe_load((tmp_path / "cluster.spec.yaml").read_text())
    assert imported["pcluster"]["Scheduling"]["SlurmQueues"][0]["HealthChecks"] == {
        "Gpu": {"Enabled": True}}


@pytest.mark.parametrize("field", ["compute_root_volume_gib", "additional_iam_policies",
                                   "custom_slurm_settings", "additional_security_groups"])
def test_the_guide_example_imports_into_fields(tmp_path: Path, field):
    text = GUIDE.read_text()
    existing = text.split("## 8.", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    from hpcflow.pcluster.importer import import_config

    spec = import_config(yaml.safe_load(existing))
    assert field in spec["queues"][0]


def test_the_install_block_installs_the_aws_extra():
    """Step 1's block: a virtualenv, `pip install -e '.[aws]'`, `hpcflow cluster --help`. What
    this checks: the extra exists and brings what the comment says (pyproject.toml), and the last
    line runs; not the venv and pip lines themselves (CI installs the same extras through
    scripts/install.sh --dev)."""
    import tomllib

    install = _blocks(GUIDE.read_text().split("## 1. Install", 1)[1], "bash")[0]
    lines = [ln.split(" #", 1)[0].strip() for ln in install.splitlines()]
    assert lines == ["# in a checkout of hpcflow", "python -m venv .venv && . .venv/bin/activate",
                     "pip install -e '.[aws]'", "hpcflow cluster --help"]
    assert "brings boto3 and aws-parallelcluster" in install
    project = tomllib.loads((GUIDE.parents[1] / "pyproject.toml").read_text())["project"]
    aws = project["optional-dependencies"]["aws"]
    assert {re.split(r"[<>=!~ ]", d)[0] for d in aws} == {"boto3", "aws-parallelcluster"}
    r = CliRunner().invoke(cli, shlex.split(lines[3])[1:])
    assert r.exit_code == 0 and "render" in r.output and "import" in r.output, r.output


def test_the_create_cluster_line_is_a_pcluster_command():
    """Step 7's block needs AWS. What this checks: the installed aws-parallelcluster's
    `pcluster create-cluster --help` takes each option the line uses, the cluster name is the
    step 3 spec's name, and the configuration is the file step 4 renders."""
    text = GUIDE.read_text()
    [line] = _blocks(text.split("## 7.", 1)[1], "bash")[0].split("\n")[:1]
    words = shlex.split(line)
    assert words[:2] == ["pcluster", "create-cluster"]
    pcluster = Path(sys.executable).with_name("pcluster")
    help_text = subprocess.run([str(pcluster), "create-cluster", "--help"], capture_output=True,
                               text=True, timeout=120, check=True).stdout
    for flag in (w for w in words[2:] if w.startswith("-")):
        assert f"{flag} " in help_text, flag
    options = dict(zip(words[2::2], words[3::2], strict=True))
    assert f"name: {options['--cluster-name']}\n" in text
    assert f"hpcflow cluster render cluster.spec.yaml -o {options['--cluster-configuration']}" \
        in text
