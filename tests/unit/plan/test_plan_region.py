"""The plan commands take the regions the cluster spec takes (and so ``cluster cost``), with
the same words: one region check (:func:`hpcflow.spec.cluster_types.region_problem`)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from hpcflow.cli.main import cli
from hpcflow.spec.cluster_types import region_problem

GOODPUT = ["plan", "goodput", "--nodes", "2", "--instance", "p5.48xlarge", "--hours", "10",
           "--save-s", "5", "--restart-s", "60", "--startup-s", "60", "--runs", "5",
           "--price-source", "table"]
LAYOUT = ["plan", "layout", "--model", "llama-8b", "--instance", "p5.48xlarge", "--nodes", "1"]


@pytest.mark.parametrize("region", ["us-east-99", "US-EAST-1", "../../etc", "mars-north-1"])
@pytest.mark.parametrize("command", [GOODPUT, LAYOUT], ids=["goodput", "layout"])
def test_a_region_the_cluster_spec_refuses_is_refused_with_its_words(command, region):
    result = CliRunner().invoke(cli, [*command, "--region", region])
    assert result.exit_code == 2, result.output
    assert f"--region: {region!r}: {region_problem(region)}" in result.output


def test_a_supported_region_is_taken():
    result = CliRunner().invoke(cli, [*GOODPUT, "--region", "eu-west-1", "--json"])
    assert result.exit_code == 0, result.output
