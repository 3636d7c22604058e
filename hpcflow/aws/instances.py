"""EC2 instance facts: what ``describe_instance_types`` says about GPUs, EFA and network cards,
and an on-disk cache of those answers with the time they were fetched.

The EC2 client is passed in (``Ec2Instances(client)``); nothing here reaches for a global client
or the network on its own. boto3 is imported only by :func:`make_ec2_client`.

Source of the response shape: EC2 API reference, DescribeInstanceTypes
(https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstanceTypes.html),
fields ``VCpuInfo.DefaultVCpus``, ``MemoryInfo.SizeInMiB``, ``GpuInfo.Gpus[]``,
``NeuronInfo.NeuronDevices[]``, ``NetworkInfo.EfaSupported``, ``NetworkInfo.MaximumNetworkCards``,
``NetworkInfo.EfaInfo.MaximumEfaInterfaces`` (boto3 1.44 / botocore 1.44 seen).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hpcflow.errors import Ec2Error
from hpcflow.fsutil import write_json_atomic

__all__ = ["Ec2Error", "Ec2Instances", "InstanceFacts", "cache_path", "facts_from_api",
           "make_ec2_client", "read_cache", "write_cache"]

CACHE_FORMAT = 1


@dataclass(frozen=True)
class InstanceFacts:
    """Facts about one EC2 instance type.

    Attributes:
        instance_type: e.g. ``p5.48xlarge``.
        vcpus: default vCPU count.
        memory_mib: instance memory in MiB.
        accelerator: accelerator model (``H100``, ``Trainium``), or ``""`` for none.
        accelerator_count: GPUs or Neuron devices per instance.
        accelerator_memory_mib: memory of one accelerator in MiB.
        efa_supported: the type supports an Elastic Fabric Adapter.
        max_network_cards: ``NetworkInfo.MaximumNetworkCards``.
        max_efa_interfaces: ``NetworkInfo.EfaInfo.MaximumEfaInterfaces`` (0 without EFA).
        source: where the figures come from (a key of the catalog's source list, or
            ``ec2:<region>@<iso time>`` for a live answer).
        figure_sources: per-figure sources that differ from ``source``.
    """

    instance_type: str
    vcpus: int
    memory_mib: int
    accelerator: str
    accelerator_count: int
    accelerator_memory_mib: int
    efa_supported: bool
    max_network_cards: int
    max_efa_interfaces: int
    source: str
    figure_sources: Mapping[str, str] = field(default_factory=dict)

    @property
    def family(self) -> str:
        """The part before the dot: ``p5`` for ``p5.48xlarge``."""
        return self.instance_type.split(".", 1)[0]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        out = asdict(self)
        out["figure_sources"] = dict(self.figure_sources)
        return out


def facts_from_api(item: Mapping[str, Any], source: str) -> InstanceFacts:
    """Turn one ``InstanceTypes[]`` entry of ``describe_instance_types`` into facts."""
    gpus = (item.get("GpuInfo") or {}).get("Gpus") or []
    neuron = (item.get("NeuronInfo") or {}).get("NeuronDevices") or []
    devices = gpus or neuron
    first = devices[0] if devices else {}
    net = item.get("NetworkInfo") or {}
    return InstanceFacts(
        instance_type=item["InstanceType"],
        vcpus=int((item.get("VCpuInfo") or {}).get("DefaultVCpus", 0)),
        memory_mib=int((item.get("MemoryInfo") or {}).get("SizeInMiB", 0)),
        accelerator=str(first.get("Name", "")),
        accelerator_count=sum(int(d.get("Count", 0)) for d in devices),
        accelerator_memory_mib=int((first.get("MemoryInfo") or {}).get("SizeInMiB", 0)),
        efa_supported=bool(net.get("EfaSupported", False)),
        max_network_cards=int(net.get("MaximumNetworkCards", 1)),
        max_efa_interfaces=int((net.get("EfaInfo") or {}).get("MaximumEfaInterfaces", 0)),
        source=source,
    )


def make_ec2_client(region: str, endpoint_url: str | None = None) -> Any:
    """Create a boto3 EC2 client (imports boto3; about 0.3 s the first time).

    Args:
        region: AWS region.
        endpoint_url: another endpoint, e.g. a moto server ``http://127.0.0.1:5000``.
    """
    import boto3
    from botocore.config import Config

    cfg = Config(retries={"max_attempts": 2, "mode": "standard"}, connect_timeout=5, read_timeout=20)
    return boto3.client("ec2", region_name=region, endpoint_url=endpoint_url, config=cfg)


class Ec2Instances:
    """Asks EC2 for instance facts through the client it is given.

    Args:
        client: a boto3 EC2 client (or anything with ``get_paginator("describe_instance_types")``).
        region: the client's region, recorded as the source of each answer.
    """

    def __init__(self, client: Any, region: str) -> None:
        self._client = client
        self._region = region

    def describe(self, patterns: Iterable[str]) -> list[InstanceFacts]:
        """Facts for every instance type matching the patterns (``p5.*``, ``g6.xlarge``).

        One paginated ``DescribeInstanceTypes`` call with an ``instance-type`` filter.

        Raises:
            Ec2Error: the call failed; the message carries the AWS error.
        """
        from botocore.exceptions import BotoCoreError, ClientError

        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        source = f"ec2:{self._region}@{stamp}"
        out: list[InstanceFacts] = []
        try:
            pages = self._client.get_paginator("describe_instance_types").paginate(
                Filters=[{"Name": "instance-type", "Values": sorted(set(patterns))}]
            )
            for page in pages:
                out.extend(facts_from_api(item, source) for item in page.get("InstanceTypes", []))
        except (BotoCoreError, ClientError) as exc:
            raise Ec2Error(f"EC2 DescribeInstanceTypes in {self._region} failed: {exc}") from None
        return sorted(out, key=lambda f: f.instance_type)


def default_cache_dir() -> Path:
    """``$HPCFLOW_CACHE_DIR``, else ``$XDG_CACHE_HOME/hpcflow``, else ``~/.cache/hpcflow``."""
    env = os.environ.get("HPCFLOW_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hpcflow"


def cache_path(region: str, cache_dir: Path | None = None) -> Path:
    """The cache file for one region."""
    return (cache_dir or default_cache_dir()) / f"ec2-instance-types-{region}.json"


def write_cache(region: str, facts: Iterable[InstanceFacts], cache_dir: Path | None = None,
                now: float | None = None) -> Path:
    """Merge ``facts`` into the region's cache file (temp file + rename) and return its path.

    The file holds ``{"format": 1, "region", "fetched_at" (Unix s), "instance_types": {...}}``.
    """
    path = cache_path(region, cache_dir)
    current = read_cache(region, cache_dir)
    merged = {f.instance_type: f.to_dict() for f in current.values()}
    merged.update({f.instance_type: f.to_dict() for f in facts})
    doc = {"format": CACHE_FORMAT, "region": region,
           "fetched_at": time.time() if now is None else now,
           "instance_types": dict(sorted(merged.items()))}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, doc)
    return path


def read_cache(region: str, cache_dir: Path | None = None,
               max_age_s: float | None = None, now: float | None = None) -> dict[str, InstanceFacts]:
    """Read the region's cache; an absent, unreadable, foreign or too old file reads as empty.

    Args:
        max_age_s: ignore the cache when ``fetched_at`` is older than this many seconds.
    """
    path = cache_path(region, cache_dir)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict) or doc.get("format") != CACHE_FORMAT:
        return {}
    fetched = doc.get("fetched_at")
    if max_age_s is not None and isinstance(fetched, (int, float)):
        if (time.time() if now is None else now) - fetched > max_age_s:
            return {}
    out: dict[str, InstanceFacts] = {}
    for name, raw in (doc.get("instance_types") or {}).items():
        try:
            out[name] = InstanceFacts(**raw)
        except TypeError:
            continue
    return out
