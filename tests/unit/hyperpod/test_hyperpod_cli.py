"""`hpcflow cluster hyperpod create --dry-run`: findings in the JSON envelope with exit 2, an
unwritable --bundle-dir named, and no AWS call on a dry run."""

from __future__ import annotations

import json

import yaml
from click.testing import CliRunner
from hyperpod_example import EXAMPLE, example_data

from hpcflow.cli.main import cli


def _create(*args):
    return CliRunner().invoke(cli, ["cluster", "hyperpod", "create", *args])


def test_a_hostile_spec_gives_every_finding_in_the_envelope(tmp_path):
    data = example_data()
    data["queues"][0]["capacity_type"] = "spot"
    data["queues"][0]["name"] = "gpu_q"
    spec = tmp_path / "bad.yaml"
    spec.write_text(yaml.safe_dump(data))
    result = _create(str(spec), "--dry-run", "--json")
    assert result.exit_code == 2
    envelope = json.loads(result.stdout)
    assert envelope["ok"] is False and envelope["error"]["type"] == "SpecError"
    codes = {(f["code"], f["path"]) for f in envelope["data"]["findings"]}
    assert {("HYPERPOD_CAPACITY", "queues[0].capacity_type"),
            ("HYPERPOD_GROUP_NAME", "queues[0].name")} <= codes
    plain = _create(str(spec), "--dry-run")
    assert plain.exit_code == 2 and "Traceback" not in plain.output
    assert "queues[0].capacity_type: capacity_type spot is not rendered" in plain.output


def test_a_bundle_dir_that_is_a_file_is_named(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = _create(str(EXAMPLE), "--dry-run", "--bundle-dir", str(blocker / "sub"))
    assert result.exit_code == 2
    assert f"--bundle-dir {blocker / 'sub'}: cannot write the bundle" in result.output


def test_a_dry_run_asks_no_aws(monkeypatch):
    import hpcflow.hyperpod.service as service

    def no_clients(*a, **k):
        raise AssertionError("a dry run built an AWS client")

    monkeypatch.setattr(service, "make_clients", no_clients)
    result = _create(str(EXAMPLE), "--dry-run", "--set", "hyperpod.ebs_volume_gib=100")
    assert result.exit_code == 0, result.output
    group = json.loads(result.stdout)["InstanceGroups"][2]
    assert group["InstanceStorageConfigs"] == [{"EbsVolumeConfig": {"VolumeSizeInGB": 100}}]
