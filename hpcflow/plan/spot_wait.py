"""How long a SageMaker managed spot training job may wait: ``MaxWaitTimeInSeconds`` from its
time limit and the spot interruptions the planner expects. Pure.

SageMaker's two limits (API Reference, ``StoppingCondition``,
https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_StoppingCondition.html):
``MaxRuntimeInSeconds`` bounds the time the job trains (at most 28 days);
``MaxWaitTimeInSeconds`` bounds the whole job, the time spent waiting for spot capacity
included, and must be at least ``MaxRuntimeInSeconds``. Both are the service model's
``integer``, 32 bits (Smithy's ``integer`` type), so at most 2,147,483,647.

The formula, for ``N`` nodes and a time limit of ``T`` seconds:

    expected   lam = N * (T / 3600) * interruptions_per_node_hour
    survive    k   = the smallest k with P(Poisson(lam) <= k) >= 0.95, at least 1, at most 100
    max wait       = min(T * (1 + k), 2**31 - 1)

An interruption of any one instance stops the whole job, so the job's rate is the node rate
times ``N``; the 95th percentile rather than the mean, because a job that runs out of wait is
stopped with its work unfinished while a wait it does not use costs nothing (SageMaker bills
the seconds a job trains, not those it waits; developer guide, "Managed Spot Training in Amazon
SageMaker AI", https://docs.aws.amazon.com/sagemaker/latest/dg/model-managed-spot-training.html).
Each interruption is allowed one time limit of waiting for capacity: with one interruption, a
wait of twice the run time. At least one, as the job may wait for capacity before it first
starts.

The default rate: the EC2 Spot Instance Advisor's highest "frequency of interruption" band,
"more than 20%" of a type's instances reclaimed in the trailing month
(https://aws.amazon.com/ec2/spot/instance-advisor/), taken at 20% over a month of 730 hours.
The large GPU types training uses are often in that band; a type in a lower band gets a longer
wait than it needs, which costs nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: Hours in a month (365 x 24 / 12), as the Spot Instance Advisor's month is taken here.
HOURS_PER_MONTH = 730.0
#: Spot interruptions per node-hour: the Spot Instance Advisor's top band, 20% a month.
SPOT_INTERRUPTIONS_PER_NODE_HOUR = 0.20 / HOURS_PER_MONTH
SPOT_RATE_SOURCE = ("EC2 Spot Instance Advisor, highest frequency-of-interruption band (more "
                    "than 20% of instances a month), taken at 20% over 730 hours")
#: The share of jobs whose interruptions the wait should cover.
QUANTILE = 0.95
MIN_INTERRUPTIONS = 1
MAX_INTERRUPTIONS = 100
#: MaxWaitTimeInSeconds is a 32-bit integer in SageMaker's service model.
MAX_WAIT_S = 2**31 - 1


@dataclass(frozen=True)
class SpotWait:
    """``MaxWaitTimeInSeconds`` and how it was reached.

    Attributes:
        max_wait_s: the wait, in seconds (``>= time_limit_s``).
        interruptions: the interruptions it allows for (``k`` in the module docstring).
        expected: the mean number of interruptions (``lam``).
    """

    max_wait_s: int
    interruptions: int
    expected: float


def poisson_quantile(mean: float, quantile: float, most: int) -> int:
    """The smallest ``k`` with ``P(Poisson(mean) <= k) >= quantile``, or ``most`` when that is
    above ``most``.

    Raises:
        ValueError: ``mean`` is negative or not finite, or ``quantile`` is not in (0, 1).
    """
    if not (math.isfinite(mean) and mean >= 0):
        raise ValueError(f"mean: {mean!r} is not allowed; give a finite number >= 0")
    if not 0 < quantile < 1:
        raise ValueError(f"quantile: {quantile!r} is not allowed; give a number in (0, 1)")
    if mean == 0:
        return 0
    # in logarithms: exp(-mean) underflows for a large mean, the terms near it do not
    log_term, log_mean = -mean, math.log(mean)
    cdf, k = math.exp(log_term), 0
    while cdf < quantile and k < most:
        k += 1
        log_term += log_mean - math.log(k)
        cdf += math.exp(log_term)
    return k


def spot_max_wait(time_limit_s: int, nodes: int,
                  interruptions_per_node_hour: float = SPOT_INTERRUPTIONS_PER_NODE_HOUR,
                  ) -> SpotWait:
    """``MaxWaitTimeInSeconds`` for a managed spot job of ``nodes`` instances whose
    ``MaxRuntimeInSeconds`` is ``time_limit_s`` (the formula of the module docstring).

    Raises:
        ValueError: ``time_limit_s`` or ``nodes`` is below 1, or the rate is negative or not
            finite.
    """
    if time_limit_s < 1 or nodes < 1:
        raise ValueError(f"time_limit_s {time_limit_s!r} and nodes {nodes!r} must be at least 1")
    if not (math.isfinite(interruptions_per_node_hour) and interruptions_per_node_hour >= 0):
        raise ValueError(f"interruptions_per_node_hour: {interruptions_per_node_hour!r} is not "
                         "allowed; give a finite number >= 0")
    expected = nodes * time_limit_s / 3600.0 * interruptions_per_node_hour
    k = max(MIN_INTERRUPTIONS, poisson_quantile(expected, QUANTILE, MAX_INTERRUPTIONS))
    return SpotWait(min(time_limit_s * (1 + k), MAX_WAIT_S), k, expected)
