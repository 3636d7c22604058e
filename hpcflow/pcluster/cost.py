"""Cost estimate for a cluster spec over a number of hours: compute queues and head node, from
on-demand prices (``hpcflow.aws.pricing``). Spot is shown as a range, never a promise.

What is not included: FSx, EBS, data transfer, CloudWatch, and capacity block reservation fees
(paid upfront at booking; https://aws.amazon.com/ec2/capacityblocks/pricing/).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from hpcflow.aws.pricing import Price
from hpcflow.pcluster.builder import min_nodes
from hpcflow.spec.cluster import ClusterSpec

# Spot prices float with supply and demand and are capped at the on-demand price; AWS advertises
# "up to 90% off" (https://aws.amazon.com/ec2/spot/). The range below is that span.
SPOT_LOW_FRACTION = 0.10
SPOT_HIGH_FRACTION = 1.00


@dataclass(frozen=True)
class CostLine:
    """The cost of one compute resource (or the head node) over the period.

    Attributes:
        what: ``head node`` or ``<queue>/<compute resource>``.
        instance_type: EC2 type.
        capacity_type: ondemand, spot or capacity_block.
        nodes_min: nodes always running (static).
        nodes_max: nodes when the queue is full.
        usd_per_node_hour: on-demand price, None when unknown.
        usd_min: cost with only static nodes running (USD); None when not estimated.
        usd_max: cost with every node running the whole period (USD).
        source: where the price came from, or why there is none.
    """

    what: str
    instance_type: str
    capacity_type: str
    nodes_min: int
    nodes_max: int
    usd_per_node_hour: float | None
    usd_min: float | None
    usd_max: float | None
    source: str


@dataclass
class CostEstimate:
    """All lines, totals in USD (static floor to full-cluster ceiling) and notes."""

    hours: float
    lines: list[CostLine] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def total_min(self) -> float:
        """Sum of the estimated floors (USD)."""
        return round(sum(line.usd_min or 0.0 for line in self.lines), 2)

    @property
    def total_max(self) -> float:
        """Sum of the estimated ceilings (USD)."""
        return round(sum(line.usd_max or 0.0 for line in self.lines), 2)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"hours": self.hours, "lines": [asdict(x) for x in self.lines],
                "total_usd_min": self.total_min, "total_usd_max": self.total_max,
                "notes": list(self.notes)}


def instance_types_of(spec: ClusterSpec) -> list[str]:
    """Every instance type the spec uses (head node first)."""
    types = [spec.head_node.instance_type]
    types += [c.instance_type for q in spec.queues for c in q.compute]
    return list(dict.fromkeys(types))


def estimate_cost(spec: ClusterSpec, hours: float, prices: dict[str, Price],
                  notes: list[str] | None = None) -> CostEstimate:
    """Estimate the cost of ``spec`` running for ``hours`` hours. Pure.

    Floor: the head node plus static nodes (``min_nodes``) the whole time. Ceiling: every node
    of every queue the whole time. Spot lines give a range from 10% of the on-demand price to the
    on-demand price. Capacity block lines are not estimated (the fee is fixed at booking).
    """
    est = CostEstimate(hours=hours, notes=list(notes or []))
    hn = spec.head_node.instance_type
    est.lines.append(_line("head node", hn, "ondemand", 1, 1, hours, prices.get(hn)))
    for q in spec.queues:
        for c in q.compute:
            name = c.name or c.instance_type.replace(".", "-")
            est.lines.append(_line(f"{q.name}/{name}", c.instance_type, q.capacity_type,
                                   min_nodes(q, c), c.max_nodes, hours, prices.get(c.instance_type)))
    if any(q.capacity_type == "spot" for q in spec.queues):
        est.notes.append("spot: shown from 10% of the on-demand price (AWS: 'up to 90% off') to "
                         "the on-demand price; spot prices move and capacity is not guaranteed")
    if any(q.capacity_type == "capacity_block" for q in spec.queues):
        est.notes.append("capacity blocks: not estimated; the reservation fee is set when the "
                         "block is bought (https://aws.amazon.com/ec2/capacityblocks/pricing/)")
    est.notes.append("not included: FSx, EBS, data transfer, CloudWatch")
    return est


def _line(what: str, it: str, ctype: str, lo: int, hi: int, hours: float,
          price: Price | None) -> CostLine:
    if ctype == "capacity_block":
        return CostLine(what, it, ctype, lo, hi, price.usd_per_hour if price else None,
                        None, None, "capacity block fee (not estimated)")
    if price is None:
        return CostLine(what, it, ctype, lo, hi, None, None, None,
                        "no price known (not in the shipped table; try --price-source api)")
    unit = price.usd_per_hour * hours
    if ctype == "spot":
        usd_min = round(lo * unit * SPOT_LOW_FRACTION, 2)
        usd_max = round(hi * unit * SPOT_HIGH_FRACTION, 2)
    else:
        usd_min, usd_max = round(lo * unit, 2), round(hi * unit, 2)
    return CostLine(what, it, ctype, lo, hi, price.usd_per_hour, usd_min, usd_max, price.source)
