"""Values ParallelCluster's schema takes but AWS refuses at create time, checked on the config so
that ``hpcflow cluster validate`` judges a hand-written file as the cluster spec would: the region,
S3 bucket names, the key pair name, ``ScaledownIdletime``, FSx ``StorageCapacity``, EBS volume
sizes, node counts, an empty queue list and mount directories (a ``pcluster:`` block carries any
value past the spec's fields, so the config is checked whatever wrote it).

A count is judged as the schema reads it (marshmallow's ``Integer``, not strict): ``1e20``, the
float, is 10^20 and ``"100"``, the text, is 100, so neither slips past a bound written for ints;
and ``40.5`` would be cut to 40 without a word, so a number that is not whole is refused.

Each is stricter than ParallelCluster's schema (aws-parallelcluster 3.16.1), and its message says
so and why. The bounds are the spec's (:mod:`hpcflow.spec.cluster`,
:mod:`hpcflow.spec.cluster_storage`), so a spec and a config are held to one rule.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from hpcflow.pcluster.catalog import Catalog
from hpcflow.pcluster.findings import QP, Ctx, FieldPath, as_dict, computes, queues
from hpcflow.spec.cluster import MAX_RESOURCE_NODES, MAX_SCALEDOWN_MIN
from hpcflow.spec.cluster_storage import MAX_EBS_GIB, MAX_FSX_CAPACITY_GIB
from hpcflow.spec.cluster_types import region_problem
from hpcflow.spec.messages import short_value
from hpcflow.spec.s3uri import bucket_name_problem

_STRICTER = "stricter than ParallelCluster's schema, which takes it: AWS refuses it at create time"


def check_values(cfg: Mapping[str, Any], cat: Catalog, ctx: Ctx) -> None:
    """Region, bucket names, key pair name, ScaledownIdletime and StorageCapacity (see above)."""
    region = cfg.get("Region")
    if isinstance(region, str) and (problem := region_problem(region)):
        ctx.add("UNKNOWN_REGION", "error", ("Region",), region,
                f"{short_value(region)}: {problem} ({_STRICTER})")
    key = as_dict(as_dict(cfg.get("HeadNode")).get("Ssh")).get("KeyName")
    if isinstance(key, str) and not 1 <= len(key) <= 255:
        ctx.add("BAD_KEY_NAME", "error", ("HeadNode", "Ssh", "KeyName"), key,
                f"an EC2 key pair name has 1 to 255 characters, this one {len(key)} "
                f"(EC2 CreateKeyPair, KeyName; {_STRICTER})")
    _check_buckets(cfg, ctx)
    idle = as_dict(as_dict(cfg.get("Scheduling")).get("SlurmSettings")).get("ScaledownIdletime")
    if _over(ctx, ("Scheduling", "SlurmSettings", "ScaledownIdletime"), idle, MAX_SCALEDOWN_MIN):
        ctx.add("SCALEDOWN_TOO_LONG", "error", ("Scheduling", "SlurmSettings",
                                                "ScaledownIdletime"), idle,
                f"{short_value(idle)} minutes; at most {MAX_SCALEDOWN_MIN:,} (its seconds must "
                "fit the signed 32-bit integer of Slurm's SuspendTime; stricter than "
                "ParallelCluster's schema, which has no upper bound)")
    _check_volumes(cfg, ctx)
    storages = cfg.get("SharedStorage")
    for si, st in enumerate(storages if isinstance(storages, list) else []):
        cap = as_dict(as_dict(st).get("FsxLustreSettings")).get("StorageCapacity")
        path = ("SharedStorage", si, "FsxLustreSettings", "StorageCapacity")
        if _over(ctx, path, cap, MAX_FSX_CAPACITY_GIB):
            ctx.add("FSX_CAPACITY", "error", path, cap,
                    f"{short_value(cap)} GiB; the FSx API takes at most "
                    f"{MAX_FSX_CAPACITY_GIB:,} (CreateFileSystem StorageCapacity; {_STRICTER})")
    sched = as_dict(cfg.get("Scheduling"))
    if sched.get("Scheduler", "slurm") == "slurm" and sched.get("SlurmQueues") == []:
        ctx.add("NO_QUEUES", "error", ("Scheduling", "SlurmQueues"), [],
                "an empty list: a Slurm cluster needs at least one queue (- Name: ...) to run a "
                "job (the cluster spec's queues, too; stricter than ParallelCluster's schema, "
                "which takes it)")
    for qi, q in queues(cfg):
        for ci, c in computes(q):
            for key in ("MinCount", "MaxCount"):
                path = QP(qi) + ("ComputeResources", ci, key)
                if _over(ctx, path, c.get(key), MAX_RESOURCE_NODES):
                    ctx.add("TOO_MANY_NODES", "error", path, c.get(key),
                            f"{short_value(c.get(key))} nodes; at most {MAX_RESOURCE_NODES:,} "
                            "(hpcflow's bound on one compute resource, the spec's max_nodes; "
                            "stricter than ParallelCluster's schema, which has no upper bound)")


_DIGITS_RE = re.compile(r"\s*[-+]?[0-9]+\s*")
#: Digits past any bound here: such a text is read as a number over the bound, not converted.
_MANY_DIGITS = 30


def _as_read(value: Any) -> int | float | None:
    """The number ParallelCluster's schema (marshmallow ``Integer``, not strict) takes
    ``value`` for: an int, a finite float, or a text of digits as its int; None for anything
    else (a bool, other text, NaN, an infinity: the schema itself refuses those)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str) and _DIGITS_RE.fullmatch(value):
        digits = sum(ch.isdigit() for ch in value)
        return int(value) if digits <= _MANY_DIGITS else 10**_MANY_DIGITS
    return None


def _over(ctx: Ctx, path: FieldPath, value: Any, most: int) -> bool:
    """Whether ``value``, read as the schema reads it (:func:`_as_read`), is above ``most``; a
    number that is not whole is recorded as its own error (the schema would cut it) and is not
    judged further."""
    number = _as_read(value)
    if number is None:
        return False
    if isinstance(number, float) and not number.is_integer():
        ctx.add("NOT_WHOLE", "error", path, value,
                f"{short_value(value)} is not a whole number: ParallelCluster's schema would cut "
                f"it to {int(number)} without a word (stricter than ParallelCluster's schema, "
                "which takes it)")
        return False
    return number > most


#: A mount directory as the spec's ``mount_dir`` takes it (:data:`hpcflow.spec.cluster_types.
#: MountDir`): an absolute path of letters, digits and ``_ . / -``; a newline or a space would
#: split the mount line the nodes write.
_MOUNT_DIR_RE = re.compile(r"/[A-Za-z0-9_./-]*")


def _local_storages(cfg: Mapping[str, Any]) -> list[tuple[FieldPath, dict[str, Any]]]:
    """``LocalStorage`` of the head node and of each queue's compute settings, with paths."""
    out = [(("HeadNode", "LocalStorage"),
            as_dict(as_dict(cfg.get("HeadNode")).get("LocalStorage")))]
    for qi, q in queues(cfg):
        out.append((QP(qi) + ("ComputeSettings", "LocalStorage"),
                    as_dict(as_dict(q.get("ComputeSettings")).get("LocalStorage"))))
    return out


def _check_volumes(cfg: Mapping[str, Any], ctx: Ctx) -> None:
    """EBS sizes at most :data:`~hpcflow.spec.cluster_storage.MAX_EBS_GIB` (root volumes and
    shared EBS volumes) and mount directories of the spec's form (shared storage and ephemeral
    volumes)."""
    sizes: list[tuple[FieldPath, Any]] = []
    mounts: list[tuple[FieldPath, Any]] = []
    for path, local in _local_storages(cfg):
        sizes.append((path + ("RootVolume", "Size"), as_dict(local.get("RootVolume")).get("Size")))
        mounts.append((path + ("EphemeralVolume", "MountDir"),
                       as_dict(local.get("EphemeralVolume")).get("MountDir")))
    storages = cfg.get("SharedStorage")
    for si, st in enumerate(storages if isinstance(storages, list) else []):
        sizes.append((("SharedStorage", si, "EbsSettings", "Size"),
                      as_dict(as_dict(st).get("EbsSettings")).get("Size")))
        mounts.append((("SharedStorage", si, "MountDir"), as_dict(st).get("MountDir")))
    for path, size in sizes:
        if _over(ctx, path, size, MAX_EBS_GIB):
            ctx.add("EBS_TOO_LARGE", "error", path, size,
                    f"{short_value(size)} GiB; an EBS volume has at most {MAX_EBS_GIB:,} GiB "
                    f"(64 TiB, io2 Block Express; gp3 16 TiB: Amazon EBS volume constraints; "
                    f"{_STRICTER})")
    for path, mount in mounts:
        if isinstance(mount, str) and not _MOUNT_DIR_RE.fullmatch(mount):
            ctx.add("BAD_MOUNT_DIR", "error", path, mount,
                    f"{short_value(mount)} is not an absolute path of letters, digits and "
                    "_ . / - (e.g. /fsx): a newline or a space would split the mount line the "
                    "nodes write (stricter than ParallelCluster's schema, which takes it)")


def _check_buckets(cfg: Mapping[str, Any], ctx: Ctx) -> None:
    """``Iam.S3Access[].BucketName`` of the head node and of each queue."""
    holders: list[tuple[FieldPath, Any]] = [(("HeadNode",), cfg.get("HeadNode"))]
    holders += [(QP(qi), q) for qi, q in queues(cfg)]
    for base, holder in holders:
        access = as_dict(as_dict(holder).get("Iam")).get("S3Access")
        for ai, item in enumerate(access if isinstance(access, list) else []):
            name = as_dict(item).get("BucketName")
            # ParallelCluster allows a "*" wildcard in S3Access bucket names.
            if not isinstance(name, str) or "*" in name:
                continue
            if (problem := bucket_name_problem(name)) is not None:
                ctx.add("BAD_BUCKET_NAME", "error", base + ("Iam", "S3Access", ai, "BucketName"),
                        name, f"{short_value(name)} is not a valid S3 bucket name: {problem} "
                        f"(S3 bucket naming rules; {_STRICTER})")
