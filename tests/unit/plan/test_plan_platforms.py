"""``hpcflow plan goodput`` prices the same run on ParallelCluster (EC2 prices), on a SageMaker
HyperPod cluster (on-demand) and as a SageMaker training job (SageMaker's ml. prices, on-demand
and spot), per useful GPU-hour; every price names its source, and a type or region without a
price is said, not guessed."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpcflow.aws import sagemaker_pricing as sm
from hpcflow.aws.pricing import PRICE_TABLE_USD_PER_H
from hpcflow.cli.main import cli
from hpcflow.plan.platforms import HYPERPOD_NOTE, PLATFORMS, Rate, compare_platforms

HYPERPOD_PAGE = Path(__file__).resolve().parents[3] / "docs" / "hyperpod.md"
GOODPUT = ["plan", "goodput", "--nodes", "16", "--instance", "p5.48xlarge", "--hours", "72",
           "--save-s", "30", "--restart-s", "300", "--startup-s", "600", "--price-source",
           "table", "--runs", "20"]


def test_five_rows_side_by_side_per_useful_gpu_hour():
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
    hp = sm.HYPERPOD_PRICE_TABLE_USD_PER_H["ml.p5.48xlarge"]
    assert rows["hyperpod-on-demand"]["usd"] == pytest.approx([16 * 72 * hp] * 2)
    assert rows["hyperpod-on-demand"]["usd_per_node_hour"][0] > rows[
        "parallelcluster-on-demand"]["usd_per_node_hour"][0]  # the managed option's premium
    assert rows["hyperpod-on-demand"]["source"] == sm.HYPERPOD_TABLE_SOURCE
    assert "hyperpod-spot" not in rows


def test_hyperpod_is_on_demand_only_and_the_note_says_why():
    out = CliRunner().invoke(cli, GOODPUT)
    assert out.exit_code == 0, out.output
    assert f"note: {HYPERPOD_NOTE}" in out.output
    assert "price source: hpcflow shipped SageMaker HyperPod price table" in out.output
    assert "hyperpod-spot" not in out.output


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
    assert "note: hyperpod-on-demand: no price known for g6.xlarge in us-east-1" in out.output
    assert HYPERPOD_NOTE not in out.output


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


def test_compare_gives_hyperpod_one_on_demand_row_whatever_its_spot_fractions():
    rows = compare_platforms(4, 10.0, 100.0, parallelcluster=Rate(2.0, (0.1, 1.0), "ec2"),
                             sagemaker=None, hyperpod=Rate(3.0, (0.1, 1.0), "hp"))
    assert [r.platform for r in rows] == ["parallelcluster-on-demand", "parallelcluster-spot",
                                          "hyperpod-on-demand"]
    assert rows[2].usd == (120.0, 120.0) and rows[2].usd_per_useful_gpu_hour == (1.2, 1.2)
    assert rows[2].source == "hp"


def test_the_hyperpod_page_prices_the_managed_option_beside_parallelcluster():
    """docs/hyperpod.md's plan goodput line: a hyperpod-on-demand row beside ParallelCluster's,
    at SageMaker's rate (above EC2's), with no spot row for HyperPod."""
    [line] = [ln for ln in HYPERPOD_PAGE.read_text().splitlines()
              if ln.startswith("hpcflow plan goodput")]
    out = CliRunner().invoke(cli, [*shlex.split(line)[1:], "--json"])
    assert out.exit_code == 0, out.output
    rows = {r["platform"]: r for r in json.loads(out.output)["data"]["platforms"]}
    assert {"parallelcluster-on-demand", "hyperpod-on-demand"} <= set(rows)
    assert "hyperpod-spot" not in rows
    assert rows["hyperpod-on-demand"]["usd"][0] > rows["parallelcluster-on-demand"]["usd"][0]
    assert "HyperPod price table" in rows["hyperpod-on-demand"]["source"]


def _doc(usagetype: str, usd: str) -> str:
    return json.dumps({"product": {"attributes": {"usagetype": usagetype}},
                       "terms": {"OnDemand": {"A": {"priceDimensions": {
                           "B": {"pricePerUnit": {"USD": usd}}}}}}})


def test_price_source_api_prices_every_platform_from_the_price_list(monkeypatch):
    """One stubbed pricing client answers the EC2 call, then SageMaker's training and HyperPod
    calls (botocore validates each request before the Stubber sees it)."""
    import boto3
    from botocore.stub import ANY, Stubber

    import hpcflow.aws.pricing as pricing

    client = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="x",
                          aws_secret_access_key="x")
    stub = Stubber(client)
    stub.add_response("get_products", {"PriceList": [_doc("BoxUsage:p5.48xlarge", "55.04")]},
                      {"ServiceCode": "AmazonEC2", "Filters": ANY, "MaxResults": 10})
    for kind, usd in (("Train", "70.5"), ("Cluster", "60.25")):
        stub.add_response("get_products",
                          {"PriceList": [_doc(f"USE1-{kind}:ml.p5.48xlarge", usd)]},
                          {"ServiceCode": "AmazonSageMaker", "Filters": ANY, "MaxResults": 100})
    monkeypatch.setattr(pricing, "make_pricing_client", lambda *a, **k: client)
    api = [w if w != "table" else "api" for w in GOODPUT]
    with stub:
        out = CliRunner().invoke(cli, [*api, "--json"])
    assert out.exit_code == 0, out.output
    stub.assert_no_pending_responses()
    rows = {r["platform"]: r for r in json.loads(out.output)["data"]["platforms"]}
    assert rows["parallelcluster-on-demand"]["usd_per_node_hour"][0] == 55.04
    assert rows["sagemaker-on-demand"]["usd_per_node_hour"][0] == 70.5
    assert rows["hyperpod-on-demand"]["usd_per_node_hour"][0] == 60.25
    assert rows["hyperpod-on-demand"]["source"] == (
        "price-list-api:us-east-1 (AmazonSageMaker Cluster:ml.p5.48xlarge)")
