"""On-demand prices of SageMaker training instances: a dated table shipped with hpcflow. Every
price says where it came from.

SageMaker bills a training job per second of each instance's time at its own ``ml.`` rates,
which are not EC2's (the same hardware costs more as a SageMaker instance): SageMaker AI
pricing page, "On-Demand Pricing", "Training" (https://aws.amazon.com/sagemaker-ai/pricing/).
With managed spot training SageMaker bills the spot rate for the seconds the job trains, not
the time it waits for capacity; AWS says it saves "up to 90%" over on-demand (developer guide,
"Managed Spot Training in Amazon SageMaker AI",
https://docs.aws.amazon.com/sagemaker/latest/dg/model-managed-spot-training.html), so a spot
estimate is a range from 10% of the on-demand price to the on-demand price.

Kept apart from the EC2 table (:mod:`hpcflow.aws.pricing`) so that other SageMaker features
(HyperPod clusters) price from it too; it returns the same :class:`~hpcflow.aws.pricing.Price`.
"""

from __future__ import annotations

from hpcflow.aws.pricing import Price

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

#: Managed spot as fractions of the on-demand price: "up to 90%" off, never above on-demand.
SPOT_LOW_FRACTION = 0.10
SPOT_HIGH_FRACTION = 1.00
SPOT_SOURCE = ("managed spot: from 10% of the SageMaker on-demand price (AWS: 'up to 90%' "
               "savings) to the on-demand price; billed for training seconds only")


def sagemaker_price(instance_type: str, region: str) -> Price | None:
    """The shipped on-demand training price of ``instance_type`` (``ml.`` name; an EC2 name gets
    the prefix), or None. The table holds us-east-1 prices only: any other region gets None
    rather than a wrong figure."""
    name = instance_type if instance_type.startswith("ml.") else "ml." + instance_type
    usd = PRICE_TABLE_USD_PER_H.get(name)
    if usd is None or region != TABLE_REGION:
        return None
    return Price(name, usd, TABLE_SOURCE, STALE.get(name, ""))
