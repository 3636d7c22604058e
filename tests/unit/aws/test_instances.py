"""Instance facts: parsing DescribeInstanceTypes, the on-disk cache, the offline catalog; and
prices: Price List parsing, the API path through botocore's Stubber, and the table fallback."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from hpcflow.aws.instances import (
    Ec2Instances,
    cache_path,
    facts_from_api,
    read_cache,
    write_cache,
)
from hpcflow.aws.pricing import (
    TABLE_AS_OF,
    TABLE_SOURCE,
    lookup_prices,
    parse_price_list,
    price_from_api,
)
from hpcflow.errors import Ec2Error
from hpcflow.pcluster.catalog import FAMILIES, OFFLINE, SOURCES, Catalog

# One InstanceTypes[] entry in the shape EC2 returns it (trimmed p5.48xlarge answer).
P5_ITEM = {
    "InstanceType": "p5.48xlarge",
    "VCpuInfo": {"DefaultVCpus": 192},
    "MemoryInfo": {"SizeInMiB": 2097152},
    "GpuInfo": {"Gpus": [{"Name": "H100", "Manufacturer": "NVIDIA", "Count": 8,
                          "MemoryInfo": {"SizeInMiB": 81920}}]},
    "NetworkInfo": {"EfaSupported": True, "MaximumNetworkCards": 32,
                    "EfaInfo": {"MaximumEfaInterfaces": 32}},
}
TRN1_ITEM = {
    "InstanceType": "trn1.32xlarge", "VCpuInfo": {"DefaultVCpus": 128},
    "MemoryInfo": {"SizeInMiB": 524288},
    "NeuronInfo": {"NeuronDevices": [{"Count": 16, "Name": "Trainium",
                                      "MemoryInfo": {"SizeInMiB": 32768}}]},
    "NetworkInfo": {"EfaSupported": True, "MaximumNetworkCards": 8,
                    "EfaInfo": {"MaximumEfaInterfaces": 8}},
}


@pytest.mark.parametrize("item, acc, count, efa, cards", [
    pytest.param(P5_ITEM, "H100", 8, True, 32, id="p5-gpu"),
    pytest.param(TRN1_ITEM, "Trainium", 16, True, 8, id="trn1-neuron"),
    pytest.param({"InstanceType": "m5.xlarge", "VCpuInfo": {"DefaultVCpus": 4},
                  "MemoryInfo": {"SizeInMiB": 16384}, "NetworkInfo": {}}, "", 0, False, 1,
                 id="no-accelerator"),
])
def test_facts_from_api(item, acc, count, efa, cards):
    f = facts_from_api(item, "test")
    assert (f.accelerator, f.accelerator_count, f.efa_supported, f.max_network_cards) == (
        acc, count, efa, cards)


def test_offline_table_covers_every_training_family_with_sources():
    assert set(FAMILIES) == {"p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "g5", "g6", "g6e",
                             "trn1", "trn1n", "trn2"}
    for f in OFFLINE.values():
        assert f.source in SOURCES
        assert set(f.figure_sources.values()) <= set(SOURCES)


@pytest.mark.parametrize("instance_type, efa_ifaces", [
    pytest.param("p4d.24xlarge", 4, id="p4d"), pytest.param("p4de.24xlarge", 4, id="p4de"),
    pytest.param("p5.48xlarge", 32, id="p5"), pytest.param("p5e.48xlarge", 32, id="p5e"),
    pytest.param("p5en.48xlarge", 16, id="p5en"), pytest.param("p6-b200.48xlarge", 8, id="p6"),
    pytest.param("trn1.32xlarge", 8, id="trn1"), pytest.param("trn1n.32xlarge", 16, id="trn1n"),
])
def test_efa_interfaces_match_the_design_notes(instance_type, efa_ifaces):
    assert OFFLINE[instance_type].max_efa_interfaces == efa_ifaces


def test_catalog_suggests_and_knows_every_ec2_type():
    cat = Catalog.offline()
    assert cat.suggest("p5.48xl") == "p5.48xlarge"
    assert cat.known("c7i.large") and cat.known("t3.micro") and not cat.known("g6e.99xlarge")
    assert cat.efa_supported("c5n.18xlarge") is True and cat.efa_supported("m5.xlarge") is False
    assert cat.efa_supported("x9.nothing") is None
    assert cat.get("m5.xlarge") is None  # the broad list adds EFA support, not training facts


def test_cache_round_trip_merges_and_expires(tmp_path: Path):
    write_cache("us-east-1", [facts_from_api(P5_ITEM, "ec2:x")], tmp_path, now=1000.0)
    write_cache("us-east-1", [facts_from_api(TRN1_ITEM, "ec2:x")], tmp_path, now=2000.0)
    doc = json.loads(cache_path("us-east-1", tmp_path).read_text())
    assert doc["fetched_at"] == 2000.0
    got = read_cache("us-east-1", tmp_path)
    assert set(got) == {"p5.48xlarge", "trn1.32xlarge"}
    assert read_cache("us-east-1", tmp_path, max_age_s=10, now=2011.0) == {}
    assert read_cache("eu-west-1", tmp_path) == {}


def test_cache_fills_gaps_but_never_overrides_the_table():
    fake = facts_from_api({**P5_ITEM, "InstanceType": "c7i.48xlarge"}, "ec2:x")
    wrong = facts_from_api({**P5_ITEM, "InstanceType": "g6.xlarge"}, "ec2:x")
    cat = Catalog.offline({fake.instance_type: fake, wrong.instance_type: wrong})
    assert cat.get("c7i.48xlarge").efa_supported is True
    assert cat.get("g6.xlarge").efa_supported is False


def test_corrupt_cache_reads_as_empty(tmp_path: Path):
    cache_path("us-east-1", tmp_path).write_text("{not json")
    assert read_cache("us-east-1", tmp_path) == {}


def _stubbed(service: str):
    import boto3
    from botocore.stub import Stubber

    client = boto3.client(service, region_name="us-east-1", aws_access_key_id="x",
                          aws_secret_access_key="x")
    return client, Stubber(client)


def test_ec2_describe_uses_one_filtered_paginated_call():
    client, stub = _stubbed("ec2")
    stub.add_response("describe_instance_types", {"InstanceTypes": [P5_ITEM]},
                      {"Filters": [{"Name": "instance-type", "Values": ["p5.*"]}]})
    with stub:
        rows = Ec2Instances(client, "us-east-1").describe(["p5.*"])
    assert [r.instance_type for r in rows] == ["p5.48xlarge"]
    assert rows[0].source.startswith("ec2:us-east-1@")


def _price_doc(usd: str) -> str:
    return json.dumps({"product": {"attributes": {"instanceType": "p5.48xlarge"}},
                       "terms": {"OnDemand": {"X.Y": {"priceDimensions": {
                           "X.Y.Z": {"unit": "Hrs", "pricePerUnit": {"USD": usd}}}}}}})


def test_parse_price_list_skips_zero_prices():
    assert parse_price_list([_price_doc("0.0000000000"), _price_doc("55.0400000000")]) == 55.04
    assert parse_price_list([]) is None


def test_price_from_api_sends_the_linux_on_demand_filters():
    client, stub = _stubbed("pricing")
    stub.add_response("get_products", {"PriceList": [_price_doc("55.04")]})
    with stub:
        p = price_from_api(client, "p5.48xlarge", "us-east-1")
    assert p is not None and p.usd_per_hour == 55.04 and p.source == "price-list-api:us-east-1"


def test_auto_falls_back_to_the_table_and_says_why():
    client, stub = _stubbed("pricing")
    stub.add_client_error("get_products", service_error_code="AccessDeniedException")
    with stub:
        prices, notes = lookup_prices(["p5.48xlarge"], "us-east-1", "auto", client)
    assert prices["p5.48xlarge"].source == TABLE_SOURCE
    assert notes and "using the shipped table" in notes[0]


def test_api_only_is_an_aws_error_when_unreachable():
    client, stub = _stubbed("pricing")
    stub.add_client_error("get_products", service_error_code="AccessDeniedException")
    with stub, pytest.raises(Ec2Error, match="--price-source table"):
        lookup_prices(["p5.48xlarge"], "us-east-1", "api", client)


def test_table_prices_are_marked_unverified_and_stale_where_known():
    prices, _ = lookup_prices(["p5.48xlarge", "g6.xlarge"], "us-east-1", "table")
    assert "UNVERIFIED" in prices["g6.xlarge"].source and prices["g6.xlarge"].caveat == ""
    assert "June 2025" in prices["p5.48xlarge"].caveat
    assert TABLE_AS_OF in TABLE_SOURCE


@functools.lru_cache(maxsize=1)
def _moto_instance_types() -> dict:
    import gzip
    import importlib.util

    spec = importlib.util.find_spec("moto")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("moto is not installed: install the dev extra (pip install -e .[dev])")
    path = Path(list(spec.submodule_search_locations)[0]) / "ec2/resources/instance_types.json.gz"
    return json.loads(gzip.open(path).read())


@pytest.mark.parametrize("instance_type", sorted(OFFLINE))
def test_offline_row_matches_the_recorded_ec2_answer(instance_type: str):
    """Every figure of the shipped table equals moto's copy of the real DescribeInstanceTypes
    answer, except figures whose own source says why they differ (trn2 device memory)."""
    live = facts_from_api(_moto_instance_types()[instance_type], "moto")
    row = OFFLINE[instance_type]
    for name in ("vcpus", "memory_mib", "accelerator", "accelerator_count",
                 "accelerator_memory_mib", "efa_supported", "max_network_cards",
                 "max_efa_interfaces"):
        if name in row.figure_sources:
            assert SOURCES[row.figure_sources[name]], name
            continue
        assert getattr(row, name) == getattr(live, name), name


def test_refresh_with_an_unwritable_cache_still_answers(tmp_path: Path, monkeypatch):
    from hpcflow.pcluster.facts import list_instances

    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("HPCFLOW_CACHE_DIR", str(blocker / "cache"))
    client, stub = _stubbed("ec2")
    stub.add_response("describe_instance_types", {"InstanceTypes": [P5_ITEM]})
    with stub:
        rows, where = list_instances("p5", refresh=True, client=client)
    assert [r.instance_type for r in rows] == ["p5.48xlarge"]
    assert "NOT cached" in where and "HPCFLOW_CACHE_DIR" in where
