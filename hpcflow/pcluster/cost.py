"""Cost estimate for a cluster spec over a number of hours: compute queues and head node, from
on-demand prices (``hpcflow.aws.pricing``). Spot is shown as a range, never a promise.

What is not included: FSx, EBS, data transfer, CloudWatch, and capacity block reservation fees
(paid upfront at booking; https://aws.amazon.com/ec2/capacityblocks/pricing/).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from hpcflow.aws.pricing import Price
from hpcflow.pcluster.builder import compute_name, min_nodes
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
        usd_per_node_hour: on-demand price, None when unknown or not applicable (capacity
            blocks are not billed at the on-demand rate).
        usd_min: cost with only static nodes running (USD), at the lowest price assumed (10% of
            on-demand for spot); None when not estimated.
        usd_max: cost with every node running the whole period at the highest price assumed
            (on-demand, also the spot cap) (USD); None when not estimated.
        source: where the price came from, or why there is none.
        spot_usd_per_node_hour: for spot, the (low, high) hourly range assumed; else None.
        spot_usd_max: for spot, every node the whole period at the low and the high end.
        caveat: why the price may be wrong (e.g. it predates a price change), or "".
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
    spot_usd_per_node_hour: tuple[float, float] | None = None
    spot_usd_max: tuple[float, float] | None = None
    caveat: str = ""


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

    @property
    def not_counted(self) -> list[str]:
        """Lines the totals leave out (no price known, or a capacity block fee)."""
        return [line.what for line in self.lines if line.usd_max is None]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"hours": self.hours, "lines": [asdict(x) for x in self.lines],
                "total_usd_min": self.total_min, "total_usd_max": self.total_max,
                "not_counted": self.not_counted, "notes": list(self.notes)}


def instance_types_of(spec: ClusterSpec) -> list[str]:
    """Every instance type the spec uses (head node first)."""
    types = [spec.head_node.instance_type]
    types += [pool.instance_type for pool in spec.login_nodes]
    types += [t for q in spec.queues for c in q.compute for t in c.types]
    return list(dict.fromkeys(types))


def estimate_cost(spec: ClusterSpec, hours: float, prices: dict[str, Price],
                  notes: list[str] | None = None) -> CostEstimate:
    """Estimate the cost of ``spec`` running for ``hours`` hours. Pure.

    Floor: the head node, login nodes and static nodes (``min_nodes``) the whole time. Ceiling: every node
    of every queue the whole time. Spot lines give a range from 10% of the on-demand price to the
    on-demand price. Capacity block lines are not estimated (the fee is fixed at booking).
    """
    est = CostEstimate(hours=hours, notes=list(notes or []))
    hn = spec.head_node.instance_type
    est.lines.append(_line("head node", hn, "ondemand", 1, 1, hours, prices.get(hn)))
    for pool in spec.login_nodes:
        est.lines.append(_line(f"login/{pool.name}", pool.instance_type, "ondemand", pool.count,
                               pool.count, hours, prices.get(pool.instance_type)))
    for q in spec.queues:
        for c in q.compute:
            # A flexible resource (several types) is priced at its dearest type: the ceiling.
            known = [prices[t] for t in c.types if t in prices]
            dearest = max(known, key=lambda p: p.usd_per_hour) if len(known) == len(c.types) \
                else None
            it = dearest.instance_type if dearest else c.types[0]
            est.lines.append(_line(f"{q.name}/{compute_name(c)}", it, q.capacity_type,
                                   min_nodes(q, c), c.max_nodes, hours, dearest))
    if any(q.capacity_type == "spot" for q in spec.queues):
        est.notes.append("spot: shown from 10% of the on-demand price (AWS: 'up to 90% off') to "
                         "the on-demand price; spot prices move and capacity is not guaranteed")
    if any(q.capacity_type == "capacity_block" for q in spec.queues):
        est.notes.append("capacity blocks: not estimated; the reservation fee is set when the "
                         "block is bought (https://aws.amazon.com/ec2/capacityblocks/pricing/)")
    for it in sorted({line.instance_type for line in est.lines if line.caveat}):
        caveat = next(line.caveat for line in est.lines if line.instance_type == it)
        est.notes.append(f"{it}: {caveat}")
    est.notes.append("not included: FSx, EBS, data transfer, CloudWatch")
    return est


def _line(what: str, it: str, ctype: str, lo: int, hi: int, hours: float,
          price: Price | None) -> CostLine:
    if ctype == "capacity_block":
        return CostLine(what, it, ctype, lo, hi, None, None, None,
                        "capacity block fee (not estimated)")
    if price is None:
        return CostLine(what, it, ctype, lo, hi, None, None, None,
                        "no price known: not in the shipped table, and the Price List API gave "
                        "none (try --price-source api with AWS credentials)")
    unit = price.usd_per_hour * hours
    if ctype == "spot":
        rate = (price.usd_per_hour * SPOT_LOW_FRACTION, price.usd_per_hour * SPOT_HIGH_FRACTION)
        top = (round(hi * unit * SPOT_LOW_FRACTION, 2), round(hi * unit * SPOT_HIGH_FRACTION, 2))
        return CostLine(what, it, ctype, lo, hi, price.usd_per_hour,
                        round(lo * unit * SPOT_LOW_FRACTION, 2), top[1], price.source,
                        rate, top, price.caveat)
    return CostLine(what, it, ctype, lo, hi, price.usd_per_hour, round(lo * unit, 2),
                    round(hi * unit, 2), price.source, caveat=price.caveat)
