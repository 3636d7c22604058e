"""The :class:`Finding` every rule returns, the context that collects findings and maps config
paths back to spec fields, and small walkers over a ParallelCluster config dict."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from hpcflow.spec.loading import format_loc

Level = Literal["error", "warning", "info"]
#: Where a value sits in a ParallelCluster config: keys and list indices, e.g.
#: ``("Scheduling", "SlurmQueues", 0, "Name")``.
FieldPath = tuple[str | int, ...]


@dataclass(frozen=True)
class Finding:
    """One rule's verdict on one value.

    Attributes:
        code: stable identifier, e.g. ``EFA_UNSUPPORTED``.
        level: ``error`` stops a render; ``warning`` and ``info`` are printed.
        path: the spec field path when known (``queues[0].compute[1].efa``), else the config
            path (``Scheduling.SlurmQueues[0]...``).
        value: the offending value.
        message: what is wrong, what is allowed, and the fix.
    """

    code: str
    level: Level
    path: str
    value: Any
    message: str

    def __str__(self) -> str:
        return f"{self.level}: {self.path}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


class Ctx:
    """Collects findings and turns config paths into spec paths."""

    def __init__(self, sources: Mapping[FieldPath, str] | None) -> None:
        self.sources = sources or {}
        self.findings: list[Finding] = []

    def where(self, path: FieldPath) -> str:
        """The spec field that produced ``path`` (longest known prefix), else the config path."""
        if not self.sources:
            return format_loc(path)
        for n in range(len(path), 0, -1):
            hit = self.sources.get(path[:n])
            if hit is not None:
                return hit
        return format_loc(path)

    def add(self, code: str, level: Level, path: FieldPath, value: Any, message: str) -> None:
        """Record one finding at config path ``path``."""
        self.findings.append(Finding(code, level, self.where(path), value, message))


def queues(cfg: Mapping[str, Any]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(index, queue) for every mapping under ``Scheduling.SlurmQueues``."""
    sched = cfg.get("Scheduling")
    items = (sched.get("SlurmQueues") if isinstance(sched, dict) else None) or []
    for qi, q in enumerate(items if isinstance(items, list) else []):
        if isinstance(q, dict):
            yield qi, q


def computes(q: Mapping[str, Any]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(index, compute resource) for every mapping under a queue's ``ComputeResources``."""
    items = q.get("ComputeResources") or []
    for ci, c in enumerate(items if isinstance(items, list) else []):
        if isinstance(c, dict):
            yield ci, c


def instance_types(c: Mapping[str, Any]) -> list[tuple[FieldPath, Any]]:
    """(path inside the compute resource, type) for ``InstanceType`` or each entry of a flexible
    ``Instances`` list (ParallelCluster user guide, "Multiple instance type allocation")."""
    if "InstanceType" in c:
        return [(("InstanceType",), c.get("InstanceType"))]
    out: list[tuple[FieldPath, Any]] = []
    for i, item in enumerate(c.get("Instances") or []):
        if isinstance(item, dict):
            out.append((("Instances", i, "InstanceType"), item.get("InstanceType")))
    return out


def efa_on(c: Mapping[str, Any]) -> bool:
    """``Efa.Enabled`` of a compute resource."""
    efa = c.get("Efa")
    return isinstance(efa, dict) and efa.get("Enabled") is True


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` when it is a mapping, else an empty one (rules never crash on a wrong shape;
    the schema reports it)."""
    return value if isinstance(value, dict) else {}


QP: Callable[[int], FieldPath] = lambda qi: ("Scheduling", "SlurmQueues", qi)  # noqa: E731
