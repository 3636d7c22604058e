"""Shared storage in the cluster spec: FSx for Lustre (new or existing), existing FSx for
OpenZFS and ONTAP volumes, EFS and EBS. ``type`` picks the kind (default ``fsx_lustre``).

Keys and allowed values: ParallelCluster user guide, "SharedStorage section"
(https://docs.aws.amazon.com/parallelcluster/latest/ug/SharedStorage-v3.html), checked against
the aws-parallelcluster 3.16.1 schema. ``deletion_policy`` defaults to Retain (ParallelCluster's
default, Delete, loses the data with the cluster); ``deletion_policy: null`` leaves the key out.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator

from hpcflow.spec.cluster_types import (
    EbsVolumeId,
    FileSystemId,
    FsxVolumeId,
    MountDir,
    S3Path,
    SnapshotId,
    TimeOfDay,
)
from hpcflow.spec.numbers import bounded_int

#: The FSx API's bound on ``StorageCapacity`` (CreateFileSystem, "Valid Range: Minimum value of 0.
#: Maximum value of 2147483647"), in GiB.
MAX_FSX_CAPACITY_GIB = 2**31 - 1
#: EBS's largest volume, 64 TiB (io2 Block Express; gp3 has 16 TiB), in GiB.
MAX_EBS_GIB = 65536
#: EBS's highest provisioned IOPS (io2 Block Express: 256,000) and gp3 throughput (2,000 MiB/s).
MAX_EBS_IOPS = 256_000
MAX_EBS_THROUGHPUT = 2000


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _name() -> Any:
    return Field(description="Storage name (``SharedStorage[].Name``): letters, digits and "
                             "+ - = . _ : @ /, at most 30 characters.")


class DataRepositorySpec(_Model):
    """An FSx for Lustre data repository association with an S3 path."""

    name: str = Field(description="Association name (``DataRepositoryAssociations[].Name``).")
    s3_path: S3Path = Field(description="The S3 path, e.g. ``s3://my-bucket/datasets``.")
    fs_path: MountDir = Field(description="Path inside the file system the S3 path appears at, "
                                          "e.g. ``/datasets``.")
    import_metadata: bool = Field(True, description="Import the S3 object listing when the "
                                                    "file system is created.")


class FsxLustreSpec(_Model):
    """An FSx for Lustre file system: a new one (capacity, type, ...) or an existing one by id."""

    type: Literal["fsx_lustre"] = Field("fsx_lustre", description="Storage kind.")
    name: str = _name()
    mount_dir: MountDir = Field("/fsx", description="Where every node mounts it.")
    file_system_id: FileSystemId | None = Field(
        None, description="Mount this existing file system; the settings below must then be "
                          "left out.")
    storage_capacity_gib: bounded_int(1, MAX_FSX_CAPACITY_GIB) | None = Field(  # type: ignore[valid-type]
        None, description="Capacity in GiB: 1200 or a multiple of 2400 (SSD); HDD: a "
                                "multiple of 6000 (12 MB/s/TiB) or 1800 (40 MB/s/TiB).")
    deployment_type: Literal["SCRATCH_1", "SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2"] = Field(
        "PERSISTENT_2", description="FSx for Lustre deployment type.")
    storage_type: Literal["SSD", "HDD"] | None = Field(
        None, description="Disk type (``StorageType``); HDD needs PERSISTENT_1.")
    drive_cache_type: Literal["READ"] | None = Field(
        None, description="SSD read cache of an HDD file system (``DriveCacheType``).")
    per_unit_storage_throughput: bounded_int(1, 1000) | None = Field(  # type: ignore[valid-type]
        None, description="MB/s per TiB; PERSISTENT_2: 125/250/500/1000, PERSISTENT_1 SSD: "
                          "50/100/200, HDD: 12/40.")
    compression: Literal["LZ4"] | None = Field(
        None, description="Data compression (``DataCompressionType``).")
    import_path: S3Path | None = Field(
        None, description="S3 path linked at creation (``ImportPath``), older than data "
                          "repositories.")
    export_path: S3Path | None = Field(None, description="S3 export path (``ExportPath``).")
    auto_import_policy: Literal["NEW", "NEW_CHANGED", "NEW_CHANGED_DELETED"] | None = Field(
        None, description="Keep the listing in sync with the import path (``AutoImportPolicy``).")
    automatic_backup_retention_days: bounded_int(0, 90) | None = Field(  # type: ignore[valid-type]
        None, description="Days automatic backups are kept (PERSISTENT only).")
    daily_automatic_backup_start_time: TimeOfDay | None = Field(
        None, description="Daily backup time, HH:MM UTC.")
    copy_tags_to_backups: bool | None = Field(None, description="Copy tags to backups.")
    deletion_policy: Literal["Retain", "Delete"] | None = Field(
        "Retain", description="What happens to the file system when the cluster is deleted "
                              "(ParallelCluster's default is Delete; null leaves the key out).")
    data_repositories: list[DataRepositorySpec] = Field(
        default_factory=list, description="S3 data repository associations (at most 8).")

    @model_validator(mode="after")
    def _existing_or_new(self) -> FsxLustreSpec:
        if self.file_system_id is None and self.storage_capacity_gib is None:
            raise ValueError("set storage_capacity_gib for a new file system, or file_system_id")
        if self.file_system_id is not None:
            given = [f for f in ("storage_capacity_gib", "per_unit_storage_throughput",
                                 "compression", "storage_type", "drive_cache_type",
                                 "import_path", "export_path", "auto_import_policy",
                                 "automatic_backup_retention_days",
                                 "daily_automatic_backup_start_time", "copy_tags_to_backups")
                     if getattr(self, f) is not None]
            if self.data_repositories:
                given.append("data_repositories")
            if given:
                raise ValueError(f"file_system_id mounts an existing file system; remove {given}")
        return self


class FsxVolumeSpec(_Model):
    """An existing FSx for OpenZFS or ONTAP volume, mounted by id (ParallelCluster does not
    create these). Its file system's security group must let the nodes in: add it to
    ``head_node.additional_security_groups`` and each queue's."""

    type: Literal["fsx_openzfs", "fsx_ontap"] = Field(description="Storage kind.")
    name: str = _name()
    mount_dir: MountDir = Field(description="Where every node mounts it.")
    volume_id: FsxVolumeId = Field(description="The volume (``fsvol-...``).")


class EfsSpec(_Model):
    """An EFS file system: a new one or an existing one by id."""

    type: Literal["efs"] = Field(description="Storage kind.")
    name: str = _name()
    mount_dir: MountDir = Field(description="Where every node mounts it.")
    file_system_id: FileSystemId | None = Field(None, description="Mount this existing one.")
    encrypted: bool | None = Field(None, description="Encrypt a new file system at rest.")
    performance_mode: Literal["generalPurpose", "maxIO"] | None = Field(
        None, description="EFS performance mode.")
    throughput_mode: Literal["bursting", "provisioned"] | None = Field(
        None, description="EFS throughput mode.")
    provisioned_throughput: bounded_int(1, 1024) | None = Field(  # type: ignore[valid-type]
        None, description="MiB/s with throughput_mode provisioned.")
    deletion_policy: Literal["Retain", "Delete"] | None = Field(
        "Retain", description="What happens to a new file system when the cluster is deleted "
                              "(null leaves the key out: ParallelCluster's Delete).")


class EbsSpec(_Model):
    """An EBS volume shared from the head node: a new one or an existing one by id."""

    type: Literal["ebs"] = Field(description="Storage kind.")
    name: str = _name()
    mount_dir: MountDir = Field(description="Where every node mounts it.")
    volume_id: EbsVolumeId | None = Field(None, description="Mount this existing volume.")
    size_gib: bounded_int(1, MAX_EBS_GIB) | None = Field(  # type: ignore[valid-type]
        None, description="Size of a new volume in GiB.")
    volume_type: Literal["gp2", "gp3", "io1", "io2", "sc1", "st1", "standard"] | None = Field(
        None, description="EBS volume type.")
    iops: bounded_int(1, MAX_EBS_IOPS) | None = Field(  # type: ignore[valid-type]
        None, description="Provisioned IOPS (io1, io2, gp3).")
    throughput: bounded_int(1, MAX_EBS_THROUGHPUT) | None = Field(  # type: ignore[valid-type]
        None, description="MiB/s (gp3).")
    encrypted: bool | None = Field(None, description="Encrypt the volume.")
    snapshot_id: SnapshotId | None = Field(None, description="Create the volume from a snapshot.")
    deletion_policy: Literal["Retain", "Delete", "Snapshot"] | None = Field(
        "Retain", description="What happens to a new volume when the cluster is deleted "
                              "(null leaves the key out: ParallelCluster's Delete).")


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("type", "fsx_lustre"))
    return str(getattr(value, "type", "fsx_lustre"))


StorageSpec = Annotated[
    Annotated[FsxLustreSpec, Tag("fsx_lustre")] | Annotated[FsxVolumeSpec, Tag("fsx_openzfs")]
    | Annotated[FsxVolumeSpec, Tag("fsx_ontap")] | Annotated[EfsSpec, Tag("efs")]
    | Annotated[EbsSpec, Tag("ebs")],
    Discriminator(_kind, custom_error_type="storage_type",
                  custom_error_message="type must be one of fsx_lustre (the default), "
                                       "fsx_openzfs, fsx_ontap, efs, ebs"),
]
STORAGE_TAGS = frozenset({"fsx_lustre", "fsx_openzfs", "fsx_ontap", "efs", "ebs"})
STORAGE_MODELS: tuple[type[BaseModel], ...] = (FsxLustreSpec, FsxVolumeSpec, EfsSpec, EbsSpec)
