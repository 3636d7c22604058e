"""ClusterSpec -> ParallelCluster v3 config dict. Pure: no I/O, no AWS, no pcluster import.

Keys and their meaning: ParallelCluster user guide, "Cluster configuration file"
(https://docs.aws.amazon.com/parallelcluster/latest/ug/cluster-configuration-file-v3.html),
checked against the aws-parallelcluster 3.16.1 ``ClusterSchema``.

Defaults chosen for GPU training (DESIGN.md §5):

- EFA is on for every compute resource whose instance type supports it (catalog facts).
- An EFA queue always has an explicit ``Networking.PlacementGroup``: enabled, except on capacity
  blocks and capacity reservations, which bring their own placement (AWS advice; ParallelCluster's
  ``EfaPlacementGroupValidator`` accepts ``Enabled: false`` there).
- Capacity-block compute resources are static: ``MinCount`` defaults to ``MaxCount``.
- ``Efa.GdrSupport`` is never written: it has had no effect since ParallelCluster 3.0.2.
- FSx ``DeletionPolicy`` defaults to Retain (ParallelCluster's default, Delete, loses the data).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hpcflow.pcluster.catalog import Catalog
from hpcflow.spec.cluster import ClusterSpec, ComputeSpec, QueueSpec, ScriptSpec, StorageSpec

Path = tuple[str | int, ...]

CAPACITY_TYPES = {"ondemand": "ONDEMAND", "spot": "SPOT", "capacity_block": "CAPACITY_BLOCK"}


@dataclass
class Rendered:
    """A built config and where each part came from.

    Attributes:
        config: the ParallelCluster config as plain dicts and lists.
        sources: config path (tuple of keys and indexes) -> spec field path; used to report a
            problem found in the config under the spec field the user wrote.
    """

    config: dict[str, Any]
    sources: dict[Path, str] = field(default_factory=dict)


def compute_name(compute: ComputeSpec) -> str:
    """The compute resource name: given, or the instance type with dots as dashes."""
    return compute.name or compute.instance_type.replace(".", "-")


def efa_enabled(compute: ComputeSpec, catalog: Catalog) -> bool:
    """EFA for a compute resource: the spec's choice, else what the instance type supports."""
    if compute.efa is not None:
        return compute.efa
    return bool(catalog.efa_supported(compute.instance_type))


def min_nodes(queue: QueueSpec, compute: ComputeSpec) -> int:
    """MinCount: the spec's value, else MaxCount on a capacity block (static), else 0."""
    if compute.min_nodes is not None:
        return compute.min_nodes
    return compute.max_nodes if queue.capacity_type == "capacity_block" else 0


def build_cluster_config(spec: ClusterSpec, catalog: Catalog | None = None) -> dict[str, Any]:
    """Build the ParallelCluster v3 config for ``spec``.

    Args:
        spec: the validated cluster spec.
        catalog: instance facts for the EFA default; the shipped offline table when None.

    Returns:
        The config as plain dicts, keys in the order the ParallelCluster docs use.
    """
    return build_with_sources(spec, catalog).config


def build_with_sources(spec: ClusterSpec, catalog: Catalog | None = None) -> Rendered:
    """Like :func:`build_cluster_config`, also returning the config-path -> spec-path map."""
    cat = catalog or Catalog.offline()
    src: dict[Path, str] = {}
    cfg: dict[str, Any] = {"Region": spec.region}
    src[("Region",)] = "region"
    image: dict[str, Any] = {"Os": spec.os}
    src[("Image", "Os")] = "os"
    if spec.custom_ami:
        image["CustomAmi"] = spec.custom_ami
        src[("Image", "CustomAmi")] = "custom_ami"
    cfg["Image"] = image
    cfg["Imds"] = {"ImdsSupport": "v2.0" if spec.imds_v2_only else "v1.0"}
    src[("Imds",)] = "imds_v2_only"
    cfg["HeadNode"] = _head_node(spec, src)
    slurm_settings: dict[str, Any] = {
        "ScaledownIdletime": spec.slurm.scaledown_idletime_min,
        "QueueUpdateStrategy": spec.slurm.queue_update_strategy,
    }
    src[("Scheduling", "SlurmSettings", "ScaledownIdletime")] = "slurm.scaledown_idletime_min"
    src[("Scheduling", "SlurmSettings", "QueueUpdateStrategy")] = "slurm.queue_update_strategy"
    if spec.slurm.custom_settings:
        slurm_settings["CustomSlurmSettings"] = _custom_settings(
            spec.slurm.custom_settings, ("Scheduling", "SlurmSettings"), "slurm.custom_settings", src)
    queues = [_queue(spec, q, i, cat, src) for i, q in enumerate(spec.queues)]
    src[("Scheduling", "SlurmQueues")] = "queues"
    cfg["Scheduling"] = {"Scheduler": "slurm", "SlurmSettings": slurm_settings,
                         "SlurmQueues": queues}
    shared = _shared_storage(spec, src)
    if shared:
        cfg["SharedStorage"] = shared
    mon = spec.monitoring
    cfg["Monitoring"] = {
        "DetailedMonitoring": mon.detailed_monitoring,
        "Logs": {"CloudWatch": {"Enabled": mon.logs, "RetentionInDays": mon.log_retention_days}},
        "Dashboards": {"CloudWatch": {"Enabled": mon.dashboard}},
    }
    src[("Monitoring",)] = "monitoring"
    src[("Monitoring", "DetailedMonitoring")] = "monitoring.detailed_monitoring"
    src[("Monitoring", "Logs", "CloudWatch", "Enabled")] = "monitoring.logs"
    src[("Monitoring", "Logs", "CloudWatch", "RetentionInDays")] = "monitoring.log_retention_days"
    src[("Monitoring", "Dashboards")] = "monitoring.dashboard"
    return Rendered(cfg, src)


def _head_node(spec: ClusterSpec, src: dict[Path, str]) -> dict[str, Any]:
    hn = spec.head_node
    out: dict[str, Any] = {"InstanceType": hn.instance_type,
                           "Networking": {"SubnetId": hn.subnet_id}}
    src[("HeadNode", "InstanceType")] = "head_node.instance_type"
    src[("HeadNode", "Networking", "SubnetId")] = "head_node.subnet_id"
    if hn.ssh_key:
        out["Ssh"] = {"KeyName": hn.ssh_key}
        src[("HeadNode", "Ssh")] = "head_node.ssh_key"
    if hn.root_volume_gib:
        out["LocalStorage"] = {"RootVolume": {"Size": hn.root_volume_gib}}
        src[("HeadNode", "LocalStorage")] = "head_node.root_volume_gib"
    if spec.s3_access:
        out["Iam"] = {"S3Access": _s3_access(spec)}
        src[("HeadNode", "Iam")] = "s3_access"
    if spec.bootstrap.head_node:
        actions = _custom_actions(spec, ("HeadNode", "CustomActions"), src)
        if actions:
            out["CustomActions"] = actions
    return out


def _queue(spec: ClusterSpec, q: QueueSpec, qi: int, cat: Catalog,
           src: dict[Path, str]) -> dict[str, Any]:
    base: Path = ("Scheduling", "SlurmQueues", qi)
    sp = f"queues[{qi}]"
    src[base] = sp
    out: dict[str, Any] = {"Name": q.name, "CapacityType": CAPACITY_TYPES[q.capacity_type]}
    src[base + ("Name",)] = sp + ".name"
    src[base + ("CapacityType",)] = sp + ".capacity_type"
    if q.reservation_id:
        out["CapacityReservationTarget"] = {"CapacityReservationId": q.reservation_id}
        src[base + ("CapacityReservationTarget",)] = sp + ".reservation_id"
    any_efa = any(efa_enabled(c, cat) for c in q.compute)
    networking: dict[str, Any] = {"SubnetIds": list(q.subnet_ids)}
    src[base + ("Networking", "SubnetIds")] = sp + ".subnet_ids"
    pg = q.placement_group
    if pg is None and any_efa:
        pg = not (q.capacity_type == "capacity_block" or q.reservation_id)
    if pg is not None:
        networking["PlacementGroup"] = {"Enabled": pg}
        if pg and q.placement_group_name:
            networking["PlacementGroup"]["Name"] = q.placement_group_name
        src[base + ("Networking", "PlacementGroup")] = sp + ".placement_group"
    out["Networking"] = networking
    exclusive = q.job_exclusive_allocation
    out["JobExclusiveAllocation"] = (spec.slurm.job_exclusive_allocation if exclusive is None
                                     else exclusive)
    src[base + ("JobExclusiveAllocation",)] = (sp + ".job_exclusive_allocation"
                                               if exclusive is not None
                                               else "slurm.job_exclusive_allocation")
    if q.custom_slurm_settings:
        out["CustomSlurmSettings"] = _custom_mapping(
            q.custom_slurm_settings, base, sp + ".custom_slurm_settings", src)
    out["ComputeResources"] = [_compute(q, c, ci, base, sp, cat, src)
                               for ci, c in enumerate(q.compute)]
    src[base + ("ComputeResources",)] = sp + ".compute"
    actions = _custom_actions(spec, base + ("CustomActions",), src)
    if actions:
        out["CustomActions"] = actions
    if spec.s3_access:
        out["Iam"] = {"S3Access": _s3_access(spec)}
        src[base + ("Iam",)] = "s3_access"
    return out


def _compute(q: QueueSpec, c: ComputeSpec, ci: int, qbase: Path, qsp: str, cat: Catalog,
             src: dict[Path, str]) -> dict[str, Any]:
    base = qbase + ("ComputeResources", ci)
    sp = f"{qsp}.compute[{ci}]"
    src[base] = sp
    min_src = "min_nodes" if c.min_nodes is not None or q.capacity_type != "capacity_block" \
        else "max_nodes"
    for key, field_name in (("Name", "name"), ("InstanceType", "instance_type"),
                            ("MinCount", min_src), ("MaxCount", "max_nodes"), ("Efa", "efa"),
                            ("CapacityReservationTarget", "reservation_id")):
        src[base + (key,)] = f"{sp}.{field_name}"
    if c.name is None:
        src[base + ("Name",)] = f"{sp}.instance_type"
    out: dict[str, Any] = {
        "Name": compute_name(c),
        "InstanceType": c.instance_type,
        "MinCount": min_nodes(q, c),
        "MaxCount": c.max_nodes,
        "Efa": {"Enabled": efa_enabled(c, cat)},
    }
    if c.reservation_id:
        out["CapacityReservationTarget"] = {"CapacityReservationId": c.reservation_id}
    if c.custom_slurm_settings:
        out["CustomSlurmSettings"] = _custom_mapping(
            c.custom_slurm_settings, base, sp + ".custom_slurm_settings", src)
    return out


def _custom_mapping(settings: dict[str, Any], base: Path, sp: str,
                    src: dict[Path, str]) -> dict[str, Any]:
    """A queue's or compute resource's settings: one mapping (aws-parallelcluster 3.16.1
    ``SlurmQueueSchema.custom_slurm_settings`` is a ``fields.Dict``)."""
    for key in settings:
        src[base + ("CustomSlurmSettings", key)] = f"{sp}.{key}"
    return dict(settings)


def _custom_settings(settings: dict[str, Any], base: Path, sp: str,
                     src: dict[Path, str]) -> list[dict[str, Any]]:
    """Cluster-level settings: one single-key mapping per setting, in the spec's order
    (``SlurmSettings.CustomSlurmSettings`` is a list of mappings)."""
    out = []
    for i, (key, value) in enumerate(settings.items()):
        out.append({key: value})
        src[base + ("CustomSlurmSettings", i)] = f"{sp}.{key}"
    return out


def _scripts(scripts: list[ScriptSpec]) -> dict[str, Any]:
    seq = []
    for s in scripts:
        item: dict[str, Any] = {"Script": s.script}
        if s.args:
            item["Args"] = list(s.args)
        seq.append(item)
    return {"Sequence": seq}


def _custom_actions(spec: ClusterSpec, base: Path, src: dict[Path, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if spec.bootstrap.on_node_start:
        out["OnNodeStart"] = _scripts(spec.bootstrap.on_node_start)
        src[base + ("OnNodeStart",)] = "bootstrap.on_node_start"
    if spec.bootstrap.on_node_configured:
        out["OnNodeConfigured"] = _scripts(spec.bootstrap.on_node_configured)
        src[base + ("OnNodeConfigured",)] = "bootstrap.on_node_configured"
    return out


def _s3_access(spec: ClusterSpec) -> list[dict[str, Any]]:
    return [{"BucketName": a.bucket, "EnableWriteAccess": a.write} for a in spec.s3_access]


def _shared_storage(spec: ClusterSpec, src: dict[Path, str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if spec.shared_home == "efs":
        src[("SharedStorage", len(out))] = "shared_home"
        out.append({"MountDir": "/home", "Name": "home", "StorageType": "Efs",
                    "EfsSettings": {"Encrypted": True, "DeletionPolicy": "Retain"}})
    for si, st in enumerate(spec.storage):
        idx = len(out)
        out.append(_fsx(st, ("SharedStorage", idx), f"storage[{si}]", src))
    return out


def _fsx(st: StorageSpec, base: Path, sp: str, src: dict[Path, str]) -> dict[str, Any]:
    src[base] = sp
    src[base + ("Name",)] = sp + ".name"
    src[base + ("MountDir",)] = sp + ".mount_dir"
    settings: dict[str, Any] = {}
    sbase = base + ("FsxLustreSettings",)
    if st.file_system_id:
        settings["FileSystemId"] = st.file_system_id
        src[sbase + ("FileSystemId",)] = sp + ".file_system_id"
    else:
        settings["StorageCapacity"] = st.storage_capacity_gib
        settings["DeploymentType"] = st.deployment_type
        if st.per_unit_storage_throughput is not None:
            settings["PerUnitStorageThroughput"] = st.per_unit_storage_throughput
        if st.compression:
            settings["DataCompressionType"] = st.compression
        settings["DeletionPolicy"] = st.deletion_policy
        for key, name in (("StorageCapacity", "storage_capacity_gib"),
                          ("DeploymentType", "deployment_type"),
                          ("PerUnitStorageThroughput", "per_unit_storage_throughput"),
                          ("DataCompressionType", "compression"),
                          ("DeletionPolicy", "deletion_policy"),
                          ("DataRepositoryAssociations", "data_repositories")):
            src[sbase + (key,)] = f"{sp}.{name}"
        if st.data_repositories:
            dras = []
            for di, d in enumerate(st.data_repositories):
                dras.append({"Name": d.name, "BatchImportMetaDataOnCreate": d.import_metadata,
                             "DataRepositoryPath": d.s3_path, "FileSystemPath": d.fs_path})
                dsp = f"{sp}.data_repositories[{di}]"
                dbase = sbase + ("DataRepositoryAssociations", di)
                src[dbase] = dsp
                for key, name in (("Name", "name"), ("DataRepositoryPath", "s3_path"),
                                  ("FileSystemPath", "fs_path"),
                                  ("BatchImportMetaDataOnCreate", "import_metadata")):
                    src[dbase + (key,)] = f"{dsp}.{name}"
            settings["DataRepositoryAssociations"] = dras
    return {"MountDir": st.mount_dir, "Name": st.name, "StorageType": "FsxLustre",
            "FsxLustreSettings": settings}
