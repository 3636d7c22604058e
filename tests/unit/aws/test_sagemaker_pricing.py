"""SageMaker prices through the AWS Price List API (botocore's Stubber: moto does not emulate the
``pricing`` service), for training and for HyperPod, with the shipped tables as the fallback.
Every request the Stubber sees has passed botocore's parameter validation."""

from __future__ import annotations

import json

import pytest

from hpcflow.aws import sagemaker_pricing as sm
from hpcflow.aws.pricing import TABLE_AS_OF
from hpcflow.aws.requests import enum_values, request_problems
from hpcflow.errors import Ec2Error


def _stubbed():
    import boto3
    from botocore.stub import Stubber

    client = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="x",
                          aws_secret_access_key="x")
    return client, Stubber(client)


def _doc(usagetype: str, usd: str) -> str:
    return json.dumps({"product": {"attributes": {"usagetype": usagetype}},
                       "terms": {"OnDemand": {"A.B": {"priceDimensions": {
                           "A.B.C": {"unit": "Hrs", "pricePerUnit": {"USD": usd}}}}}}})


def _expected(kind: str, name: str, location: str = "US East (N. Virginia)") -> dict:
    return {"ServiceCode": "AmazonSageMaker", "MaxResults": 100, "Filters": [
        {"Type": "CONTAINS", "Field": "usagetype", "Value": f"{kind}:{name}"},
        {"Type": "TERM_MATCH", "Field": "location", "Value": location}]}


@pytest.mark.parametrize(("use", "kind"), [("training", "Train"), ("hyperpod", "Cluster")])
@pytest.mark.parametrize("region", ["us-east-1", "eu-west-1", "ap-south-1"])
def test_every_request_passes_botocores_validation(use, kind, region):
    filters = sm.usage_filters("p5.48xlarge", region, use)
    request = {"ServiceCode": sm.SERVICE_CODE, "Filters": filters, "MaxResults": 100}
    assert request_problems("pricing", "GetProducts", request) == []
    assert filters[0] == {"Type": "CONTAINS", "Field": "usagetype",
                          "Value": f"{kind}:ml.p5.48xlarge"}
    assert {"CONTAINS", "TERM_MATCH"} <= set(enum_values("pricing", "FilterType"))


@pytest.mark.parametrize(("use", "kind", "usd"), [
    pytest.param("training", "Train", 113.07, id="training-job"),
    pytest.param("hyperpod", "Cluster", 98.5, id="hyperpod-node"),
])
def test_the_api_price_is_the_exact_usage_types_for_each_use(use, kind, usd):
    client, stub = _stubbed()
    stub.add_response("get_products", {"PriceList": [
        _doc(f"USE1-{kind}:ml.p5.48xlarge-Spot", "1.0"),      # a longer usage type: not it
        _doc("USE1-Host:ml.p5.48xlarge", "2.0"),              # another use of the type
        _doc(f"USE1-{kind}:ml.p5.48xlarge", str(usd))]},
        _expected(kind, "ml.p5.48xlarge"))
    with stub:
        price = sm.price_from_api(client, "p5.48xlarge", "us-east-1", use)
    stub.assert_no_pending_responses()
    assert price.usd_per_hour == usd and price.instance_type == "ml.p5.48xlarge"
    assert price.source == f"price-list-api:us-east-1 (AmazonSageMaker {kind}:ml.p5.48xlarge)"


@pytest.mark.parametrize(("entries", "usd"), [
    pytest.param([], None, id="empty"),
    pytest.param([_doc("USE1-Cluster:ml.p5.48xlarge", "0.0")], None, id="zero-price"),
    pytest.param([_doc("Cluster:ml.p5.48xlarge", "7.5")], 7.5, id="no-region-code"),
    pytest.param([_doc("USE1-Cluster:ml.p5.48xlargeX", "7.5")], None, id="other-type"),
    pytest.param([_doc("USE1-Train:ml.p5.48xlarge", "7.5")], None, id="other-use"),
])
def test_pick_price_takes_only_the_exact_product(entries, usd):
    assert sm.pick_price(entries, "ml.p5.48xlarge", "hyperpod") == usd


def test_auto_asks_once_per_use_and_falls_back_to_the_tables_for_what_the_api_lacks():
    client, stub = _stubbed()
    stub.add_response("get_products", {"PriceList": [_doc("USE1-Train:ml.g5.xlarge", "1.5")]},
                      _expected("Train", "ml.g5.xlarge"))
    stub.add_response("get_products", {"PriceList": []}, _expected("Cluster", "ml.g5.xlarge"))
    with stub:
        prices, notes = sm.lookup_sagemaker_prices("g5.xlarge", "us-east-1", "auto",
                                                   client=client)
    assert prices["training"].usd_per_hour == 1.5
    assert prices["training"].source.startswith("price-list-api:")
    assert prices["hyperpod"].source == sm.HYPERPOD_TABLE_SOURCE and notes == []


def test_auto_with_the_api_unreachable_uses_the_tables_and_says_why():
    client, stub = _stubbed()
    stub.add_client_error("get_products", service_error_code="AccessDeniedException")
    with stub:
        prices, notes = sm.lookup_sagemaker_prices("p5.48xlarge", "us-east-1", "auto",
                                                   client=client)
    assert prices["training"].source == sm.TABLE_SOURCE
    assert prices["hyperpod"].source == sm.HYPERPOD_TABLE_SOURCE
    assert notes == ["Price List API not reachable (AccessDeniedException); using the shipped "
                     "table"]


def test_api_only_is_an_error_naming_the_way_out_when_unreachable():
    client, stub = _stubbed()
    stub.add_client_error("get_products", service_error_code="AccessDeniedException")
    with stub, pytest.raises(Ec2Error, match="--price-source table"):
        sm.lookup_sagemaker_prices("p5.48xlarge", "us-east-1", "api", client=client)


def test_api_only_never_takes_a_table_figure():
    client, stub = _stubbed()
    for kind in ("Train", "Cluster"):
        stub.add_response("get_products", {"PriceList": []}, _expected(kind, "ml.p5.48xlarge"))
    with stub:
        prices, _ = sm.lookup_sagemaker_prices("p5.48xlarge", "us-east-1", "api", client=client)
    assert prices == {}


def test_table_only_asks_nothing():
    prices, notes = sm.lookup_sagemaker_prices("p5.48xlarge", "us-east-1", "table",
                                               client=object())
    assert set(prices) == {"training", "hyperpod"} and notes == []


@pytest.mark.parametrize(("instance", "region", "use", "usd"), [
    pytest.param("ml.p5.48xlarge", "us-east-1", "hyperpod", 113.07, id="hyperpod-row"),
    pytest.param("p4d.24xlarge", "us-east-1", "hyperpod", 37.688, id="ec2-name-gets-the-prefix"),
    pytest.param("ml.p3.2xlarge", "us-east-1", "hyperpod", None, id="not-a-hyperpod-type"),
    pytest.param("ml.p3.2xlarge", "us-east-1", "training", 3.825, id="training-only-type"),
    pytest.param("ml.p5.48xlarge", "eu-west-1", "hyperpod", None, id="other-region-no-guess"),
])
def test_the_shipped_tables(instance, region, use, usd):
    price = sm.sagemaker_price(instance, region, use)
    assert (price.usd_per_hour if price else None) == usd


def test_the_hyperpod_table_is_dated_unverified_and_says_what_its_figures_are():
    price = sm.sagemaker_price("p5.48xlarge", "us-east-1", "hyperpod")
    assert TABLE_AS_OF in sm.HYPERPOD_TABLE_SOURCE and "UNVERIFIED" in price.source
    assert "not one read from HyperPod's price list" in price.caveat
    assert "June 2025" in price.caveat  # the training figure's own staleness is carried


def test_every_hyperpod_row_is_an_instance_type_hyperpod_clusters_take():
    assert set(sm.HYPERPOD_PRICE_TABLE_USD_PER_H) <= set(enum_values("sagemaker",
                                                                     "ClusterInstanceType"))


@pytest.mark.parametrize("call", [
    lambda: sm.sagemaker_price("ml.p5.48xlarge", "us-east-1", "hosting"),
    lambda: sm.usage_filters("ml.p5.48xlarge", "us-east-1", "hosting"),
    lambda: sm.lookup_sagemaker_prices("ml.p5.48xlarge", "us-east-1", "table", ["hosting"]),
])
def test_an_unknown_use_is_refused_naming_it(call):
    with pytest.raises(ValueError, match="'hosting' is not one of training, hyperpod"):
        call()
