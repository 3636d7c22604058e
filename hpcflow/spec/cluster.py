"""ClusterSpec: the short YAML a cluster admin writes; ``hpcflow cluster render`` turns it into a
ParallelCluster v3 config (``hpcflow.pcluster.builder``).

This module only checks *shape*: unknown keys, wrong types, values outside an enum, id patterns.
ParallelCluster's semantic rules (EFA support, FSx sizes, name rules, ...) live in
``hpcflow.pcluster.rules`` so they can also check hand-written configs.

Field names follow the ParallelCluster vocabulary in snake_case, with units in the name
(``storage_capacity_gib``, ``scaledown_idletime_min``). Reference for every ParallelCluster key:
https://docs.aws.amazon.com/parallelcluster/latest/ug/cluster-configuration-file-v3.html
(checked against aws-parallelcluster 3.16.1).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from hpcflow.errors import SpecError
from hpcflow.spec.loading import apply_overrides, load_yaml_bounded, validate_model


def _matching(pattern: str, what: str, example: str) -> AfterValidator:
    """A validator that refuses a string not matching ``pattern`` with a message saying what is
    expected (pydantic's own says only "String should match pattern '^...$'")."""
    compiled = re.compile(pattern)

    def check(value: str) -> str:
        # fullmatch: with re.match, a ``$`` also matches before a trailing newline.
        if compiled.fullmatch(value):
            return value
        hint = ""
        if value != value.lower() and compiled.fullmatch(value.lower()):
            hint = f"; did you mean {value.lower()!r}?"
        elif value != value.strip() and compiled.fullmatch(value.strip()):
            hint = f"; did you mean {value.strip()!r}?"
        raise ValueError(f"not {what}: expected e.g. {example!r}{hint}")

    return AfterValidator(check)


# Patterns as in aws-parallelcluster 3.16.1 pcluster/schemas/cluster_schema.py (SubnetId,
# FileSystemId) and the EC2 id formats.
SubnetId = Annotated[str, _matching(r"^subnet-[0-9a-z]+$", "a subnet id",
                                    "subnet-0a1b2c3d4e5f60718")]
InstanceType = Annotated[str, _matching(r"^[a-z][a-z0-9-]*\.[a-z0-9-]+$",
                                        "an EC2 instance type (lowercase family.size)",
                                        "p5.48xlarge")]
ScriptUrl = Annotated[str, _matching(r"^(s3|https)://\S+$", "an s3:// or https:// script URL",
                                     "s3://my-bucket/bootstrap/10-efa.sh")]
S3Path = Annotated[str, _matching(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/\S*)?$",
                                  "an S3 path (s3://bucket/prefix, lowercase bucket name)",
                                  "s3://my-bucket/datasets")]
BucketName = Annotated[str, _matching(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$",
                                      "an S3 bucket name (3-63 lowercase letters, digits, dots, "
                                      "hyphens; no s3:// prefix)", "my-checkpoints")]
MountDir = Annotated[str, _matching(r"^/[A-Za-z0-9_./-]*$", "an absolute path", "/fsx")]
ReservationId = Annotated[str, _matching(r"^cr-[0-9a-f]+$", "a capacity reservation id",
                                         "cr-0123456789abcdef0")]
FileSystemId = Annotated[str, _matching(r"^fs-[0-9a-z]{17}$",
                                        "an FSx file system id (fs- and 17 characters)",
                                        "fs-0123456789abcdef0")]
AmiId = Annotated[str, _matching(r"^ami-[0-9a-z]+$", "an AMI id", "ami-0123456789abcdef0")]
Region = Annotated[str, _matching(r"^[a-z]{2}(-gov)?-[a-z]+-\d$", "an AWS region", "us-east-1")]
# pcluster/constants.py PCLUSTER_NAME_REGEX with PCLUSTER_NAME_MAX_LENGTH 60 (3.16.1).
ClusterName = Annotated[str, _matching(r"^[a-zA-Z][a-zA-Z0-9-]{0,59}$",
                                       "a cluster name (a letter, then letters, digits and "
                                       "hyphens; at most 60 characters)", "train-p5")]

# ParallelCluster 3.16.1 Image.Os choices (ClusterSchema error text, seen with 3.16.1).
OS_CHOICES = ("alinux2023", "ubuntu2204", "ubuntu2404", "rhel8", "rocky8", "rhel9", "rocky9")
Os = Literal["alinux2023", "ubuntu2204", "ubuntu2404", "rhel8", "rocky8", "rhel9", "rocky9"]


# A slurm.conf value: one scalar. Lists and mappings are refused here (ParallelCluster's schema
# takes any value and writes its text form into slurm.conf).
SlurmValue = bool | int | float | str


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class HeadNodeSpec(_Model):
    """The head node (slurmctld, the login point)."""

    instance_type: InstanceType = "m5.2xlarge"
    """EC2 instance type of the head node."""
    subnet_id: SubnetId
    """Subnet of the head node (``HeadNode.Networking.SubnetId``)."""
    ssh_key: str | None = None
    """EC2 key pair name for SSH (``HeadNode.Ssh.KeyName``); omit to use SSM only."""
    root_volume_gib: int | None = Field(default=None, ge=35, le=16384)
    """Root volume size in GiB (``LocalStorage.RootVolume.Size``); ParallelCluster's default if unset."""


class ComputeSpec(_Model):
    """One compute resource: a set of identical nodes inside a queue."""

    name: str | None = None
    """Compute resource name; defaults to the instance type with dots turned into dashes."""
    instance_type: InstanceType
    """EC2 instance type of the nodes, e.g. ``p5.48xlarge``."""
    min_nodes: int | None = Field(default=None, ge=0)
    """Static nodes that always run (``MinCount``); default 0, or ``max_nodes`` on a capacity
    block (capacity blocks need static nodes)."""
    max_nodes: int = Field(ge=1)
    """Most nodes this resource scales to (``MaxCount``)."""
    efa: bool | None = None
    """Attach EFA; default: on when the instance type supports it."""
    reservation_id: ReservationId | None = None
    """Capacity reservation for this resource only (overrides the queue's)."""
    custom_slurm_settings: dict[str, SlurmValue] = Field(default_factory=dict)
    """Extra slurm.conf node parameters for these nodes (e.g. ``Features``)."""

    @model_validator(mode="after")
    def _min_within_max(self) -> ComputeSpec:
        if self.min_nodes is not None and self.min_nodes > self.max_nodes:
            raise ValueError(f"min_nodes ({self.min_nodes}) is above max_nodes "
                             f"({self.max_nodes}); min_nodes must be <= max_nodes")
        return self


class QueueSpec(_Model):
    """One Slurm partition (a ParallelCluster SlurmQueue)."""

    name: str
    """Queue (partition) name: lowercase letters, digits and hyphens, at most 25 characters."""
    capacity_type: Literal["ondemand", "spot", "capacity_block"] = "ondemand"
    """How the nodes are bought: on-demand, spot, or an EC2 Capacity Block for ML."""
    reservation_id: ReservationId | None = None
    """Capacity reservation id (``cr-...``); required for ``capacity_block``."""
    subnet_ids: list[SubnetId] = Field(min_length=1)
    """Subnets of the queue; EFA queues need exactly one."""
    placement_group: bool | None = None
    """Cluster placement group; default: on for EFA queues, off (with a note) for reservations."""
    placement_group_name: str | None = None
    """Use this existing placement group instead of one ParallelCluster creates."""
    job_exclusive_allocation: bool | None = None
    """One job per node; default: ``slurm.job_exclusive_allocation``."""
    custom_slurm_settings: dict[str, SlurmValue] = Field(default_factory=dict)
    """Extra slurm.conf partition parameters for this queue."""
    compute: list[ComputeSpec] = Field(min_length=1)
    """The compute resources of the queue."""


class DataRepositorySpec(_Model):
    """An FSx for Lustre data repository association with an S3 path."""

    name: str
    """Association name (``DataRepositoryAssociations[].Name``)."""
    s3_path: S3Path
    """The S3 path, e.g. ``s3://my-bucket/datasets``."""
    fs_path: MountDir
    """Path inside the file system the S3 path appears at, e.g. ``/datasets``."""
    import_metadata: bool = True
    """Import the S3 object listing when the file system is created."""


class StorageSpec(_Model):
    """An FSx for Lustre file system: a new one (capacity, type, ...) or an existing one by id."""

    name: str
    """Storage name (``SharedStorage[].Name``)."""
    mount_dir: MountDir = "/fsx"
    """Where every node mounts it."""
    file_system_id: FileSystemId | None = None
    """Mount this existing file system; the settings below must then be left out."""
    storage_capacity_gib: int | None = Field(default=None, ge=1)
    """Capacity in GiB: 1200 or a multiple of 2400 (SCRATCH_2, PERSISTENT_1/2)."""
    deployment_type: Literal["SCRATCH_1", "SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2"] = (
        "PERSISTENT_2"
    )
    """FSx for Lustre deployment type."""
    per_unit_storage_throughput: int | None = None
    """MB/s per TiB; PERSISTENT_2: 125/250/500/1000, PERSISTENT_1: 50/100/200."""
    compression: Literal["LZ4"] | None = None
    """Data compression (``DataCompressionType``)."""
    deletion_policy: Literal["Retain", "Delete"] = "Retain"
    """What happens to the file system when the cluster is deleted (ParallelCluster's default is
    Delete; hpcflow keeps the data unless told otherwise)."""
    data_repositories: list[DataRepositorySpec] = Field(default_factory=list)
    """S3 data repository associations (at most 8)."""

    @model_validator(mode="after")
    def _existing_or_new(self) -> StorageSpec:
        if self.file_system_id is None and self.storage_capacity_gib is None:
            raise ValueError("set storage_capacity_gib for a new file system, or file_system_id")
        if self.file_system_id is not None:
            given = [f for f in ("storage_capacity_gib", "per_unit_storage_throughput",
                                 "compression") if getattr(self, f) is not None]
            if self.data_repositories:
                given.append("data_repositories")
            if given:
                raise ValueError(f"file_system_id mounts an existing file system; remove {given}")
        return self


class ScriptSpec(_Model):
    """One custom action script, run as root on each node."""

    script: ScriptUrl
    """``s3://`` or ``https://`` URL of the script."""
    args: list[str] = Field(default_factory=list)
    """Arguments passed to the script."""


class BootstrapSpec(_Model):
    """Node bootstrap scripts (ParallelCluster custom actions), run in the order listed."""

    on_node_start: list[ScriptSpec] = Field(default_factory=list)
    """Before the node is configured (``OnNodeStart``)."""
    on_node_configured: list[ScriptSpec] = Field(default_factory=list)
    """After ParallelCluster has configured the node (``OnNodeConfigured``)."""
    head_node: bool = False
    """Also run the scripts on the head node."""


class SlurmSpec(_Model):
    """Slurm settings of the whole cluster."""

    scaledown_idletime_min: int = Field(default=10, ge=-1)
    """Minutes an idle dynamic node waits before it is stopped (-1: never)."""
    queue_update_strategy: Literal["COMPUTE_FLEET_STOP", "DRAIN", "TERMINATE"] = (
        "COMPUTE_FLEET_STOP"
    )
    """How a queue update treats running nodes; COMPUTE_FLEET_STOP never kills a running job."""
    job_exclusive_allocation: bool = True
    """Default for every queue: one job per node (training jobs want whole nodes)."""
    custom_settings: dict[str, SlurmValue] = Field(default_factory=dict)
    """Extra slurm.conf parameters; those ParallelCluster manages are refused."""


class S3AccessSpec(_Model):
    """S3 access granted to the nodes' IAM role."""

    bucket: BucketName
    """Bucket name, e.g. the checkpoint bucket."""
    write: bool = True
    """Allow writes (checkpoints need them)."""


class MonitoringSpec(_Model):
    """CloudWatch logs and dashboard."""

    logs: bool = True
    """Send node logs to CloudWatch Logs."""
    log_retention_days: int = Field(default=14, ge=1)
    """Days CloudWatch keeps the logs."""
    dashboard: bool = True
    """Create the CloudWatch dashboard."""
    detailed_monitoring: bool = False
    """EC2 detailed (1-minute) monitoring."""


class ClusterSpec(_Model):
    """A cluster for training: head node, queues, shared storage and bootstrap."""

    name: ClusterName = "hpcflow"
    """Cluster name (used when validating; ``pcluster create-cluster`` takes it again)."""
    region: Region
    """AWS region, e.g. ``us-east-1``."""
    os: Os = "alinux2023"
    """Node operating system (``Image.Os``)."""
    custom_ami: AmiId | None = None
    """Custom AMI for every node (``Image.CustomAmi``)."""
    head_node: HeadNodeSpec
    """The head node."""
    shared_home: Literal["head_node", "efs"] = "head_node"
    """Where ``/home`` lives: exported by the head node (ParallelCluster's default) or on EFS."""
    queues: list[QueueSpec] = Field(min_length=1)
    """Slurm queues (partitions)."""
    storage: list[StorageSpec] = Field(default_factory=list)
    """FSx for Lustre file systems."""
    bootstrap: BootstrapSpec = Field(default_factory=BootstrapSpec)
    """Node bootstrap scripts."""
    slurm: SlurmSpec = Field(default_factory=SlurmSpec)
    """Slurm settings."""
    s3_access: list[S3AccessSpec] = Field(default_factory=list)
    """Buckets the nodes may read (and write), e.g. the checkpoint bucket."""
    imds_v2_only: bool = True
    """Require IMDSv2 tokens on every node (``Imds.ImdsSupport: v2.0``)."""
    monitoring: MonitoringSpec = Field(default_factory=MonitoringSpec)
    """CloudWatch monitoring."""


def load_cluster_spec(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> ClusterSpec:
    """Read a cluster spec YAML file, apply ``--set`` overrides, and validate its shape.

    Raises:
        SpecError: the file cannot be read, or a field is unknown, of the wrong type or not
            allowed; one line per problem naming the field path.
    """
    if Path(path).is_dir():
        raise SpecError(f"{path}: is a directory; give the spec file, e.g. cluster.spec.yaml")
    data = load_yaml_file(path)
    if not data and not overrides:
        raise SpecError(f"{path}: the file is empty; a cluster spec needs at least region, "
                        "head_node and queues (see docs/admin-guide.md, step 3)")
    if overrides:
        data = apply_overrides(data, overrides)
    return validate_model(ClusterSpec, data, str(path))


# A real cluster config or spec is a few thousand YAML values (50 queues x 50 compute resources
# at most); the bound only stops alias bombs (``hpcflow.spec.loading.load_yaml_bounded``).
MAX_YAML_NODES = 200_000


def load_yaml_file(path: str | Path) -> dict[str, Any]:
    """Read a cluster spec or ParallelCluster YAML file whose top level must be a mapping, with
    aliases bounded to :data:`MAX_YAML_NODES` expanded values.

    Raises:
        SpecError: the file is missing, unreadable, not YAML, expands past the bound, or is not
            a mapping; the message names the file.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"{p}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{p}: cannot read: {exc}") from None
    data = load_yaml_bounded(text, max_nodes=MAX_YAML_NODES, source=str(p))
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SpecError(f"{p}: the top level must be a mapping of fields, got {type(data).__name__}")
    return data
