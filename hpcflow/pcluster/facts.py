"""Instance facts for ``hpcflow cluster instances``: the offline table merged with the on-disk
EC2 cache, or a fresh ``DescribeInstanceTypes`` answer that also refreshes the cache."""

from __future__ import annotations

import difflib
import time

from hpcflow.aws.instances import (
    Ec2Instances,
    InstanceFacts,
    cache_path,
    make_ec2_client,
    read_cache,
    write_cache,
)
from hpcflow.errors import SpecError
from hpcflow.pcluster.catalog import FACTS_DATED, FAMILIES, Catalog


def catalog_with_cache(region: str) -> Catalog:
    """The offline table plus whatever the region's EC2 cache adds (types the table lacks)."""
    return Catalog.offline(read_cache(region))


def list_instances(family: str | None = None, *, refresh: bool = False,
                   region: str = "us-east-1", endpoint_url: str | None = None,
                   client: object | None = None) -> tuple[list[InstanceFacts], str]:
    """Facts for one family (or every training family), and a description of their source.

    Args:
        family: e.g. ``p5``; None for all.
        refresh: ask EC2 now (one paginated DescribeInstanceTypes call) and update the cache.
        region: EC2 region for ``refresh`` and the cache.
        endpoint_url: EC2 endpoint for ``refresh`` (a moto server in tests).
        client: an EC2 client to use instead of creating one.

    Raises:
        SpecError: the family is not known (names the known ones).
        hpcflow.errors.Ec2Error: ``refresh`` and the EC2 call failed.
    """
    if refresh:
        patterns = [f"{family}.*"] if family else [f"{f}.*" for f in FAMILIES]
        ec2 = Ec2Instances(client or make_ec2_client(region, endpoint_url), region)
        rows = ec2.describe(patterns)
        try:
            where = f"EC2 DescribeInstanceTypes in {region}, cached in {write_cache(region, rows)}"
        except OSError as exc:  # the answer is still good; only the cache is lost
            where = (f"EC2 DescribeInstanceTypes in {region}, NOT cached: "
                     f"{cache_path(region)}: {exc.strerror or exc} (set HPCFLOW_CACHE_DIR)")
    else:
        cached = read_cache(region)
        rows = Catalog.offline(cached).by_family(family)
        where = f"offline table shipped with hpcflow ({FACTS_DATED})"
        if cached:
            stamp = _cache_time(region)
            where += f" + EC2 cache for {region}{stamp}"
    if family is not None:
        rows = [r for r in rows if r.family == family]
    if not rows:
        known = sorted(set(FAMILIES) | {r.family for r in read_cache(region).values()})
        close = difflib.get_close_matches(family or "", known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(known)}"
        raise SpecError(f"--family: {family!r} is not known{hint}")
    return rows, where


def _cache_time(region: str) -> str:
    import json

    try:
        doc = json.loads(cache_path(region).read_text(encoding="utf-8"))
        return " (fetched " + time.strftime("%Y-%m-%d %H:%M UTC",
                                             time.gmtime(float(doc["fetched_at"]))) + ")"
    except (OSError, ValueError, KeyError, TypeError):
        return ""
