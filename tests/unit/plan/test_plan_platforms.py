"""``hpcflow plan goodput`` prices the same run on ParallelCluster (EC2 prices) and as a
SageMaker training job (SageMaker's ml. prices), on-demand and spot, per useful GPU-hour; every
price names its source, and a type or region without a price is said, not guessed."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from hpcflow.aws import sagemaker_pricing as sm
from hpcflow.aws.pricing import PRICE_TABLE_USD_PER_H
from hpcflow.cli.main import cli
from hpcflow.plan.platforms import PLATFORMS, Rate, compare_platforms

GOODPUT = ["plan", "goodput", "--nodes", "16", "--instance", "p5.48xlarge", "--hours", "72",
           "--save-s", "30", "--restart-s", "300", "--startup-s", "600", "--price-source",
           "table", "--runs", "20"]


def test_four_platforms_side_by_side_per_useful_gpu_hour():
    out = CliRunner().invoke(cli, [*GOODPUT, "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)["data"]
    useful = data["closed_form"]["gpu_hours"]["useful"]
    rows = {row["platform"]: row for row in data["platforms"]}
    assert list(rows) == list(PLATFORMS)
    ec2, ml = PRICE_TABLE_USD_PER_H["p5.48xlarge"], sm.PRICE_TABLE_USD_PER_H["ml.p5.48xlarge"]
    assert rows["parallelcluster-on-demand"]["usd"] == pytest.approx([16 * 72 * ec2] * 2)
    assert rows["sagemaker-on-demand"]["usd"] == pytest.approx([16 * 72 * ml] * 2)
    assert rows["sagemaker-spot"]["usd"] == pytest.approx([0.1 * 16 * 72 * ml, 16 * 72 * ml])
    assert rows["sagemaker-on-demand"]["usd_per_useful_gpu_hour"][0] == pytest.approx(
        16 * 72 * ml / useful)
    assert rows["sagemaker-on-demand"]["usd_per_node_hour"][0] > rows[
        "parallelcluster-on-demand"]["usd_per_node_hour"][0]  # SageMaker's rate is not EC2's
    assert "SageMaker training price table" in rows["sagemaker-spot"]["source"]
    assert "UNVERIFIED" in rows["sagemaker-spot"]["source"]


def test_the_table_shows_every_platform_and_its_sources():
    out = CliRunner().invoke(cli, GOODPUT)
    assert out.exit_code == 0, out.output
    for name in PLATFORMS:
        assert name in out.output
    assert "price source: hpcflow shipped SageMaker training price table" in out.output


def test_an_instance_sagemaker_table_lacks_is_said():
    out = CliRunner().invoke(cli, [*GOODPUT[:5], "g6.xlarge", *GOODPUT[6:]])
    assert out.exit_code == 0, out.output
    assert "note: sagemaker-on-demand: no price known for g6.xlarge in us-east-1" in out.output


@pytest.mark.parametrize(("instance", "region", "usd"), [
    pytest.param("ml.g5.xlarge", "us-east-1", 1.408, id="ml-name"),
    pytest.param("g5.xlarge", "us-east-1", 1.408, id="ec2-name-gets-the-prefix"),
    pytest.param("ml.g5.xlarge", "eu-west-1", None, id="other-region-no-guess"),
    pytest.param("ml.g6.xlarge", "us-east-1", None, id="not-in-table"),
])
def test_sagemaker_price_lookup(instance, region, usd):
    price = sm.sagemaker_price(instance, region)
    assert (price.usd_per_hour if price else None) == usd
    if price:
        assert price.source == sm.TABLE_SOURCE and sm.TABLE_AS_OF in price.source


def test_every_sagemaker_row_is_a_training_instance_botocore_knows():
    from hpcflow.aws.requests import enum_values

    known = set(enum_values("sagemaker", "TrainingInstanceType"))
    assert set(sm.PRICE_TABLE_USD_PER_H) <= known


def test_compare_without_useful_hours_and_with_one_platform_unknown():
    rows = compare_platforms(2, 10.0, 0.0, parallelcluster=None,
                             sagemaker=Rate(4.0, (0.1, 1.0), "s"))
    assert [r.platform for r in rows] == ["sagemaker-on-demand", "sagemaker-spot"]
    assert rows[0].usd == (80.0, 80.0) and rows[1].usd == (8.0, 80.0)
    assert all(r.usd_per_useful_gpu_hour is None for r in rows)
