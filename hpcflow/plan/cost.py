"""Dollars for a goodput prediction, from a price per node-hour. Pure: the caller looks the
price up (:func:`hpcflow.aws.pricing.lookup_prices`) and passes the spot range it assumes."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class PlanCost:
    """What the job costs, in USD.

    Attributes:
        usd_per_node_hour: on-demand price of one node for one hour.
        on_demand_usd: every node for every hour, on demand.
        spot_usd: (low, high) for the same on spot, at the fractions of the on-demand price
            given.
        usd_per_useful_gpu_hour: on-demand cost over the useful GPU-hours (None when none).
        spot_usd_per_useful_gpu_hour: the same at the spot (low, high) (None when none).
        source: where the price came from.
        caveat: why the price may be wrong, or "".
    """

    usd_per_node_hour: float
    on_demand_usd: float
    spot_usd: tuple[float, float]
    usd_per_useful_gpu_hour: float | None
    spot_usd_per_useful_gpu_hour: tuple[float, float] | None
    source: str
    caveat: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def plan_cost(nodes: int, hours: float, useful_gpu_hours: float, usd_per_node_hour: float,
              spot_fractions: tuple[float, float], source: str, caveat: str = "") -> PlanCost:
    """The cost of holding ``nodes`` for ``hours``, and of each useful GPU-hour.

    Args:
        nodes: nodes held.
        hours: hours held.
        useful_gpu_hours: GPU-hours of committed training (the prediction's ``useful``).
        usd_per_node_hour: on-demand USD per node-hour.
        spot_fractions: (low, high) spot price as fractions of on-demand.
        source, caveat: carried from the price.
    """
    od = nodes * hours * usd_per_node_hour
    lo, hi = (round(od * f, 2) for f in spot_fractions)
    per = od / useful_gpu_hours if useful_gpu_hours > 0 else None
    spot_per = (lo / useful_gpu_hours, hi / useful_gpu_hours) if useful_gpu_hours > 0 else None
    return PlanCost(usd_per_node_hour, round(od, 2), (lo, hi), per, spot_per, source, caveat)
