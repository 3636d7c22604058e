"""Shared storage rules: names, mount dirs, counts, and FSx for Lustre sizes and throughput.

Mirrors aws-parallelcluster 3.16.1 ``pcluster/validators/cluster_validators.py``
(SharedStorageNameValidator, SharedStorageMountDirValidator, DuplicateMountDirValidator,
NumberOfStorageValidator, ManagedFsxMultiAzValidator) and ``fsx_validators.py``
(FsxStorageCapacityValidator, FsxStorageTypeOptionsValidator, FsxPersistentOptionsValidator),
with constants from
``pcluster/constants.py``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from hpcflow.pcluster.catalog import Catalog
from hpcflow.pcluster.findings import Ctx, as_dict, queues

STORAGE_NAME_MAX = 30
# FSX_SSD_THROUGHPUT and FSX_HDD_THROUGHPUT (MB/s/TiB).
FSX_THROUGHPUT = {"PERSISTENT_1": (50, 100, 200), "PERSISTENT_2": (125, 250, 500, 1000)}
FSX_HDD_THROUGHPUT = (12, 40)
# FsxStorageCapacityValidator: PERSISTENT_1 HDD capacity steps per throughput (GiB).
FSX_HDD_CAPACITY_STEP = {12: 6000, 40: 1800}
MAX_DRA = 8  # FsxDraValidator
# MAX_NEW_STORAGE_COUNT / MAX_EXISTING_STORAGE_COUNT ("fsx" counts every FSx kind), MAX_EBS_COUNT.
MAX_NEW_FSX = 1
MAX_EXISTING_FSX = 20
MAX_NEW_EFS = 1
MAX_EBS = 5
FSX_KINDS = ("FsxLustre", "FsxOntap", "FsxOpenZfs", "FileCache")
# PCLUSTER_TAG_VALUE_REGEX: a storage name becomes a tag value.
STORAGE_NAME_RE = re.compile(r"[\w\+\-\=\.\_\:\@/]{0,256}")

# SharedStorageMountDirValidator: directories a shared storage cannot be mounted on (3.16.1).
RESERVED_MOUNT_DIRS = frozenset({
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/media", "/mnt", "/opt",
    "/opt/parallelcluster", "/opt/parallelcluster/shared",
    "/opt/parallelcluster/shared_login_nodes", "/opt/slurm", "/opt/intel", "/proc", "/root",
    "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var",  # noqa: S108 - a list of names
})

SETTINGS_KEY = {"FsxLustre": "FsxLustreSettings", "FsxOntap": "FsxOntapSettings",
                "FsxOpenZfs": "FsxOpenZfsSettings", "FileCache": "FileCacheSettings",
                "Efs": "EfsSettings", "Ebs": "EbsSettings"}


def _storages(cfg: Mapping[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    items = cfg.get("SharedStorage") or []
    return [(si, st) for si, st in enumerate(items if isinstance(items, list) else [])
            if isinstance(st, dict)]


def _is_new(st: Mapping[str, Any]) -> bool:
    settings = as_dict(st.get(SETTINGS_KEY.get(str(st.get("StorageType")), "")))
    return not any(settings.get(k) for k in ("FileSystemId", "VolumeId", "FileCacheId"))


def check_shared_storage(cfg: Mapping[str, Any], cat: Catalog, ctx: Ctx) -> None:
    """Shared storage names, mount dirs and counts."""
    storages = _storages(cfg)
    seen_dirs: dict[str, str] = {}
    for si, st in storages:
        name = st.get("Name")
        if isinstance(name, str) and not STORAGE_NAME_RE.fullmatch(name):
            ctx.add("BAD_NAME", "error", ("SharedStorage", si, "Name"), name,
                    f"{name!r} is not a valid storage name: letters, digits and + - = . _ : @ / "
                    "only (it becomes an AWS tag value)")
        if name == "":
            ctx.add("BAD_NAME", "error", ("SharedStorage", si, "Name"), name,
                    "an empty storage name; give 1-30 of letters, digits and + - = . _ : @ / "
                    "(stricter than ParallelCluster's pattern, which lets an empty name through: "
                    "the name tags the file system and identifies the storage in the "
                    "pcluster: block)")
        if isinstance(name, str) and len(name) > STORAGE_NAME_MAX:
            ctx.add("NAME_TOO_LONG", "error", ("SharedStorage", si, "Name"), name,
                    f"{name!r} has {len(name)} characters; at most {STORAGE_NAME_MAX}")
        mount = st.get("MountDir")
        if isinstance(mount, str):
            key = mount.rstrip("/") or "/"
            if ("/" + key.lstrip("/")) in RESERVED_MOUNT_DIRS:
                ctx.add("RESERVED_MOUNT_DIR", "error", ("SharedStorage", si, "MountDir"), mount,
                        f"{mount!r} is a directory the nodes' own system or ParallelCluster "
                        "uses; mount shared storage elsewhere, e.g. /fsx or /shared "
                        "(SharedStorageMountDirValidator)")
            if key in seen_dirs:
                ctx.add("DUPLICATE_MOUNT_DIR", "error", ("SharedStorage", si, "MountDir"), mount,
                        f"{mount!r} is already the mount dir of storage {seen_dirs[key]!r}; "
                        "every shared storage needs its own mount_dir")
            seen_dirs.setdefault(key, str(name))
    fsx = [(si, st) for si, st in storages if st.get("StorageType") in FSX_KINDS]
    new = [(si, st) for si, st in fsx if _is_new(st)]
    existing = len(fsx) - len(new)
    if len(new) > MAX_NEW_FSX:
        ctx.add("TOO_MANY_NEW_FSX", "error", ("SharedStorage", new[MAX_NEW_FSX][0]), len(new),
                f"{len(new)} new FSx file systems; ParallelCluster creates at most "
                f"{MAX_NEW_FSX} per cluster: mount the others by file_system_id")
    if existing > MAX_EXISTING_FSX:
        ctx.add("TOO_MANY_EXISTING_FSX", "error", ("SharedStorage",), existing,
                f"{existing} existing FSx file systems; at most {MAX_EXISTING_FSX}")
    new_efs = [si for si, st in storages if st.get("StorageType") == "Efs" and _is_new(st)]
    if len(new_efs) > MAX_NEW_EFS:
        ctx.add("TOO_MANY_NEW_EFS", "error", ("SharedStorage", new_efs[MAX_NEW_EFS]), len(new_efs),
                f"{len(new_efs)} new EFS file systems; ParallelCluster creates at most "
                f"{MAX_NEW_EFS}: mount the others by file_system_id")
    ebs = [si for si, st in storages if st.get("StorageType") == "Ebs"]
    if len(ebs) > MAX_EBS:
        ctx.add("TOO_MANY_EBS", "error", ("SharedStorage", ebs[MAX_EBS]), len(ebs),
                f"{len(ebs)} shared EBS volumes; at most {MAX_EBS}")
    subnets = sorted({sn for _, q in queues(cfg)
                      for sn in (as_dict(q.get("Networking")).get("SubnetIds") or [])
                      if isinstance(sn, str)})
    new_lustre = [si for si, st in new if st.get("StorageType") == "FsxLustre"]
    if new_lustre and len(subnets) > 1:
        ctx.add("MANAGED_FSX_MULTI_SUBNET", "error", ("SharedStorage", new_lustre[0]), subnets,
                f"a new FSx file system cannot serve queues in several subnets {subnets}; use "
                "one subnet for every queue, or mount an existing file system by file_system_id "
                "(stricter than ParallelCluster, which refuses several Availability Zones: "
                "hpcflow cannot see a subnet's zone offline)")


def check_fsx(cfg: Mapping[str, Any], cat: Catalog, ctx: Ctx) -> None:
    """FSx for Lustre capacity steps, storage type and throughput of a new file system."""
    for si, st in _storages(cfg):
        if st.get("StorageType") != "FsxLustre":
            continue
        s = as_dict(st.get("FsxLustreSettings"))
        base = ("SharedStorage", si, "FsxLustreSettings")
        if s.get("FileSystemId") or s.get("BackupId"):
            continue
        dt = s.get("DeploymentType", "SCRATCH_2")
        hdd = s.get("StorageType") == "HDD"
        cap = s.get("StorageCapacity")
        tput = s.get("PerUnitStorageThroughput")
        if hdd:
            _check_hdd(dt, cap, tput, base, ctx)
        else:
            _check_ssd(dt, cap, tput, base, ctx)
        dras = s.get("DataRepositoryAssociations") or []
        if isinstance(dras, list) and len(dras) > MAX_DRA:
            ctx.add("FSX_TOO_MANY_DRA", "error", base + ("DataRepositoryAssociations",), len(dras),
                    f"{len(dras)} data repository associations; at most {MAX_DRA} per file system")
        _check_dra_names(dras, base + ("DataRepositoryAssociations",), ctx)
        if s.get("DeletionPolicy", "Delete") == "Delete":
            ctx.add("FSX_DELETE_ON_CLUSTER_DELETE", "warning", base + ("DeletionPolicy",),
                    "Delete", "the file system and its data are deleted with the cluster; set "
                    "deletion_policy: Retain to keep them")


def _check_dra_names(dras: Any, base: tuple, ctx: Ctx) -> None:
    """Data repository association names are unique within a file system (DuplicateNameValidator
    over ``DataRepositoryAssociations[].Name``, 3.16.1 ``cluster_config.py``)."""
    seen: set[str] = set()
    for di, dra in enumerate(dras if isinstance(dras, list) else []):
        name = as_dict(dra).get("Name")
        if not isinstance(name, str):
            continue
        if name in seen:
            ctx.add("DUPLICATE_NAME", "error", base + (di, "Name"), name,
                    f"data repository association name {name!r} is used twice; names must be "
                    "unique within the file system")
        seen.add(name)


def _check_hdd(dt: Any, cap: Any, tput: Any, base: tuple, ctx: Ctx) -> None:
    if dt != "PERSISTENT_1":
        ctx.add("FSX_STORAGE_TYPE", "error", base + ("StorageType",), "HDD",
                f"HDD storage needs deployment_type PERSISTENT_1, not {dt}")
    if tput not in FSX_HDD_THROUGHPUT:
        ctx.add("FSX_THROUGHPUT", "error", base + ("PerUnitStorageThroughput",), tput,
                f"{tput} MB/s/TiB is not allowed for HDD storage; allowed: "
                f"{list(FSX_HDD_THROUGHPUT)}")
    elif isinstance(cap, int) and cap % FSX_HDD_CAPACITY_STEP[tput]:
        step = FSX_HDD_CAPACITY_STEP[tput]
        ctx.add("FSX_CAPACITY", "error", base + ("StorageCapacity",), cap,
                f"{cap} GiB is not a valid PERSISTENT_1 HDD capacity at {tput} MB/s/TiB; "
                f"allowed: a multiple of {step} GiB")


def _check_ssd(dt: Any, cap: Any, tput: Any, base: tuple, ctx: Ctx) -> None:
    if isinstance(cap, int):
        if dt == "SCRATCH_1":
            ok = cap in (1200, 2400) or cap % 3600 == 0
            allowed = "1200, 2400 or a multiple of 3600"
        else:
            ok = cap == 1200 or cap % 2400 == 0
            allowed = "1200 or a multiple of 2400"
        if not ok:
            ctx.add("FSX_CAPACITY", "error", base + ("StorageCapacity",), cap,
                    f"{cap} GiB is not a valid {dt} capacity; allowed: {allowed} GiB")
    if dt in FSX_THROUGHPUT:
        allowed_t = FSX_THROUGHPUT[dt]
        if tput is None:
            ctx.add("FSX_THROUGHPUT", "error", base + ("PerUnitStorageThroughput",), None,
                    f"{dt} needs per_unit_storage_throughput, one of {list(allowed_t)} MB/s/TiB")
        elif tput not in allowed_t:
            hdd = " (12 and 40 are for storage_type: HDD)" if tput in FSX_HDD_THROUGHPUT else ""
            ctx.add("FSX_THROUGHPUT", "error", base + ("PerUnitStorageThroughput",), tput,
                    f"{tput} MB/s/TiB is not allowed for {dt} SSD; allowed: {list(allowed_t)}"
                    f"{hdd}")
    elif tput is not None:
        ctx.add("FSX_THROUGHPUT", "error", base + ("PerUnitStorageThroughput",), tput,
                f"per_unit_storage_throughput applies to PERSISTENT_1/2 only, not {dt}")
