"""On-demand EC2 prices: the AWS Price List API through a boto3 ``pricing`` client when it
answers, else a dated table shipped with hpcflow. Every price says where it came from.

Price List API: ``GetProducts`` with ``ServiceCode=AmazonEC2`` and attribute filters; each
``PriceList`` entry is a JSON string whose ``terms.OnDemand.*.priceDimensions.*.pricePerUnit.USD``
is the hourly price (https://docs.aws.amazon.com/aws-cost-management/latest/APIReference/
API_pricing_GetProducts.html). The API lives in us-east-1 (and a few other regions) whatever
the region being priced.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from hpcflow.errors import Ec2Error

# USD per instance-hour, Linux, shared tenancy, us-east-1, as listed on the EC2 On-Demand pricing
# page (https://aws.amazon.com/ec2/pricing/on-demand/) in May 2025. These figures were written down
# from that page without a saved copy and have NOT been checked against the page or the Price
# List API since: treat every one as unverified, and prefer ``--price-source api``.
# AWS lowered P4 and P5 on-demand prices in June 2025 ("up to 45%", AWS What's New, 2025-06-05):
# the rows in STALE predate that and are likely too high. Types without a figure here are priced
# only through the Price List API.
TABLE_AS_OF = "2025-05"
TABLE_REGION = "us-east-1"
TABLE_SOURCE = (f"hpcflow shipped price table: {TABLE_REGION} Linux on-demand as listed on "
                f"aws.amazon.com/ec2/pricing/on-demand in {TABLE_AS_OF}; UNVERIFIED (not checked "
                "against AWS since), check current prices before relying on them")
STALE: dict[str, str] = {
    it: "the shipped figure predates AWS's June 2025 P4/P5 on-demand price cut (up to 45%); "
        "the current price is likely lower"
    for it in ("p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge")
}
PRICE_TABLE_USD_PER_H: dict[str, float] = {
    "p4d.24xlarge": 32.7726,
    "p4de.24xlarge": 40.9657,
    "p5.48xlarge": 98.32,
    "g5.xlarge": 1.006,
    "g5.2xlarge": 1.212,
    "g5.4xlarge": 1.624,
    "g5.8xlarge": 2.448,
    "g5.12xlarge": 5.672,
    "g5.16xlarge": 4.096,
    "g5.24xlarge": 8.144,
    "g5.48xlarge": 16.288,
    "g6.xlarge": 0.8048,
    "g6.2xlarge": 0.9776,
    "g6.4xlarge": 1.3232,
    "g6.8xlarge": 2.0144,
    "g6.12xlarge": 4.6016,
    "g6.16xlarge": 3.3968,
    "g6.24xlarge": 6.6752,
    "g6.48xlarge": 13.3504,
    "g6e.xlarge": 1.861,
    "g6e.48xlarge": 30.13118,
    "trn1.2xlarge": 1.34375,
    "trn1.32xlarge": 21.50,
    "trn1n.32xlarge": 24.78,
    "m5.xlarge": 0.192,
    "m5.2xlarge": 0.384,
    "c5.xlarge": 0.17,
}

# Price List API "location" names for the regions people train in
# (https://docs.aws.amazon.com/general/latest/gr/rande.html, region names).
REGION_LOCATIONS: dict[str, str] = {
    "us-east-1": "US East (N. Virginia)",
    "us-east-2": "US East (Ohio)",
    "us-west-2": "US West (Oregon)",
    "eu-west-1": "EU (Ireland)",
    "eu-central-1": "EU (Frankfurt)",
    "ap-northeast-1": "Asia Pacific (Tokyo)",
}


@dataclass(frozen=True)
class Price:
    """One hourly on-demand price.

    Attributes:
        instance_type: the EC2 type.
        usd_per_hour: on-demand price in USD per instance-hour.
        source: ``price-list-api:<region>`` or :data:`TABLE_SOURCE`.
        caveat: why the figure may be wrong (e.g. a price change after the table's date), or "".
    """

    instance_type: str
    usd_per_hour: float
    source: str
    caveat: str = ""


def price_from_table(instance_type: str, region: str) -> Price | None:
    """The shipped figure for ``instance_type``, or None. The table holds us-east-1 prices
    only: prices differ by region, so any other region gets None rather than a wrong figure."""
    usd = PRICE_TABLE_USD_PER_H.get(instance_type)
    if usd is None or region != TABLE_REGION:
        return None
    return Price(instance_type, usd, TABLE_SOURCE, STALE.get(instance_type, ""))


def on_demand_usd(doc: Mapping[str, Any]) -> float | None:
    """The first positive hourly USD price under ``terms.OnDemand`` of one ``PriceList`` entry
    (already parsed from its JSON string), or None."""
    for term in ((doc.get("terms") or {}).get("OnDemand") or {}).values():
        for dim in (term.get("priceDimensions") or {}).values():
            usd = (dim.get("pricePerUnit") or {}).get("USD")
            if usd is not None and float(usd) > 0:
                return float(usd)
    return None


def parse_price_list(price_list: Iterable[str]) -> float | None:
    """The hourly USD price in a ``GetProducts`` ``PriceList``, or None when absent."""
    for raw in price_list:
        usd = on_demand_usd(json.loads(raw) if isinstance(raw, str) else raw)
        if usd is not None:
            return usd
    return None


def location_filter(region: str) -> dict[str, str]:
    """The ``GetProducts`` filter that picks ``region``: its Price List ``location`` name when
    :data:`REGION_LOCATIONS` knows it, else its ``regionCode``."""
    location = REGION_LOCATIONS.get(region)
    if location:
        return {"Type": "TERM_MATCH", "Field": "location", "Value": location}
    return {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region}


def price_from_api(client: Any, instance_type: str, region: str) -> Price | None:
    """Ask the Price List API (one ``GetProducts`` call) through ``client``.

    Returns None when the API has no Linux on-demand price for the type.

    Raises:
        botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError: the call failed.
    """
    filters: list[Mapping[str, str]] = [
        {"Type": "TERM_MATCH", "Field": "instanceType", "Value": instance_type},
        {"Type": "TERM_MATCH", "Field": "operatingSystem", "Value": "Linux"},
        {"Type": "TERM_MATCH", "Field": "tenancy", "Value": "Shared"},
        {"Type": "TERM_MATCH", "Field": "preInstalledSw", "Value": "NA"},
        {"Type": "TERM_MATCH", "Field": "capacitystatus", "Value": "Used"},
        location_filter(region),
    ]
    resp = client.get_products(ServiceCode="AmazonEC2", Filters=filters, MaxResults=10)
    usd = parse_price_list(resp.get("PriceList") or [])
    return None if usd is None else Price(instance_type, usd, f"price-list-api:{region}")


def make_pricing_client(endpoint_url: str | None = None) -> Any:
    """A boto3 ``pricing`` client in us-east-1 with one attempt and short timeouts."""
    import boto3
    from botocore.config import Config

    cfg = Config(retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=3,
                 read_timeout=10)
    return boto3.client("pricing", region_name="us-east-1", endpoint_url=endpoint_url, config=cfg)


def lookup_prices(instance_types: Iterable[str], region: str, source: str = "auto",
                  client: Any = None) -> tuple[dict[str, Price], list[str]]:
    """Prices for several types, and notes on what was used.

    Args:
        source: ``api`` (Price List API only), ``table`` (shipped table only), or ``auto``
            (API, then the table for whatever the API did not answer).
        client: a ``pricing`` client; created with :func:`make_pricing_client` when needed.

    Returns:
        (prices by type, notes) where notes say why the API was not used, if it was not.

    Raises:
        Ec2Error: ``source`` is ``api`` and the Price List API could not be asked (or botocore,
            the ``aws`` extra, is not installed).
    """
    types = sorted(set(instance_types))
    prices: dict[str, Price] = {}
    notes: list[str] = []
    if source in ("auto", "api"):
        _ask_api(types, region, source, client, prices, notes)
    if source in ("auto", "table"):
        for it in types:
            if it not in prices:
                p = price_from_table(it, region)
                if p:
                    prices[it] = p
        if region != TABLE_REGION and any(it in PRICE_TABLE_USD_PER_H and it not in prices
                                          for it in types):
            notes.append(f"the shipped table holds {TABLE_REGION} prices only; {region} is not "
                         "priced from it (use --price-source api)")
    return prices, notes


def _ask_api(types: list[str], region: str, source: str, client: Any,
             prices: dict[str, Price], notes: list[str]) -> None:
    """Fill ``prices`` from the Price List API."""
    def ask(cli: Any) -> None:
        for it in types:
            p = price_from_api(cli, it, region)
            if p:
                prices[it] = p

    ask_price_list(ask, source, client, notes, f"shipped, dated {TABLE_AS_OF}, unverified")


def ask_price_list(ask: Callable[[Any], None], source: str, client: Any, notes: list[str],
                   table: str) -> bool:
    """Run ``ask(client)`` (a ``pricing`` client made with :func:`make_pricing_client` when
    ``client`` is None); botocore is imported only here.

    Args:
        ask: the ``GetProducts`` calls; it fills the caller's prices.
        source: ``api`` (a failure is an error) or ``auto`` (a failure is a note).
        notes: where the note goes.
        table: what ``--price-source table`` gives instead, for the messages.

    Returns:
        True when every call answered.

    Raises:
        Ec2Error: ``source`` is ``api`` and the Price List API could not be asked (or botocore,
            the ``aws`` extra, is not installed).
    """
    try:
        from botocore.exceptions import BotoCoreError, ClientError
    except ImportError:
        if source == "api":
            raise Ec2Error("--price-source api needs boto3, which is not installed: pip install "
                           "'hpcflow[aws]', or use --price-source table") from None
        notes.append("Price List API not asked (boto3 is not installed); using the shipped table")
        return False
    try:
        ask(client or make_pricing_client())
    except (BotoCoreError, ClientError) as exc:
        if source == "api":
            raise Ec2Error(f"--price-source api: the AWS Price List API could not be asked "
                           f"({type(exc).__name__}: {exc}); check your AWS credentials and "
                           f"network, or use --price-source table ({table})") from None
        notes.append(f"Price List API not reachable ({type(exc).__name__}); using the shipped "
                     "table")
        return False
    return True
