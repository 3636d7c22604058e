"""On-demand prices of SageMaker instances, for training jobs and for HyperPod clusters: the AWS
Price List API when it answers, else dated tables shipped with hpcflow. Every price says where it
came from.

SageMaker bills a training job per second of each instance's time at its own ``ml.`` rates,
which are not EC2's (the same hardware costs more as a SageMaker instance): SageMaker AI
pricing page, "On-Demand Pricing", "Training" (https://aws.amazon.com/sagemaker-ai/pricing/).
With managed spot training SageMaker bills the spot rate for the seconds the job trains, not
the time it waits for capacity; AWS says it saves "up to 90%" over on-demand (developer guide,
"Managed Spot Training in Amazon SageMaker AI",
https://docs.aws.amazon.com/sagemaker/latest/dg/model-managed-spot-training.html), so a spot
estimate is a range from 10% of the on-demand price to the on-demand price.

A HyperPod cluster is billed for the time each instance is allocated, on-demand or reserved,
at the per-hour HyperPod prices of the same pricing page (developer guide, "SageMaker HyperPod
references", "SageMaker HyperPod pricing",
https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-ref.html). hpcflow prices it
on-demand only: HyperPod's spot instances are documented with continuous provisioning and
Karpenter autoscaling ("Spot instances in Amazon SageMaker HyperPod",
https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-spot.html), both features of
EKS-orchestrated clusters ("Clusters created with Slurm orchestration use a different scaling
model", https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-scaling-eks.html),
and hpcflow's HyperPod clusters are Slurm ones.

Price List API: ``GetProducts`` with ``ServiceCode=AmazonSageMaker``. Both uses are billed
under that service code with the instance in the usage type: ``<region code>-Train:ml.<type>``
for training, ``<region code>-Cluster:ml.<type>`` for HyperPod nodes (the Cost and Usage Report
line items; for HyperPod: awslabs "AI on SageMaker HyperPod", "GPU Cost Allocation from CUR",
https://awslabs.github.io/ai-on-sagemaker-hyperpod/docs/slurm-orchestration/add-ons/slurm-chargeback/cost-allocation-from-cur).
hpcflow asks for the products whose ``usagetype`` contains ``Train:ml.<type>`` (or
``Cluster:...``) in the region's ``location`` and keeps the one whose usage type is exactly that
with a region code before it, so that a longer type name (``ml.p5.48xlarge`` within
``ml.p5.48xlarge-...``) is never taken for it.

Kept apart from the EC2 prices (:mod:`hpcflow.aws.pricing`), whose API client and error handling
it shares; it returns the same :class:`~hpcflow.aws.pricing.Price`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from hpcflow.aws.pricing import Price, ask_price_list, location_filter, on_demand_usd

#: What hpcflow prices SageMaker instances for: a training job, or a HyperPod cluster's nodes.
TRAINING = "training"
HYPERPOD = "hyperpod"
USES = (TRAINING, HYPERPOD)
#: The Price List usage type of each use, before ``:ml.<type>`` (see the module docstring).
USAGE_KINDS = {TRAINING: "Train", HYPERPOD: "Cluster"}
SERVICE_CODE = "AmazonSageMaker"

# USD per instance-hour of SageMaker training, us-east-1, from the SageMaker pricing page's
# on-demand training table as hpcflow's authors knew it in 2025-05. No saved copy of the page was
# kept and the figures have NOT been checked against the page or the Price List API since:
# every one is unverified. AWS lowered P4 and P5 on-demand prices in June 2025 ("up to 45%",
# AWS What's New, 2025-06-05, for EC2 instances); whether and how far SageMaker's rates for those
# families followed was not checked, so the rows in STALE may be too high. Types without a
# figure here are not priced.
TABLE_AS_OF = "2025-05"
TABLE_REGION = "us-east-1"
TABLE_SOURCE = (f"hpcflow shipped SageMaker training price table: {TABLE_REGION} on-demand as "
                f"known in {TABLE_AS_OF} from aws.amazon.com/sagemaker-ai/pricing; UNVERIFIED "
                "(not checked against AWS since), check current prices before relying on them")
STALE: dict[str, str] = {
    it: "the shipped figure predates AWS's June 2025 P4/P5 price cut (up to 45% on EC2); the "
        "current SageMaker price may be lower"
    for it in ("ml.p4d.24xlarge", "ml.p5.48xlarge")
}
PRICE_TABLE_USD_PER_H: dict[str, float] = {
    "ml.p4d.24xlarge": 37.688,
    "ml.p5.48xlarge": 113.07,
    "ml.p3.2xlarge": 3.825,
    "ml.p3.8xlarge": 14.688,
    "ml.p3.16xlarge": 28.152,
    "ml.g4dn.xlarge": 0.736,
    "ml.g5.xlarge": 1.408,
    "ml.g5.2xlarge": 1.515,
    "ml.g5.4xlarge": 2.03,
    "ml.g5.8xlarge": 3.06,
    "ml.g5.12xlarge": 7.09,
    "ml.g5.16xlarge": 5.12,
    "ml.g5.24xlarge": 10.18,
    "ml.g5.48xlarge": 20.36,
    "ml.trn1.32xlarge": 24.725,
    "ml.m5.xlarge": 0.23,
    "ml.c5.xlarge": 0.204,
    "ml.c5.4xlarge": 0.816,
}

# USD per instance-hour of a HyperPod cluster's nodes, us-east-1. No figure here was read from
# HyperPod's own price list: each row is the training figure of the same ml. type above (so as
# old and as unverified), kept for the types HyperPod clusters take (botocore's
# ClusterInstanceType), on the assumption that HyperPod's on-demand rate is close to training's.
# That assumption was not checked: --price-source api asks for HyperPod's own rate.
HYPERPOD_TABLE_AS_OF = TABLE_AS_OF
HYPERPOD_TABLE_SOURCE = (f"hpcflow shipped SageMaker HyperPod price table: {TABLE_REGION} "
                         "on-demand, each figure the SageMaker training figure of the same type "
                         f"as known in {HYPERPOD_TABLE_AS_OF}; UNVERIFIED (HyperPod's own rate was "
                         "not checked), check current prices before relying on them")
HYPERPOD_CAVEAT = ("the shipped figure is SageMaker training's rate for the type, not one read "
                   "from HyperPod's price list")
HYPERPOD_TYPES = ("ml.p4d.24xlarge", "ml.p5.48xlarge", "ml.g4dn.xlarge", "ml.g5.xlarge",
                  "ml.g5.2xlarge", "ml.g5.4xlarge", "ml.g5.8xlarge", "ml.g5.12xlarge",
                  "ml.g5.16xlarge", "ml.g5.24xlarge", "ml.g5.48xlarge", "ml.trn1.32xlarge",
                  "ml.m5.xlarge", "ml.c5.xlarge", "ml.c5.4xlarge")
HYPERPOD_PRICE_TABLE_USD_PER_H: dict[str, float] = {
    name: PRICE_TABLE_USD_PER_H[name] for name in HYPERPOD_TYPES}

#: Managed spot as fractions of the on-demand price: "up to 90%" off, never above on-demand.
SPOT_LOW_FRACTION = 0.10
SPOT_HIGH_FRACTION = 1.00
SPOT_SOURCE = ("managed spot: from 10% of the SageMaker on-demand price (AWS: 'up to 90%' "
               "savings) to the on-demand price; billed for training seconds only")


def ml_name(instance_type: str) -> str:
    """``instance_type`` with SageMaker's ``ml.`` prefix (an EC2 name gets it)."""
    return instance_type if instance_type.startswith("ml.") else "ml." + instance_type


def sagemaker_price(instance_type: str, region: str, use: str = TRAINING) -> Price | None:
    """The shipped on-demand price of ``instance_type`` (``ml.`` name; an EC2 name gets the
    prefix) for ``use`` (:data:`TRAINING` or :data:`HYPERPOD`), or None. The tables hold
    us-east-1 prices only: any other region gets None rather than a wrong figure.

    Raises:
        ValueError: ``use`` is not one of :data:`USES`.
    """
    _check_use(use)
    name = ml_name(instance_type)
    table = PRICE_TABLE_USD_PER_H if use == TRAINING else HYPERPOD_PRICE_TABLE_USD_PER_H
    usd = table.get(name)
    if usd is None or region != TABLE_REGION:
        return None
    if use == TRAINING:
        return Price(name, usd, TABLE_SOURCE, STALE.get(name, ""))
    caveat = "; ".join(c for c in (HYPERPOD_CAVEAT, STALE.get(name, "")) if c)
    return Price(name, usd, HYPERPOD_TABLE_SOURCE, caveat)


def usage_filters(instance_type: str, region: str, use: str) -> list[dict[str, str]]:
    """The ``GetProducts`` filters for the on-demand rate of ``instance_type`` for ``use`` in
    ``region`` (see the module docstring).

    Raises:
        ValueError: ``use`` is not one of :data:`USES`.
    """
    _check_use(use)
    return [{"Type": "CONTAINS", "Field": "usagetype",
             "Value": f"{USAGE_KINDS[use]}:{ml_name(instance_type)}"},
            location_filter(region)]


def pick_price(price_list: Iterable[str | Mapping[str, Any]], instance_type: str,
               use: str) -> float | None:
    """The hourly USD on-demand price in a ``GetProducts`` ``PriceList`` of the product whose
    usage type is exactly ``<region code>-<kind>:<ml. type>`` (or without the region code), or
    None when no entry is that product.

    Raises:
        ValueError: ``use`` is not one of :data:`USES`.
    """
    _check_use(use)
    wanted = re.compile(rf"(?:[A-Z0-9]+-)?{USAGE_KINDS[use]}:{re.escape(ml_name(instance_type))}")
    for raw in price_list:
        doc = json.loads(raw) if isinstance(raw, str) else raw
        usage = str(((doc.get("product") or {}).get("attributes") or {}).get("usagetype", ""))
        if wanted.fullmatch(usage):
            usd = on_demand_usd(doc)
            if usd is not None:
                return usd
    return None


def price_from_api(client: Any, instance_type: str, region: str, use: str) -> Price | None:
    """Ask the Price List API (one ``GetProducts`` call) through ``client`` for the on-demand
    rate of ``instance_type`` for ``use``; None when it has none.

    Raises:
        botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError: the call failed.
        ValueError: ``use`` is not one of :data:`USES`.
    """
    name = ml_name(instance_type)
    resp = client.get_products(ServiceCode=SERVICE_CODE,
                               Filters=usage_filters(name, region, use), MaxResults=100)
    usd = pick_price(resp.get("PriceList") or [], name, use)
    if usd is None:
        return None
    return Price(name, usd, f"price-list-api:{region} ({SERVICE_CODE} "
                            f"{USAGE_KINDS[use]}:{name})")


def lookup_sagemaker_prices(instance_type: str, region: str, source: str = "auto",
                            uses: Iterable[str] = USES, client: Any = None,
                            ) -> tuple[dict[str, Price], list[str]]:
    """The on-demand price of ``instance_type`` for each of ``uses``, and notes on what was
    used; the same choice of source as the EC2 prices
    (:func:`hpcflow.aws.pricing.lookup_prices`).

    Args:
        source: ``api`` (Price List API only), ``table`` (shipped tables only), or ``auto``
            (API, then the tables for whatever the API did not answer).
        uses: some of :data:`USES`.
        client: a ``pricing`` client; created when needed.

    Returns:
        (prices by use, notes); a use without a price is absent.

    Raises:
        Ec2Error: ``source`` is ``api`` and the Price List API could not be asked.
        ValueError: a use is not one of :data:`USES`.
    """
    wanted = list(dict.fromkeys(uses))
    for use in wanted:
        _check_use(use)
    prices: dict[str, Price] = {}
    notes: list[str] = []
    if source in ("auto", "api"):
        def ask(cli: Any) -> None:
            for use in wanted:
                p = price_from_api(cli, instance_type, region, use)
                if p:
                    prices[use] = p

        ask_price_list(ask, source, client, notes, "shipped SageMaker tables, dated "
                       f"{TABLE_AS_OF}, unverified")
    if source in ("auto", "table"):
        for use in wanted:
            if use not in prices and (p := sagemaker_price(instance_type, region, use)):
                prices[use] = p
    return prices, notes


def _check_use(use: str) -> None:
    if use not in USES:
        raise ValueError(f"use: {use!r} is not one of {', '.join(USES)}")
