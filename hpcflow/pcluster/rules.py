"""Rules a ParallelCluster config must follow beyond its schema, as small functions over plain
values that return :class:`Finding` objects. All rules run; only errors stop a render.

They run on the config dict (so ``hpcflow cluster validate`` checks hand-written files too) and
report each problem under the spec field that produced it when a source map is given.

Each rule cites the ParallelCluster validator it mirrors (aws-parallelcluster 3.16.1,
``pcluster/validators/...``) or the AWS page it comes from.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from hpcflow.pcluster.catalog import Catalog
from hpcflow.spec.loading import format_loc

Level = Literal["error", "warning", "info"]
Path = tuple[str | int, ...]

# pcluster/validators/cluster_validators.py: NAME_REGEX, NAME_MAX_LENGTH (queue and compute
# resource names), SHARED_STORAGE_NAME_MAX_LENGTH; pcluster/constants.py: MAX_NUMBER_OF_QUEUES,
# MAX_COMPUTE_RESOURCES_PER_QUEUE, MAX_NUMBER_OF_COMPUTE_RESOURCES_PER_CLUSTER (3.16.1).
NAME_RE = re.compile(r"^[a-z][a-z0-9\-]*$")
NAME_MAX = 25
STORAGE_NAME_MAX = 30
MAX_QUEUES = 50
MAX_CR_PER_QUEUE = 50
MAX_CR_PER_CLUSTER = 50

# pcluster/constants.py FSX_SSD_THROUGHPUT (MB/s/TiB), and FsxStorageCapacityValidator.
FSX_THROUGHPUT = {"PERSISTENT_1": (50, 100, 200), "PERSISTENT_2": (125, 250, 500, 1000)}
MAX_DRA = 8  # FsxDraValidator
# pcluster/constants.py MAX_NEW_STORAGE_COUNT / MAX_EXISTING_STORAGE_COUNT and PCLUSTER_TAG_VALUE_REGEX
# (SharedStorageNameValidator: the name becomes a tag value), 3.16.1.
MAX_NEW_FSX = 1
MAX_EXISTING_FSX = 20
STORAGE_NAME_RE = re.compile(r"^([\w\+\-\=\.\_\:\@/]{0,256})$")

# pcluster/validators/slurm_settings_validator.py SLURM_SETTINGS_DENY_LIST (3.16.1), lowercase.
DENY_SLURMCONF = frozenset({
    "epilog", "grestypes", "launchparameters", "prolog", "reconfigflags", "resumefailprogram",
    "resumeprogram", "resumetimeout", "slurmctldhost", "slurmctldlogfile", "slurmctldparameters",
    "slurmdlogfile", "slurmuser", "suspendexcnodes", "suspendprogram", "suspendtime",
    "taskplugin", "treewidth", "accountingstoragetype", "accountingstoragehost",
    "accountingstorageport", "accountingstorageuser", "jobacctgathertype",
})
DENY_QUEUE = frozenset({"nodes", "partitionname", "resumetimeout", "state", "suspendtime",
                        "oversubscribe"})
DENY_COMPUTE = frozenset({"cpus", "gres", "nodeaddr", "nodehostname", "nodename", "state",
                          "weight"})


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


class _Ctx:
    """Collects findings and turns config paths into spec paths."""

    def __init__(self, sources: Mapping[Path, str] | None) -> None:
        self.sources = sources or {}
        self.findings: list[Finding] = []

    def where(self, path: Path) -> str:
        if not self.sources:
            return format_loc(path)
        for n in range(len(path), 0, -1):
            hit = self.sources.get(path[:n])
            if hit is not None:
                return hit
        return format_loc(path)

    def add(self, code: str, level: Level, path: Path, value: Any, message: str) -> None:
        self.findings.append(Finding(code, level, self.where(path), value, message))


def _queues(cfg: Mapping[str, Any]) -> Iterator[tuple[int, dict[str, Any]]]:
    queues = (cfg.get("Scheduling") or {}).get("SlurmQueues") or []
    for qi, q in enumerate(queues):
        if isinstance(q, dict):
            yield qi, q


def _computes(q: Mapping[str, Any]) -> Iterator[tuple[int, dict[str, Any]]]:
    for ci, c in enumerate(q.get("ComputeResources") or []):
        if isinstance(c, dict):
            yield ci, c


def _efa_on(c: Mapping[str, Any]) -> bool:
    return bool((c.get("Efa") or {}).get("Enabled"))


QP: Callable[[int], Path] = lambda qi: ("Scheduling", "SlurmQueues", qi)  # noqa: E731


def check_instance_types(cfg: Mapping[str, Any], cat: Catalog, ctx: _Ctx) -> None:
    """Unknown sizes of known families are errors with a suggestion; unknown families warn."""
    for qi, q in _queues(cfg):
        for ci, c in _computes(q):
            it = c.get("InstanceType")
            path = QP(qi) + ("ComputeResources", ci, "InstanceType")
            if not isinstance(it, str) or cat.get(it):
                continue
            if cat.family_known(it):
                hint = cat.suggest(it)
                fix = f"did you mean {hint!r}?" if hint else "see `hpcflow cluster instances`"
                ctx.add("UNKNOWN_INSTANCE_TYPE", "error", path, it, f"{it!r} is not known; {fix}")
            else:
                ctx.add("NO_INSTANCE_FACTS", "warning", path, it,
                        f"no facts for {it!r} (not in the offline table or the EC2 cache): EFA "
                        "support is not checked; run `hpcflow cluster instances --refresh` or "
                        "`hpcflow cluster validate --deep`")


def check_efa(cfg: Mapping[str, Any], cat: Catalog, ctx: _Ctx) -> None:
    """EFA needs a supporting type, one subnet (one AZ) and an explicit placement group.

    Mirrors ParallelCluster's EfaValidator, EfaMultiAzValidator and EfaPlacementGroupValidator.
    """
    for qi, q in _queues(cfg):
        efa_crs = [(ci, c) for ci, c in _computes(q) if _efa_on(c)]
        for ci, c in efa_crs:
            facts = cat.get(str(c.get("InstanceType")))
            if facts is not None and not facts.efa_supported:
                ctx.add("EFA_UNSUPPORTED", "error", QP(qi) + ("ComputeResources", ci, "Efa"),
                        c.get("InstanceType"),
                        f"{c.get('InstanceType')!r} does not support EFA; set efa: false or pick "
                        "a type with EFA (see `hpcflow cluster instances`)")
        if not efa_crs:
            continue
        net = q.get("Networking") or {}
        subnets = net.get("SubnetIds") or []
        if len(subnets) > 1:
            ctx.add("EFA_MULTIPLE_SUBNETS", "error", QP(qi) + ("Networking", "SubnetIds"), subnets,
                    f"an EFA queue needs exactly one subnet (one Availability Zone), got "
                    f"{len(subnets)}; keep one, or turn EFA off on every compute resource")
        if net.get("SecurityGroups"):
            ctx.add("EFA_SECURITY_GROUP_UNCHECKED", "warning",
                    QP(qi) + ("Networking", "SecurityGroups"), net.get("SecurityGroups"),
                    "EFA needs a security group that allows all inbound and outbound traffic to "
                    "and from itself; these replace the group ParallelCluster would create, and "
                    "only `hpcflow cluster validate --deep` can check their rules "
                    "(EfaSecurityGroupValidator)")
        cb = q.get("CapacityType") == "CAPACITY_BLOCK"
        reserved = cb or bool(q.get("CapacityReservationTarget")) or any(
            c.get("CapacityReservationTarget") for _, c in efa_crs)
        pg = net.get("PlacementGroup")
        pg_path = QP(qi) + ("Networking", "PlacementGroup")
        if pg is None and not cb:
            ctx.add("EFA_NO_PLACEMENT_GROUP", "error", pg_path, None,
                    "an EFA queue needs an explicit placement group: Enabled: true, or "
                    "Enabled: false for a capacity reservation with its own placement")
        elif isinstance(pg, dict) and pg.get("Enabled") is False:
            if reserved:
                ctx.add("EFA_PLACEMENT_GROUP_OFF", "info", pg_path, False,
                        "placement group off: the capacity block or reservation brings its own "
                        "placement (AWS advice for capacity blocks)")
            else:
                ctx.add("EFA_PLACEMENT_GROUP_OFF", "warning", pg_path, False,
                        "EFA queue without a cluster placement group: expect slower collectives; "
                        "enable it unless a capacity reservation brings its own placement")


def check_capacity(cfg: Mapping[str, Any], cat: Catalog, ctx: _Ctx) -> None:
    """Counts and capacity blocks: MinCount <= MaxCount; capacity blocks are static
    (MinCount = MaxCount > 0) and need a reservation id (ParallelCluster user guide,
    "Capacity Blocks for ML")."""
    for qi, q in _queues(cfg):
        cb = q.get("CapacityType") == "CAPACITY_BLOCK"
        for ci, c in _computes(q):
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


def check_names_and_limits(cfg: Mapping[str, Any], cat: Catalog, ctx: _Ctx) -> None:
    """Queue and compute resource names (NameValidator, DuplicateNameValidator) and counts
    (MaxCountValidator)."""
    queues = list(_queues(cfg))
    if len(queues) > MAX_QUEUES:
        ctx.add("TOO_MANY_QUEUES", "error", ("Scheduling", "SlurmQueues"), len(queues),
                f"{len(queues)} queues; ParallelCluster allows at most {MAX_QUEUES}")
    total = sum(len(list(_computes(q))) for _, q in queues)
    if total > MAX_CR_PER_CLUSTER:
        ctx.add("TOO_MANY_COMPUTE_RESOURCES", "error", ("Scheduling", "SlurmQueues"), total,
                f"{total} compute resources in the cluster; ParallelCluster allows at most "
                f"{MAX_CR_PER_CLUSTER}")
    seen_q: set[str] = set()
    for qi, q in queues:
        _check_name(q.get("Name"), QP(qi) + ("Name",), "queue", ctx)
        if q.get("Name") in seen_q:
            ctx.add("DUPLICATE_NAME", "error", QP(qi) + ("Name",), q.get("Name"),
                    f"queue name {q.get('Name')!r} is used twice; names must be unique")
        seen_q.add(q.get("Name"))
        crs = list(_computes(q))
        if len(crs) > MAX_CR_PER_QUEUE:
            ctx.add("TOO_MANY_COMPUTE_RESOURCES", "error", QP(qi) + ("ComputeResources",),
                    len(crs), f"{len(crs)} compute resources; at most {MAX_CR_PER_QUEUE} per queue")
        seen_c: set[str] = set()
        for ci, c in crs:
            path = QP(qi) + ("ComputeResources", ci, "Name")
            _check_name(c.get("Name"), path, "compute resource", ctx)
            if c.get("Name") in seen_c:
                ctx.add("DUPLICATE_NAME", "error", path, c.get("Name"),
                        f"compute resource name {c.get('Name')!r} is used twice in this queue")
            seen_c.add(c.get("Name"))


def check_shared_storage(cfg: Mapping[str, Any], cat: Catalog, ctx: _Ctx) -> None:
    """Shared storage names, mount dirs and counts (SharedStorageNameValidator,
    DuplicateMountDirValidator, NumberOfStorageValidator, ManagedFsxMultiAzValidator)."""
    storages = [(si, st) for si, st in enumerate(cfg.get("SharedStorage") or [])
                if isinstance(st, dict)]
    seen_dirs: dict[str, str] = {}
    for si, st in storages:
        name = st.get("Name")
        if isinstance(name, str) and not STORAGE_NAME_RE.match(name):
            ctx.add("BAD_NAME", "error", ("SharedStorage", si, "Name"), name,
                    f"{name!r} is not a valid storage name: letters, digits and + - = . _ : @ / "
                    "only (it becomes an AWS tag value)")
        if isinstance(name, str) and len(name) > STORAGE_NAME_MAX:
            ctx.add("NAME_TOO_LONG", "error", ("SharedStorage", si, "Name"), name,
                    f"{name!r} has {len(name)} characters; at most {STORAGE_NAME_MAX}")
        mount = st.get("MountDir")
        if isinstance(mount, str):
            key = mount.rstrip("/") or "/"
            if key in seen_dirs:
                ctx.add("DUPLICATE_MOUNT_DIR", "error", ("SharedStorage", si, "MountDir"), mount,
                        f"{mount!r} is already the mount dir of storage {seen_dirs[key]!r}; "
                        "every shared storage needs its own mount_dir")
            seen_dirs.setdefault(key, str(name))
    fsx = [(si, st) for si, st in storages if st.get("StorageType") == "FsxLustre"]
    new = [(si, st) for si, st in fsx if not (st.get("FsxLustreSettings") or {}).get("FileSystemId")]
    existing = len(fsx) - len(new)
    if len(new) > MAX_NEW_FSX:
        si = new[MAX_NEW_FSX][0]
        ctx.add("TOO_MANY_NEW_FSX", "error", ("SharedStorage", si), len(new),
                f"{len(new)} new FSx for Lustre file systems; ParallelCluster creates at most "
                f"{MAX_NEW_FSX} per cluster: mount the others by file_system_id")
    if existing > MAX_EXISTING_FSX:
        ctx.add("TOO_MANY_EXISTING_FSX", "error", ("SharedStorage",), existing,
                f"{existing} existing FSx for Lustre file systems; at most {MAX_EXISTING_FSX}")
    subnets = sorted({sn for _, q in _queues(cfg)
                      for sn in ((q.get("Networking") or {}).get("SubnetIds") or [])
                      if isinstance(sn, str)})
    if new and len(subnets) > 1:
        ctx.add("MANAGED_FSX_MULTI_SUBNET", "error", ("SharedStorage", new[0][0]), subnets,
                f"a new FSx file system cannot serve queues in several subnets {subnets}; use "
                "one subnet for every queue, or mount an existing file system by file_system_id")


def _check_name(name: Any, path: Path, what: str, ctx: _Ctx) -> None:
    if not isinstance(name, str):
        return
    if not NAME_RE.match(name):
        ctx.add("BAD_NAME", "error", path, name,
                f"{name!r} is not a valid {what} name: start with a lowercase letter, then "
                "lowercase letters, digits and hyphens only")
    if len(name) > NAME_MAX:
        ctx.add("NAME_TOO_LONG", "error", path, name,
                f"{name!r} has {len(name)} characters; a {what} name has at most {NAME_MAX}")
    if name == "default":
        ctx.add("BAD_NAME", "error", path, name, f"'default' cannot be a {what} name")


def check_fsx(cfg: Mapping[str, Any], cat: Catalog, ctx: _Ctx) -> None:
    """FSx for Lustre sizes and throughput (FsxStorageCapacityValidator,
    FsxStorageTypeOptionsValidator, FsxPersistentOptionsValidator, FsxDraValidator)."""
    for si, st in enumerate(cfg.get("SharedStorage") or []):
        if not isinstance(st, dict) or st.get("StorageType") != "FsxLustre":
            continue
        s = st.get("FsxLustreSettings") or {}
        base = ("SharedStorage", si, "FsxLustreSettings")
        if s.get("FileSystemId"):
            continue
        dt = s.get("DeploymentType", "SCRATCH_2")
        cap = s.get("StorageCapacity")
        tput = s.get("PerUnitStorageThroughput")
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
                ctx.add("FSX_THROUGHPUT", "error", base + ("PerUnitStorageThroughput",), tput,
                        f"{tput} MB/s/TiB is not allowed for {dt}; allowed: {list(allowed_t)}")
        elif tput is not None:
            ctx.add("FSX_THROUGHPUT", "error", base + ("PerUnitStorageThroughput",), tput,
                    f"per_unit_storage_throughput applies to PERSISTENT_1/2 only, not {dt}")
        dras = s.get("DataRepositoryAssociations") or []
        if len(dras) > MAX_DRA:
            ctx.add("FSX_TOO_MANY_DRA", "error", base + ("DataRepositoryAssociations",), len(dras),
                    f"{len(dras)} data repository associations; at most {MAX_DRA} per file system")
        if s.get("DeletionPolicy", "Delete") == "Delete":
            ctx.add("FSX_DELETE_ON_CLUSTER_DELETE", "warning", base + ("DeletionPolicy",),
                    "Delete", "the file system and its data are deleted with the cluster; set "
                    "deletion_policy: Retain to keep them")


def check_slurm_settings(cfg: Mapping[str, Any], cat: Catalog, ctx: _Ctx) -> None:
    """Custom Slurm settings that ParallelCluster manages itself are refused
    (CustomSlurmSettingsValidator): hooks go into /opt/slurm/etc/scripts/prolog.d/ instead."""
    sched = cfg.get("Scheduling") or {}
    levels: list[tuple[Path, Any, frozenset[str]]] = [
        (("Scheduling", "SlurmSettings"), (sched.get("SlurmSettings") or {}), DENY_SLURMCONF)]
    for qi, q in _queues(cfg):
        levels.append((QP(qi), q, DENY_QUEUE))
        for ci, c in _computes(q):
            levels.append((QP(qi) + ("ComputeResources", ci), c, DENY_COMPUTE))
    for base, holder, deny in levels:
        for i, item in enumerate(holder.get("CustomSlurmSettings") or []):
            for key in (item or {}):
                if str(key).lower() in deny:
                    hint = (" (put prolog/epilog hooks in /opt/slurm/etc/scripts/prolog.d/ "
                            "through a bootstrap script)" if str(key).lower() in
                            ("prolog", "epilog") else "")
                    ctx.add("SLURM_SETTING_FORBIDDEN", "error",
                            base + ("CustomSlurmSettings", i), key,
                            f"{key!r} is managed by ParallelCluster and cannot be set here{hint}")


def check_mixed_types(cfg: Mapping[str, Any], cat: Catalog, ctx: _Ctx) -> None:
    """Several instance types in one queue: a job spanning them runs at the pace of the slowest
    node, since every all-reduce waits for it (a warning)."""
    for qi, q in _queues(cfg):
        types = sorted({str(c.get("InstanceType")) for _, c in _computes(q)})
        if len(types) > 1:
            ctx.add("MIXED_INSTANCE_TYPES", "warning", QP(qi) + ("ComputeResources",), types,
                    f"queue mixes instance types {types}: a training job spread over them runs "
                    "at the slowest node's pace; use one type per training queue")


RULES = (check_instance_types, check_efa, check_capacity, check_names_and_limits,
         check_shared_storage, check_fsx, check_slurm_settings, check_mixed_types)


def run_rules(cfg: Mapping[str, Any], catalog: Catalog | None = None,
              sources: Mapping[Path, str] | None = None) -> list[Finding]:
    """Run every rule on a config and return all findings, errors first.

    Args:
        cfg: a ParallelCluster config dict (built or loaded from YAML).
        catalog: instance facts; the offline table when None.
        sources: config path -> spec path, from :func:`hpcflow.pcluster.builder.build_with_sources`.
    """
    ctx = _Ctx(sources)
    cat = catalog or Catalog.offline()
    for rule in RULES:
        rule(cfg, cat, ctx)
    order = {"error": 0, "warning": 1, "info": 2}
    return sorted(ctx.findings, key=lambda f: order[f.level])
