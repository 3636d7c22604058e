"""Rules a ParallelCluster config must follow beyond its schema, as small functions over plain
values that return :class:`Finding` objects. All rules run; only errors stop a render.

They run on the config dict (so ``hpcflow cluster validate`` checks hand-written files too) and
report each problem under the spec field that produced it when a source map is given.

Each rule cites the ParallelCluster validator it mirrors (aws-parallelcluster 3.16.1,
``pcluster/validators/...``) or the AWS page it comes from. Where a rule is stricter than
ParallelCluster, its message says why. Storage rules live in ``rules_storage``, custom Slurm
settings in ``rules_slurm``, values AWS refuses but the schema takes in ``rules_values``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from hpcflow.pcluster.catalog import FACTS_DATED, Catalog, ec2_types
from hpcflow.pcluster.findings import (
    QP,
    Ctx,
    FieldPath,
    Finding,
    as_dict,
    computes,
    efa_on,
    instance_types,
    queues,
)
from hpcflow.pcluster.rules_slurm import check_slurm_settings
from hpcflow.pcluster.rules_storage import check_fsx, check_shared_storage
from hpcflow.pcluster.rules_values import check_values
from hpcflow.spec.messages import short_value

__all__ = ["RULES", "Ctx", "Finding", "run_rules"]

# Kept for callers that used the old private name.
_Ctx = Ctx

# pcluster/validators/cluster_validators.py: NAME_REGEX, NAME_MAX_LENGTH (queue and compute
# resource names); pcluster/constants.py: MAX_NUMBER_OF_QUEUES, MAX_COMPUTE_RESOURCES_PER_QUEUE,
# MAX_NUMBER_OF_COMPUTE_RESOURCES_PER_CLUSTER (3.16.1).
NAME_RE = re.compile(r"[a-z][a-z0-9\-]*")
NAME_MAX = 25
MAX_QUEUES = 50
MAX_CR_PER_QUEUE = 50
MAX_CR_PER_CLUSTER = 50


def check_instance_types(cfg: Mapping[str, Any], cat: Catalog, ctx: Ctx) -> None:
    """Every instance type (head node, compute resources, flexible ``Instances`` lists) must be
    a real EC2 type (an error with the nearest name otherwise); a real type hpcflow has no
    facts for is a warning that says which checks cannot run for it.

    Stricter than the schema, which takes any string: ParallelCluster's own EfaValidator and
    InstanceTypeValidator ask EC2 about each type at create time, and hpcflow decides EFA from
    the same facts offline, so an unknown type would pass here and fail there.
    """
    where: list[tuple[FieldPath, Any]] = []
    head = as_dict(cfg.get("HeadNode"))
    if "InstanceType" in head:
        where.append((("HeadNode", "InstanceType"), head.get("InstanceType")))
    for qi, q in queues(cfg):
        for ci, c in computes(q):
            for sub, it in instance_types(c):
                where.append((QP(qi) + ("ComputeResources", ci, *sub), it))
    for path, it in where:
        if not isinstance(it, str) or cat.has_facts(it):
            continue
        if cat.known(it):
            ctx.add("NO_INSTANCE_FACTS", "warning", path, it,
                    f"{it!r} is a real EC2 instance type, but hpcflow has no facts for it "
                    f"({FACTS_DATED}): its EFA support, vCPUs and GPUs are not known here, so "
                    "the EFA checks and the flexible Instances checks skip it and EFA is not "
                    "turned on by default; `hpcflow cluster instances --family "
                    f"{it.split('.', 1)[0]} --refresh` caches EC2's answer, and `hpcflow cluster "
                    "validate --deep` asks EC2")
            continue
        hint = cat.suggest(it)
        fix = f"did you mean {hint!r}?" if hint else "see `hpcflow cluster instances`"
        ctx.add("UNKNOWN_INSTANCE_TYPE", "error", path, it,
                f"{it!r} is not known; {fix} (stricter than ParallelCluster's schema, which "
                "takes any string: no EC2 instance type has this name, in botocore's list of "
                "every name EC2 accepts or in hpcflow's facts, so `pcluster create-cluster` "
                "would fail on it; a type newer than the installed botocore: `hpcflow cluster "
                "instances --family FAMILY --refresh` caches EC2's answer)")


def _placement(net: Any) -> dict[str, Any] | None:
    """A ``PlacementGroup`` mapping that says something (Enabled, Name or Id), else None:
    ParallelCluster treats an empty one as absent (``PlacementGroup.implied``)."""
    pg = as_dict(as_dict(net).get("PlacementGroup"))
    if any(pg.get(k) is not None for k in ("Enabled", "Name", "Id")):
        return pg
    return None


def check_efa(cfg: Mapping[str, Any], cat: Catalog, ctx: Ctx) -> None:
    """EFA needs a supporting type, one subnet (one AZ) and an explicit placement group.

    Mirrors ParallelCluster's EfaValidator (every type of a flexible ``Instances`` list too),
    EfaMultiAzValidator and EfaPlacementGroupValidator, where a compute resource's own
    ``Networking.PlacementGroup`` wins over the queue's (3.16.1 ``cluster_config.py``,
    ``get_chosen_placement_group_setting_for_compute_resource``).
    """
    for qi, q in queues(cfg):
        efa_crs = [(ci, c) for ci, c in computes(q) if efa_on(c)]
        for ci, c in efa_crs:
            for _sub, it in instance_types(c):
                if isinstance(it, str) and cat.efa_supported(it) is False:
                    ctx.add("EFA_UNSUPPORTED", "error", QP(qi) + ("ComputeResources", ci, "Efa"),
                            it, f"{it!r} does not support EFA; set efa: false or pick a type "
                            "with EFA (see `hpcflow cluster instances`)")
        if not efa_crs:
            continue
        net = as_dict(q.get("Networking"))
        subnets = net.get("SubnetIds") or []
        if isinstance(subnets, list) and len(subnets) > 1:
            ctx.add("EFA_MULTIPLE_SUBNETS", "error", QP(qi) + ("Networking", "SubnetIds"), subnets,
                    f"an EFA queue needs exactly one subnet (one Availability Zone), got "
                    f"{len(subnets)}; keep one, or turn EFA off on every compute resource "
                    "(stricter than ParallelCluster, which refuses several Availability Zones "
                    "(EfaMultiAzValidator): hpcflow cannot see a subnet's zone offline)")
            continue
        if net.get("SecurityGroups"):
            ctx.add("EFA_SECURITY_GROUP_UNCHECKED", "warning",
                    QP(qi) + ("Networking", "SecurityGroups"), net.get("SecurityGroups"),
                    "EFA needs a security group that allows all inbound and outbound traffic to "
                    "and from itself; these replace the group ParallelCluster would create, and "
                    "only `hpcflow cluster validate --deep` can check their rules "
                    "(EfaSecurityGroupValidator)")
        if q.get("CapacityType") == "CAPACITY_BLOCK":
            continue  # EfaPlacementGroupValidator: capacity blocks need no placement group
        _check_efa_placement(q, qi, efa_crs, ctx)


def _check_efa_placement(q: dict[str, Any], qi: int, efa_crs: list[tuple[int, dict[str, Any]]],
                         ctx: Ctx) -> None:
    queue_pg = _placement(q.get("Networking"))
    missing: list[str] = []
    off: list[tuple[FieldPath, bool]] = []
    for ci, c in efa_crs:
        own = _placement(c.get("Networking"))
        pg = own if own is not None else queue_pg
        path = (QP(qi) + ("ComputeResources", ci, "Networking", "PlacementGroup") if own is not None
                else QP(qi) + ("Networking", "PlacementGroup"))
        if pg is None:
            missing.append(str(c.get("Name")))
        elif pg.get("Enabled") is False:
            reserved = bool(q.get("CapacityReservationTarget") or c.get("CapacityReservationTarget"))
            off.append((path, reserved))
    if missing:
        ctx.add("EFA_NO_PLACEMENT_GROUP", "error", QP(qi) + ("Networking", "PlacementGroup"), None,
                f"EFA compute resources {missing} need an explicit placement group, on the queue "
                "or on the compute resource: Enabled: true, or Enabled: false for a capacity "
                "reservation with its own placement")
    for path, reserved in dict(off).items():
        if reserved:
            ctx.add("EFA_PLACEMENT_GROUP_OFF", "info", path, False,
                    "placement group off: the capacity block or reservation brings its own "
                    "placement (AWS advice for capacity blocks)")
        else:
            ctx.add("EFA_PLACEMENT_GROUP_OFF", "warning", path, False,
                    "EFA queue without a cluster placement group: expect slower collectives; "
                    "enable it unless a capacity reservation brings its own placement")


def check_placement_groups(cfg: Mapping[str, Any], cat: Catalog, ctx: Ctx) -> None:
    """Placement group naming, offline, as ParallelCluster's PlacementGroupNamingValidator
    (3.16.1 ``ec2_validators.py``) has it, on each queue's and compute resource's
    ``Networking.PlacementGroup``: ``Id`` and ``Name`` together are an ERROR, and so is a
    ``Name`` or ``Id`` with ``Enabled: false``. (Whether the group exists needs EC2: --deep.)"""
    for qi, q in queues(cfg):
        where = [(QP(qi) + ("Networking", "PlacementGroup"), q)]
        where += [(QP(qi) + ("ComputeResources", ci, "Networking", "PlacementGroup"), c)
                  for ci, c in computes(q)]
        for path, holder in where:
            pg = as_dict(as_dict(holder.get("Networking")).get("PlacementGroup"))
            name, pg_id = pg.get("Name"), pg.get("Id")
            if name and pg_id:
                ctx.add("PLACEMENT_GROUP_NAME_AND_ID", "error", path + ("Id",), pg_id,
                        f"placement group Id {pg_id!r} and Name {name!r} are both set; set one "
                        "(Id is the older spelling of Name; PlacementGroupNamingValidator)")
            if (name or pg_id) and pg.get("Enabled") is False:
                ctx.add("PLACEMENT_GROUP_NAMED_BUT_OFF", "error", path + ("Enabled",), False,
                        f"placement group {name or pg_id!r} is named but Enabled is false; remove "
                        "the Name/Id to turn placement groups off, or set Enabled: true "
                        "(PlacementGroupNamingValidator)")


def check_capacity(cfg: Mapping[str, Any], cat: Catalog, ctx: Ctx) -> None:
    """Counts and capacity blocks: MinCount <= MaxCount; capacity blocks are static
    (MinCount = MaxCount > 0) and need a reservation id (ParallelCluster user guide,
    "Capacity Blocks for ML"; ComputeResourceSizeValidator)."""
    for qi, q in queues(cfg):
        cb = q.get("CapacityType") == "CAPACITY_BLOCK"
        for ci, c in computes(q):
            base = QP(qi) + ("ComputeResources", ci)
            lo, hi = c.get("MinCount", 0), c.get("MaxCount", 10)
            if isinstance(lo, int) and isinstance(hi, int) and lo > hi:
                ctx.add("MIN_ABOVE_MAX", "error", base + ("MinCount",), lo,
                        f"min {lo} is above max {hi}; min_nodes must be <= max_nodes")
            if cb and (lo != hi or hi == 0):
                ctx.add("CAPACITY_BLOCK_NOT_STATIC", "error", base + ("MinCount",), lo,
                        f"a capacity block needs static nodes: min ({lo}) must equal max ({hi}) "
                        "and be above 0; leave min_nodes out to get max_nodes")
            if cb and not (q.get("CapacityReservationTarget") or c.get("CapacityReservationTarget")):
                ctx.add("CAPACITY_BLOCK_NO_RESERVATION", "error", QP(qi) + ("CapacityType",),
                        "CAPACITY_BLOCK", "a capacity block queue needs reservation_id: 'cr-...'")


def check_names_and_limits(cfg: Mapping[str, Any], cat: Catalog, ctx: Ctx) -> None:
    """Queue and compute resource names (NameValidator, DuplicateNameValidator) and counts
    (MaxCountValidator)."""
    qs = list(queues(cfg))
    if len(qs) > MAX_QUEUES:
        ctx.add("TOO_MANY_QUEUES", "error", ("Scheduling", "SlurmQueues"), len(qs),
                f"{len(qs)} queues; ParallelCluster allows at most {MAX_QUEUES}")
    total = sum(len(list(computes(q))) for _, q in qs)
    if total > MAX_CR_PER_CLUSTER:
        ctx.add("TOO_MANY_COMPUTE_RESOURCES", "error", ("Scheduling", "SlurmQueues"), total,
                f"{total} compute resources in the cluster; ParallelCluster allows at most "
                f"{MAX_CR_PER_CLUSTER}")
    seen_q: set[str] = set()
    for qi, q in qs:
        name = q.get("Name")
        _check_name(name, QP(qi) + ("Name",), "queue", ctx)
        if isinstance(name, str) and name in seen_q:
            ctx.add("DUPLICATE_NAME", "error", QP(qi) + ("Name",), name,
                    f"queue name {name!r} is used twice; names must be unique")
        if isinstance(name, str):
            seen_q.add(name)
        crs = list(computes(q))
        if len(crs) > MAX_CR_PER_QUEUE:
            ctx.add("TOO_MANY_COMPUTE_RESOURCES", "error", QP(qi) + ("ComputeResources",),
                    len(crs), f"{len(crs)} compute resources; at most {MAX_CR_PER_QUEUE} per queue")
        seen_c: set[str] = set()
        for ci, c in crs:
            path = QP(qi) + ("ComputeResources", ci, "Name")
            cname = c.get("Name")
            _check_name(cname, path, "compute resource", ctx)
            if isinstance(cname, str) and cname in seen_c:
                ctx.add("DUPLICATE_NAME", "error", path, cname,
                        f"compute resource name {cname!r} is used twice in this queue")
            if isinstance(cname, str):
                seen_c.add(cname)


def _check_name(name: Any, path: FieldPath, what: str, ctx: Ctx) -> None:
    if name is None:
        return  # a missing name: the schema says "Missing data for required field"
    if not isinstance(name, str):
        ctx.add("BAD_NAME", "error", path, name,
                f"{short_value(name)} is not a valid {what} name: a name is text (lowercase "
                f"letters, digits and hyphens), not a {type(name).__name__}")
        return
    if not NAME_RE.fullmatch(name):
        ctx.add("BAD_NAME", "error", path, name,
                f"{name!r} is not a valid {what} name: start with a lowercase letter, then "
                "lowercase letters, digits and hyphens only")
    if len(name) > NAME_MAX:
        ctx.add("NAME_TOO_LONG", "error", path, name,
                f"{name!r} has {len(name)} characters; a {what} name has at most {NAME_MAX}")
    if name == "default":
        ctx.add("BAD_NAME", "error", path, name, f"'default' cannot be a {what} name")


def check_mixed_types(cfg: Mapping[str, Any], cat: Catalog, ctx: Ctx) -> None:
    """Several instance types in one queue (across compute resources or inside a flexible
    ``Instances`` list): a job spanning them runs at the pace of the slowest node, since every
    all-reduce waits for it (a warning)."""
    for qi, q in queues(cfg):
        types = sorted({it for _, c in computes(q) for _, it in instance_types(c)
                        if isinstance(it, str)})
        if len(types) > 1:
            ctx.add("MIXED_INSTANCE_TYPES", "warning", QP(qi) + ("ComputeResources",), types,
                    f"queue mixes instance types {types}: a training job spread over them runs "
                    "at the slowest node's pace; use one type per training queue")


def check_flexible_instances(cfg: Mapping[str, Any], cat: Catalog, ctx: Ctx) -> None:
    """The types of a flexible ``Instances`` list must have the same vCPUs (cores when
    ``DisableSimultaneousMultithreading``), GPUs, inference accelerators and their makers
    (InstancesCPUValidator, InstancesAcceleratorsValidator)."""
    table = ec2_types()
    for qi, q in queues(cfg):
        for ci, c in computes(q):
            types = [it for _, it in instance_types(c) if isinstance(it, str)]
            if "Instances" not in c or len(types) < 2 or not all(t in table for t in types):
                continue
            smt_off = c.get("DisableSimultaneousMultithreading") is True
            checks = (("cores" if smt_off else "vcpus", "CPU cores" if smt_off else "vCPUs"),
                      ("nvidia_gpus", "GPUs"), ("gpu_maker", "GPU maker"),
                      ("aws_accelerators", "inference accelerators"),
                      ("accelerator_maker", "inference accelerator maker"))
            for attr, what in checks:
                values = {t: getattr(table[t], attr) for t in types}
                if len(set(values.values())) > 1:
                    ctx.add("FLEXIBLE_TYPES_DIFFER", "error",
                            QP(qi) + ("ComputeResources", ci, "Instances"), values,
                            f"the instance types of one compute resource must have the same "
                            f"{what}, got {values}; split them into separate compute resources")


RULES = (check_instance_types, check_efa, check_placement_groups, check_flexible_instances,
         check_capacity, check_names_and_limits,
         check_shared_storage, check_fsx, check_slurm_settings, check_mixed_types, check_values)


def run_rules(cfg: Mapping[str, Any], catalog: Catalog | None = None,
              sources: Mapping[FieldPath, str] | None = None) -> list[Finding]:
    """Run every rule on a config and return all findings, errors first.

    Args:
        cfg: a ParallelCluster config dict (built or loaded from YAML).
        catalog: instance facts; the offline table when None.
        sources: config path -> spec path, from :func:`hpcflow.pcluster.builder.build_with_sources`.
    """
    ctx = Ctx(sources)
    cat = catalog or Catalog.offline()
    for rule in RULES:
        rule(cfg, cat, ctx)
    order = {"error": 0, "warning": 1, "info": 2}
    return sorted(ctx.findings, key=lambda f: order[f.level])
