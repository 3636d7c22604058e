"""docs/hyperpod.md against the code: its first hpcflow command is a --dry-run that prints the
request shown on the page, byte for byte; every line of its bash blocks that needs no AWS runs
here and exits 0 (tests/integration/aws/test_hyperpod_doc_moto.py runs the whole page, in
order, against moto)."""

from __future__ import annotations

import json

from click.testing import CliRunner
from hyperpod_doc import blocks, command_lines, needs_aws

from hpcflow.cli.main import cli


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
