"""ClusterSpec storage -> ``SharedStorage[]`` entries. Pure; used by the builder.

Keys: ParallelCluster user guide, "SharedStorage section"
(https://docs.aws.amazon.com/parallelcluster/latest/ug/SharedStorage-v3.html), checked against
the aws-parallelcluster 3.16.1 schema.
"""

from __future__ import annotations

from typing import Any

from hpcflow.pcluster.findings import FieldPath
from hpcflow.spec.cluster import ClusterSpec
from hpcflow.spec.cluster_storage import EfsSpec, FsxLustreSpec, FsxVolumeSpec

# spec field -> FsxLustreSettings key, in the order they are written.
FSX_KEYS = (("storage_capacity_gib", "StorageCapacity"), ("deployment_type", "DeploymentType"),
            ("storage_type", "StorageType"), ("drive_cache_type", "DriveCacheType"),
            ("per_unit_storage_throughput", "PerUnitStorageThroughput"),
            ("compression", "DataCompressionType"), ("import_path", "ImportPath"),
            ("export_path", "ExportPath"), ("auto_import_policy", "AutoImportPolicy"),
            ("automatic_backup_retention_days", "AutomaticBackupRetentionDays"),
            ("daily_automatic_backup_start_time", "DailyAutomaticBackupStartTime"),
            ("copy_tags_to_backups", "CopyTagsToBackups"), ("deletion_policy", "DeletionPolicy"))
EFS_KEYS = (("file_system_id", "FileSystemId"), ("encrypted", "Encrypted"),
            ("performance_mode", "PerformanceMode"), ("throughput_mode", "ThroughputMode"),
            ("provisioned_throughput", "ProvisionedThroughput"),
            ("deletion_policy", "DeletionPolicy"))
EBS_KEYS = (("volume_id", "VolumeId"), ("size_gib", "Size"), ("volume_type", "VolumeType"),
            ("iops", "Iops"), ("throughput", "Throughput"), ("encrypted", "Encrypted"),
            ("snapshot_id", "SnapshotId"), ("deletion_policy", "DeletionPolicy"))
KIND = {"fsx_lustre": ("FsxLustre", "FsxLustreSettings"),
        "fsx_openzfs": ("FsxOpenZfs", "FsxOpenZfsSettings"),
        "fsx_ontap": ("FsxOntap", "FsxOntapSettings"), "efs": ("Efs", "EfsSettings"),
        "ebs": ("Ebs", "EbsSettings")}


def shared_storage(spec: ClusterSpec, src: dict[FieldPath, str]) -> list[dict[str, Any]]:
    """``SharedStorage`` for the spec: the EFS ``/home`` when asked, then ``storage`` in order."""
    out: list[dict[str, Any]] = []
    if spec.shared_home == "efs":
        src[("SharedStorage", len(out))] = "shared_home"
        out.append({"MountDir": "/home", "Name": "home", "StorageType": "Efs",
                    "EfsSettings": {"Encrypted": True, "DeletionPolicy": "Retain"}})
    for si, st in enumerate(spec.storage):
        out.append(_entry(st, ("SharedStorage", len(out)), f"storage[{si}]", src))
    return out


def _settings(st: Any, keys: tuple[tuple[str, str], ...], base: FieldPath, sp: str,
              src: dict[FieldPath, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field, key in keys:
        value = getattr(st, field)
        src[base + (key,)] = f"{sp}.{field}"
        if value is not None:
            out[key] = value
    return out


def _entry(st: Any, base: FieldPath, sp: str, src: dict[FieldPath, str]) -> dict[str, Any]:
    src[base] = sp
    src[base + ("Name",)] = sp + ".name"
    src[base + ("MountDir",)] = sp + ".mount_dir"
    storage_type, settings_key = KIND[st.type]
    sbase = base + (settings_key,)
    if isinstance(st, FsxLustreSpec):
        settings = _fsx_lustre(st, sbase, sp, src)
    elif isinstance(st, FsxVolumeSpec):
        settings = {"VolumeId": st.volume_id}
        src[sbase + ("VolumeId",)] = sp + ".volume_id"
    elif isinstance(st, EfsSpec):
        settings = _settings(st, EFS_KEYS, sbase, sp, src)
        if st.file_system_id:
            settings.pop("DeletionPolicy", None)  # applies to a file system the cluster creates
    else:
        settings = _settings(st, EBS_KEYS, sbase, sp, src)
        if st.volume_id:
            settings.pop("DeletionPolicy", None)
    out: dict[str, Any] = {"MountDir": st.mount_dir, "Name": st.name, "StorageType": storage_type}
    if settings:
        out[settings_key] = settings
    return out


def _fsx_lustre(st: FsxLustreSpec, sbase: FieldPath, sp: str, src: dict[FieldPath, str]) -> dict[str, Any]:
    if st.file_system_id:
        src[sbase + ("FileSystemId",)] = sp + ".file_system_id"
        return {"FileSystemId": st.file_system_id}
    settings = _settings(st, FSX_KEYS, sbase, sp, src)
    src[sbase + ("DataRepositoryAssociations",)] = sp + ".data_repositories"
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
    return settings
