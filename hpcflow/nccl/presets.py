"""NCCL/EFA environment presets in one table, chosen by the instance's facts (EFA interfaces, GPU
model; hpcflow's instance catalog) and the installed library versions.

With a current EFA installer and aws-ofi-nccl almost nothing needs setting. The legacy values
(``FI_PROVIDER=efa``, ``NCCL_PROTO=simple``, ``FI_EFA_USE_DEVICE_RDMA=1``) apply only to the
plugin versions that need them. InfiniBand-only ``NCCL_IB_*`` variables never appear: EFA is not
InfiniBand and NCCL ignores them when the OFI plugin carries the traffic.

Source of every rule (``SOURCES``): aws-ofi-nccl ``doc/efa-env-var.md`` ("EFA Cheatsheet",
commit e0a65432), the plugin's own guidance on which variables each version needs.

:func:`preset_env` is the function the sbatch template renderer and ``hpcflow doctor`` call.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

SOURCES: dict[str, str] = {
    "ofi-cheatsheet": "aws-ofi-nccl doc/efa-env-var.md (EFA Cheatsheet), "
                      "https://github.com/aws/aws-ofi-nccl/blob/master/doc/efa-env-var.md",
    "efa-types": "AWS EFA user guide, Supported instance types (GPUDirect RDMA), "
                 "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa.html",
    "efa-cheatsheet": "aws-samples/awsome-distributed-training 1.architectures/efa-cheatsheet.md "
                      "(EFA Cheatsheet, section 1; commit 0610db06)",
    "nccl-env": "NCCL user guide, Environment Variables, NCCL_NET_GDR_LEVEL (LOC: never use "
                "GPUDirect RDMA), "
                "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html",
}

# NVIDIA GPUs that take GPUDirect RDMA over EFA: the p4d/p4de (A100), p5 (H100), p5e/p5en (H200)
# and p6 (B200) instances, the "p4/p5 instances" of the cheatsheet (AWS EFA user guide,
# "Supported instance types", GPUDirect RDMA column).
RDMA_GPUS = frozenset({"A100", "H100", "H200", "B200"})
# Variables that belong to InfiniBand; a preset never sets them.
FORBIDDEN_PREFIXES = ("NCCL_IB_",)


@dataclass(frozen=True)
class EnvSetting:
    """One environment variable a preset sets, with why and where that comes from."""

    name: str
    value: str
    why: str
    source: str

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "value": self.value, "why": self.why,
                "source": SOURCES.get(self.source, self.source)}


@dataclass(frozen=True)
class Versions:
    """Installed library versions (None = unknown). Strings such as ``1.7.4-aws`` or ``2.18.5-1``."""

    ofi_nccl: str | None = None
    nccl: str | None = None
    efa_installer: str | None = None


@dataclass(frozen=True)
class NodeFacts:
    """What a preset needs to know about an instance type (from hpcflow's instance catalog).

    Attributes:
        instance_type: e.g. ``p5.48xlarge``.
        efa_interfaces: ``NetworkInfo.EfaInfo.MaximumEfaInterfaces`` (0 without EFA).
        gpu: the NVIDIA GPU model (``H100``), or ``""`` (none, or not known).
        nvidia_gpus: NVIDIA GPUs per instance.
        network_cards: ``NetworkInfo.MaximumNetworkCards`` (0 when not known).
        source: where the figures come from (the catalog's source key).
    """

    instance_type: str
    efa_interfaces: int
    gpu: str
    nvidia_gpus: int
    network_cards: int
    source: str

    @property
    def efa_gpu(self) -> bool:
        """NVIDIA GPUs with EFA: NCCL traffic is expected to go over aws-ofi-nccl."""
        return self.efa_interfaces > 0 and self.nvidia_gpus > 0

    @property
    def rdma(self) -> bool:
        """GPUDirect RDMA over EFA (source ``efa-types``)."""
        return self.efa_gpu and self.gpu in RDMA_GPUS


def node_facts(instance_type: str) -> NodeFacts | None:
    """The type's facts from hpcflow's instance catalog (the offline table, then the list of
    every EC2 type), or None when the type is not known. Reads a small TSV once (a few ms)."""
    from hpcflow.pcluster.catalog import Catalog, ec2_types

    facts = Catalog.offline().get(instance_type)
    if facts is not None:
        nvidia = facts.accelerator_count if facts.accelerator and \
            not facts.accelerator.startswith(("Trainium", "Inferentia")) else 0
        return NodeFacts(instance_type, facts.max_efa_interfaces if facts.efa_supported else 0,
                         facts.accelerator if nvidia else "", nvidia, facts.max_network_cards,
                         facts.source)
    row = ec2_types().get(instance_type)
    if row is None:
        return None
    return NodeFacts(instance_type, row.max_efa_interfaces if row.efa else 0, "",
                     row.nvidia_gpus if row.gpu_maker.upper() == "NVIDIA" else 0, 0, "ec2-types")


@dataclass(frozen=True)
class _Rule:
    applies: Callable[[NodeFacts, Versions, bool], bool]
    settings: tuple[EnvSetting, ...]


@dataclass(frozen=True)
class Requirement:
    """A minimum library version for a family, with its source."""

    library: str
    attr: str
    """The :class:`Versions` field that holds the installed version."""
    minimum: str
    source: str


@dataclass
class Preset:
    """What :func:`preset_env` decided for one node: the settings and notes on what is unknown."""

    instance_type: str
    family: str
    settings: list[EnvSetting] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        """The variables to export, name -> value."""
        return {s.name: s.value for s in self.settings}

    def to_dict(self) -> dict:
        return {"instance_type": self.instance_type, "family": self.family, "env": self.env,
                "settings": [s.to_dict() for s in self.settings], "notes": list(self.notes)}


def version_tuple(text: str | None) -> tuple[int, ...] | None:
    """``"1.7.4-aws"`` -> ``(1, 7, 4)``; ``"2.18.5-1"`` -> ``(2, 18, 5)``; None when unparsable."""
    if not text:
        return None
    m = re.match(r"v?(\d+(?:\.\d+)*)", text.strip())
    return tuple(int(x) for x in m.group(1).split(".")) if m else None


def _ofi(lo: str | None = None, hi: str | None = None) -> Callable[[Versions], bool]:
    """Plugin version in [lo, hi) (either end open)."""

    def check(v: Versions) -> bool:
        have = version_tuple(v.ofi_nccl)
        if have is None:
            return False
        return ((lo is None or have >= version_tuple(lo))
                and (hi is None or have < version_tuple(hi)))
    return check


_LEGACY_PROVIDER = EnvSetting("FI_PROVIDER", "efa", "aws-ofi-nccl <= 1.5.0 on an EFA GPU instance "
                              "does not pick the EFA provider by itself", "ofi-cheatsheet")
_LEGACY_PROTO = EnvSetting("NCCL_PROTO", "simple", "aws-ofi-nccl <= 1.5.0 on an EFA GPU instance "
                           "supports only NCCL's Simple protocol", "ofi-cheatsheet")
_DEVICE_RDMA = EnvSetting("FI_EFA_USE_DEVICE_RDMA", "1", "aws-ofi-nccl < 1.7.0 on p4/p5 does not "
                          "turn on GPUDirect RDMA by itself", "ofi-cheatsheet")
_NO_HUGE_PAGE = EnvSetting("FI_EFA_USE_HUGE_PAGE", "0", "the job forks (multi-process data "
                           "loaders): huge pages make os.fork() fail with 'Cannot allocate "
                           "memory'; costs a little performance", "ofi-cheatsheet")

RULES: tuple[_Rule, ...] = (
    _Rule(lambda node, v, fork: node.efa_gpu and _ofi(hi="1.6.0")(v),
          (_LEGACY_PROVIDER, _LEGACY_PROTO)),
    _Rule(lambda node, v, fork: node.rdma and _ofi(hi="1.7.0")(v), (_DEVICE_RDMA,)),
    _Rule(lambda node, v, fork: node.efa_gpu and fork, (_NO_HUGE_PAGE,)),
)

# Minimum versions per family (the cheatsheet's "p5.48xlarge" row; p5e/p5en share the platform).
REQUIREMENTS: dict[str, tuple[Requirement, ...]] = {
    fam: (Requirement("nccl", "nccl", "2.18.0", "ofi-cheatsheet"),
          Requirement("aws-ofi-nccl", "ofi_nccl", "1.7.2", "ofi-cheatsheet"),
          Requirement("efa-installer", "efa_installer", "1.29.0", "ofi-cheatsheet"))
    for fam in ("p5", "p5e", "p5en")
}


@dataclass(frozen=True)
class Contradiction:
    """A user setting that works against NCCL over EFA, and where that is said."""

    name: str
    value: str
    why: str
    source: str

    def line(self) -> str:
        """``NAME=value: why (source)``."""
        return f"{self.name}={self.value}: {self.why} ({SOURCES[self.source]})"


# name -> (does the value contradict?, why, source key); checked on EFA GPU instances only.
_CONTRADICTIONS: dict[str, tuple[Callable[[str, NodeFacts], bool], str, str]] = {
    "RDMAV_FORK_SAFE": (lambda v, node: v.strip() not in ("", "0"),
                        "an rdma-core variable the cheatsheet says not to use (it can break "
                        "things on newer kernels; FI_EFA_FORK_SAFE is the EFA one)",
                        "efa-cheatsheet"),
    "NCCL_NET_GDR_LEVEL": (lambda v, node: node.rdma and v.strip().upper() in ("LOC", "0"),
                           "LOC turns GPUDirect RDMA off on an instance whose GPUs use it over "
                           "EFA", "nccl-env"),
    "NCCL_SOCKET_NTHREADS": (lambda v, node: True, "a setting of NCCL's Socket transport: "
                             "not applicable for EFA", "efa-cheatsheet"),
    "NCCL_NSOCKS_PERTHREAD": (lambda v, node: True, "a setting of NCCL's Socket transport: "
                              "not applicable for EFA", "efa-cheatsheet"),
}


def contradicting_settings(env: dict[str, str] | Mapping[str, str],
                           node: NodeFacts | None) -> list[Contradiction]:
    """The user's settings in ``env`` that work against NCCL over EFA on ``node`` (none off an
    EFA GPU instance), each with its source. Pure."""
    if node is None or not node.efa_gpu:
        return []
    out = []
    for name, (contradicts, why, source) in _CONTRADICTIONS.items():
        value = env.get(name)
        if value is not None and contradicts(value, node):
            out.append(Contradiction(name, value, why, source))
    return out


def family_of(instance_type: str) -> str:
    """``p5.48xlarge`` -> ``p5``; ``p6-b200.48xlarge`` -> ``p6-b200``."""
    return instance_type.split(".", 1)[0]


def preset_env(instance_type: str, versions: Versions | None = None, *,
               forking_workers: bool = True, facts: NodeFacts | None = None) -> Preset:
    """The NCCL/EFA environment for a node of ``instance_type`` with the given library versions.

    Chosen by the instance's facts, never by its family name: EFA variables only where the type
    has EFA interfaces and NVIDIA GPUs, ``FI_EFA_USE_DEVICE_RDMA`` only where its GPUs take
    GPUDirect RDMA. Pure when ``facts`` is given; otherwise they come from :func:`node_facts`.

    Args:
        instance_type: EC2 instance type, e.g. ``p5.48xlarge``.
        versions: installed aws-ofi-nccl / NCCL / EFA installer versions; unknown ones are None
            (then no version-dependent legacy value is added, and a note says so).
        forking_workers: the job forks worker processes (PyTorch data loaders): adds
            ``FI_EFA_USE_HUGE_PAGE=0`` on EFA GPU instances.
        facts: the type's facts (default: looked up in hpcflow's instance catalog).

    Returns:
        A :class:`Preset`; ``preset.env`` is the mapping to export. Never contains ``NCCL_IB_*``.
    """
    versions = versions or Versions()
    family = family_of(instance_type)
    preset = Preset(instance_type, family)
    node = facts if facts is not None else node_facts(instance_type)
    if node is None:
        preset.notes.append(f"{instance_type}: not a known instance type; no NCCL/EFA preset "
                            "(nothing to set)")
        return preset
    if not node.efa_gpu:
        what = "no EFA" if node.efa_interfaces == 0 else "no NVIDIA GPUs"
        preset.notes.append(f"{instance_type}: no NCCL/EFA preset ({what} in the instance "
                            f"facts, source {node.source}); nothing to set")
        return preset
    if versions.ofi_nccl is None:
        preset.notes.append("aws-ofi-nccl version unknown: legacy values for plugins <= 1.6 "
                            "not considered")
    for rule in RULES:
        if rule.applies(node, versions, forking_workers):
            preset.settings.extend(s for s in rule.settings if s.name not in preset.env)
    for req in REQUIREMENTS.get(family, ()):
        have = version_tuple(getattr(versions, req.attr))
        if have is not None and have < version_tuple(req.minimum):
            preset.notes.append(f"{req.library} {'.'.join(map(str, have))} is older than "
                                f"{req.minimum}, the minimum for {family} "
                                f"({SOURCES[req.source]})")
    return preset
