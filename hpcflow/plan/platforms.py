"""The same run priced on each platform hpcflow runs it on, per useful GPU-hour. Pure: the
caller looks the prices up (EC2: :mod:`hpcflow.aws.pricing`; SageMaker training and HyperPod:
:mod:`hpcflow.aws.sagemaker_pricing`) and passes them in.

Every platform runs the same prediction (:mod:`hpcflow.plan.goodput`): the same nodes for the
same hours, the same useful GPU-hours. What differs is the rate: ParallelCluster nodes are EC2
instances at EC2's prices; a SageMaker training job and a HyperPod cluster pay SageMaker's
``ml.`` rates. Spot rows are a range, from the lowest fraction of on-demand the provider
advertises to on-demand itself. A warned interruption (EC2's two-minute notice, SageMaker's
SIGTERM) costs a program on hpcflow's runtime the save and the restart only, which the
prediction's restart cost already covers; capacity waits are not billed on SageMaker and not
counted here.

HyperPod has one row, on-demand: hpcflow's HyperPod clusters are Slurm ones, for which AWS
documents no spot capacity (:mod:`hpcflow.aws.sagemaker_pricing`), so its interruptions are the
prediction's node failures only; HyperPod replaces a faulty node itself, and the prediction's
restart cost stands for the time that takes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

#: The platforms ``hpcflow plan goodput`` prices, in the order it shows them.
PLATFORMS = ("parallelcluster-on-demand", "parallelcluster-spot", "hyperpod-on-demand",
             "sagemaker-on-demand", "sagemaker-spot")
#: What ``plan goodput`` says of the HyperPod row.
HYPERPOD_NOTE = ("hyperpod: on-demand only (AWS documents HyperPod spot for EKS-orchestrated "
                 "clusters; hpcflow's are Slurm); interruptions: node failures only, HyperPod "
                 "replaces a faulty node")


@dataclass(frozen=True)
class Rate:
    """An on-demand price per node-hour and the spot range as fractions of it (None: the
    platform has no spot option hpcflow prices)."""

    usd_per_node_hour: float
    spot_fractions: tuple[float, float] | None
    source: str
    caveat: str = ""


@dataclass(frozen=True)
class PlatformCost:
    """One platform's bill for the run, in USD.

    Attributes:
        platform: one of :data:`PLATFORMS`.
        usd: (low, high) for the run; equal for on-demand.
        usd_per_useful_gpu_hour: (low, high) over the useful GPU-hours, or None when none.
        usd_per_node_hour: (low, high) rate.
        source: where the on-demand price came from.
        caveat: why the price may be wrong, or "".
    """

    platform: str
    usd: tuple[float, float]
    usd_per_useful_gpu_hour: tuple[float, float] | None
    usd_per_node_hour: tuple[float, float]
    source: str
    caveat: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def compare_platforms(nodes: int, hours: float, useful_gpu_hours: float, *,
                      parallelcluster: Rate | None, sagemaker: Rate | None,
                      hyperpod: Rate | None = None) -> list[PlatformCost]:
    """The run's cost on each platform whose rate is known, in :data:`PLATFORMS` order.

    Args:
        nodes: nodes (instances) held.
        hours: hours held.
        useful_gpu_hours: the prediction's useful GPU-hours.
        parallelcluster: the EC2 rate of the instance type, or None when unknown.
        sagemaker: the SageMaker training rate of its ``ml.`` type, or None when unknown.
        hyperpod: the HyperPod rate of its ``ml.`` type, or None when unknown; its spot
            fractions are ignored (on-demand only).
    """
    rows = []
    for name, rate in (("parallelcluster", parallelcluster), ("hyperpod", hyperpod),
                       ("sagemaker", sagemaker)):
        if rate is None:
            continue
        kinds: list[tuple[str, tuple[float, float]]] = [("on-demand", (1.0, 1.0))]
        if rate.spot_fractions is not None and name != "hyperpod":
            kinds.append(("spot", rate.spot_fractions))
        for kind, fractions in kinds:
            per_node = tuple(rate.usd_per_node_hour * f for f in fractions)
            usd = tuple(round(nodes * hours * r, 2) for r in per_node)
            per_useful = (tuple(u / useful_gpu_hours for u in usd) if useful_gpu_hours > 0
                          else None)
            rows.append(PlatformCost(f"{name}-{kind}", usd, per_useful,  # type: ignore[arg-type]
                                     per_node, rate.source, rate.caveat))  # type: ignore[arg-type]
    return sorted(rows, key=lambda row: PLATFORMS.index(row.platform))
