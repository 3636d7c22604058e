"""Every ``hpcflow`` command of docs/admin-guide.md's cluster steps (1 to 8) runs, in the guide's
order, on the files the guide writes (the step 3 spec, the step 8 config), and exits 0. Commands
that need AWS (``--deep``, ``--refresh``) are left out: tests/integration/pcluster runs them
against moto. The node steps (9, 10) run in tests/integration/bootstrap."""

from __future__ import annotations

import shlex
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
