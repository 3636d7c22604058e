"""The offline instance table shipped with hpcflow, for the families people pick for training,
and the lookup that merges it with the on-disk EC2 cache (``hpcflow.aws.instances``).

Every figure carries a source (:data:`SOURCES`). The figures are EC2 ``DescribeInstanceTypes``
answers for us-east-1 as recorded in moto 5.2.5 (``moto/ec2/resources/instance_types.json.gz``,
which moto copies from the real API) and agree with the AWS instance type pages listed per family.
One exception is marked per figure: the Trainium2 device memory (see ``aws-trn2``).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass

from hpcflow.aws.instances import InstanceFacts

SOURCES: dict[str, str] = {
    "ec2-api": "EC2 DescribeInstanceTypes, us-east-1, as recorded in moto 5.2.5 "
               "ec2/resources/instance_types.json.gz",
    "aws-trn2": "https://aws.amazon.com/ec2/instance-types/trn2/ (16 Trainium2 chips, 1.5 TB HBM "
                "per trn2.48xlarge = 96 GiB per chip; the API record in moto 5.2.5 says 512 GiB "
                "per device, which does not match the product page)",
}

# Product page per family: where to check a figure by hand.
FAMILY_PAGES: dict[str, str] = {
    "p4d": "https://aws.amazon.com/ec2/instance-types/p4/",
    "p4de": "https://aws.amazon.com/ec2/instance-types/p4/",
    "p5": "https://aws.amazon.com/ec2/instance-types/p5/",
    "p5e": "https://aws.amazon.com/ec2/instance-types/p5/",
    "p5en": "https://aws.amazon.com/ec2/instance-types/p5/",
    "p6-b200": "https://aws.amazon.com/ec2/instance-types/p6/",
    "g5": "https://aws.amazon.com/ec2/instance-types/g5/",
    "g6": "https://aws.amazon.com/ec2/instance-types/g6/",
    "g6e": "https://aws.amazon.com/ec2/instance-types/g6e/",
    "trn1": "https://aws.amazon.com/ec2/instance-types/trn1/",
    "trn1n": "https://aws.amazon.com/ec2/instance-types/trn1/",
    "trn2": "https://aws.amazon.com/ec2/instance-types/trn2/",
}


def _row(name: str, vcpus: int, mem_mib: int, acc: str, count: int, acc_mib: int,
         efa: bool, cards: int, efa_ifaces: int, **figure_sources: str) -> InstanceFacts:
    return InstanceFacts(name, vcpus, mem_mib, acc, count, acc_mib, efa, cards, efa_ifaces,
                         "ec2-api", figure_sources)


# name, vCPUs, memory MiB, accelerator, count, memory MiB per accelerator, EFA, network cards,
# max EFA interfaces.
_TABLE: tuple[InstanceFacts, ...] = (
    _row("p4d.24xlarge", 96, 1179648, "A100", 8, 40960, True, 4, 4),
    _row("p4de.24xlarge", 96, 1179648, "A100", 8, 81920, True, 4, 4),
    _row("p5.4xlarge", 16, 262144, "H100", 1, 81920, True, 1, 1),
    _row("p5.48xlarge", 192, 2097152, "H100", 8, 81920, True, 32, 32),
    _row("p5e.48xlarge", 192, 2097152, "H200", 8, 144384, True, 32, 32),
    _row("p5en.48xlarge", 192, 2097152, "H200", 8, 144384, True, 16, 16),
    _row("p6-b200.48xlarge", 192, 2097152, "B200", 8, 183359, True, 8, 8),
    _row("g5.xlarge", 4, 16384, "A10G", 1, 22888, False, 1, 0),
    _row("g5.2xlarge", 8, 32768, "A10G", 1, 22888, False, 1, 0),
    _row("g5.4xlarge", 16, 65536, "A10G", 1, 22888, False, 1, 0),
    _row("g5.8xlarge", 32, 131072, "A10G", 1, 22888, True, 1, 1),
    _row("g5.12xlarge", 48, 196608, "A10G", 4, 22888, True, 1, 1),
    _row("g5.16xlarge", 64, 262144, "A10G", 1, 22888, True, 1, 1),
    _row("g5.24xlarge", 96, 393216, "A10G", 4, 22888, True, 1, 1),
    _row("g5.48xlarge", 192, 786432, "A10G", 8, 22888, True, 1, 1),
    _row("g6.xlarge", 4, 16384, "L4", 1, 22888, False, 1, 0),
    _row("g6.2xlarge", 8, 32768, "L4", 1, 22888, False, 1, 0),
    _row("g6.4xlarge", 16, 65536, "L4", 1, 22888, False, 1, 0),
    _row("g6.8xlarge", 32, 131072, "L4", 1, 22888, True, 1, 1),
    _row("g6.12xlarge", 48, 196608, "L4", 4, 22888, True, 1, 1),
    _row("g6.16xlarge", 64, 262144, "L4", 1, 22888, True, 1, 1),
    _row("g6.24xlarge", 96, 393216, "L4", 4, 22888, True, 1, 1),
    _row("g6.48xlarge", 192, 786432, "L4", 8, 22888, True, 1, 1),
    _row("g6e.xlarge", 4, 32768, "L40S", 1, 45776, False, 1, 0),
    _row("g6e.2xlarge", 8, 65536, "L40S", 1, 45776, False, 1, 0),
    _row("g6e.4xlarge", 16, 131072, "L40S", 1, 45776, False, 1, 0),
    _row("g6e.8xlarge", 32, 262144, "L40S", 1, 45776, True, 1, 1),
    _row("g6e.12xlarge", 48, 393216, "L40S", 4, 45776, True, 1, 1),
    _row("g6e.16xlarge", 64, 524288, "L40S", 1, 45776, True, 1, 1),
    _row("g6e.24xlarge", 96, 786432, "L40S", 4, 45776, True, 2, 2),
    _row("g6e.48xlarge", 192, 1572864, "L40S", 8, 45776, True, 4, 4),
    _row("trn1.2xlarge", 8, 32768, "Trainium", 1, 32768, False, 1, 0),
    _row("trn1.32xlarge", 128, 524288, "Trainium", 16, 32768, True, 8, 8),
    _row("trn1n.32xlarge", 128, 524288, "Trainium", 16, 32768, True, 16, 16),
    _row("trn2.3xlarge", 12, 131072, "Trainium2", 1, 98304, True, 1, 1,
         accelerator_memory_mib="aws-trn2"),
    _row("trn2.48xlarge", 192, 2097152, "Trainium2", 16, 98304, True, 16, 16,
         accelerator_memory_mib="aws-trn2"),
)

OFFLINE: dict[str, InstanceFacts] = {f.instance_type: f for f in _TABLE}
FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(f.family for f in _TABLE))


@dataclass(frozen=True)
class Catalog:
    """Instance facts by type: the offline table, with cached EC2 answers filling the gaps.

    The offline table wins for the types it lists, so a render does not change with whatever
    sits in a user's cache; ``hpcflow cluster instances --refresh`` shows the live figures.
    """

    facts: Mapping[str, InstanceFacts]

    @classmethod
    def offline(cls, extra: Mapping[str, InstanceFacts] | None = None) -> Catalog:
        """The shipped table plus ``extra`` (e.g. :func:`hpcflow.aws.instances.read_cache`)."""
        merged = dict(extra or {})
        merged.update(OFFLINE)
        return cls(merged)

    def get(self, instance_type: str) -> InstanceFacts | None:
        """Facts for one type, or None when nothing is known."""
        return self.facts.get(instance_type)

    def family_known(self, instance_type: str) -> bool:
        """True when the type's family is one the catalog lists (so an unknown size is a typo)."""
        fam = instance_type.split(".", 1)[0]
        return any(f.family == fam for f in self.facts.values())

    def suggest(self, instance_type: str) -> str | None:
        """The closest known type name (difflib), or None."""
        close = difflib.get_close_matches(instance_type, list(self.facts), n=1, cutoff=0.6)
        return close[0] if close else None

    def by_family(self, family: str | None = None) -> list[InstanceFacts]:
        """Rows of one family (all when None), ordered by family then size."""
        rows = [f for f in self.facts.values() if family is None or f.family == family]
        return sorted(rows, key=lambda f: (_family_rank(f.family), f.family, _size_rank(f)))


def _family_rank(family: str) -> int:
    return FAMILIES.index(family) if family in FAMILIES else len(FAMILIES)


def _size_rank(facts: InstanceFacts) -> tuple[int, str]:
    size = facts.instance_type.split(".", 1)[1]
    m = re.fullmatch(r"(\d*)xlarge", size)
    return (int(m.group(1) or 1) if m else 0, size)
