"""ClusterSpec: the short YAML a cluster admin writes; ``hpcflow cluster render`` turns it into a
ParallelCluster v3 config (``hpcflow.pcluster.builder``).

This module only checks *shape*: unknown keys, wrong types, values outside an enum, id patterns;
reading a spec file is :mod:`hpcflow.spec.cluster_loading`.
ParallelCluster's semantic rules (EFA support, FSx sizes, name rules, ...) live in
``hpcflow.pcluster.rules`` so they can also check hand-written configs.

Field names follow the ParallelCluster vocabulary in snake_case, with units in the name
(``storage_capacity_gib``, ``scaledown_idletime_min``). Reference for every ParallelCluster key:
https://docs.aws.amazon.com/parallelcluster/latest/ug/cluster-configuration-file-v3.html
(checked against aws-parallelcluster 3.16.1).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hpcflow.spec.cluster_hyperpod import HyperPodSpec
from hpcflow.spec.cluster_storage import StorageSpec
from hpcflow.spec.cluster_types import (
    AmiId,
    BucketName,
    ClusterName,
    InstanceType,
    PolicyArn,
    Region,
    ReservationId,
    ResourceGroupArn,
    ScriptUrl,
    SecurityGroupId,
    SlurmValue,
    SshKeyName,
    SubnetId,
)
from hpcflow.spec.numbers import bounded_int

# ParallelCluster 3.16.1 Image.Os choices (ClusterSchema error text, seen with 3.16.1).
OS_CHOICES = ("alinux2023", "ubuntu2204", "ubuntu2404", "rhel8", "rocky8", "rhel9", "rocky9")
Os = Literal["alinux2023", "ubuntu2204", "ubuntu2404", "rhel8", "rocky8", "rhel9", "rocky9"]


#: hpcflow's bound on one compute resource's node count: far above any real queue, and it keeps
#: node counts and cost figures finite (a 400-digit count used to reach ``MaxCount``).
MAX_RESOURCE_NODES = 100_000
#: EBS root volume sizes in GiB (ParallelCluster's minimum 35, EBS's largest gp3 volume 16 TiB).
RootVolumeGib = bounded_int(35, 16384)
NodeCount = bounded_int(0, MAX_RESOURCE_NODES)
#: ``ScaledownIdletime`` in minutes: -1 (never) up to the most minutes whose seconds still fit a
#: signed 32-bit integer, the width of Slurm's time settings (slurm.conf(5) ``SuspendTime``).
MAX_SCALEDOWN_MIN = (2**31 - 1) // 60
#: CloudWatch Logs' longest retention, 10 years (PutRetentionPolicy ``retentionInDays``).
MAX_LOG_RETENTION_DAYS = 3653
MaxNodes = bounded_int(1, MAX_RESOURCE_NODES)
ScaledownMin = bounded_int(-1, MAX_SCALEDOWN_MIN)
RetentionDays = bounded_int(1, MAX_LOG_RETENTION_DAYS)

def _placement_group_rule(enabled: bool | None, name: str | None) -> None:
    """ParallelCluster's PlacementGroupNamingValidator (3.16.1 ``ec2_validators.py``): a named
    placement group must not be disabled."""
    if enabled is False and name:
        raise ValueError(f"placement_group: false with placement_group_name {name!r}: a named "
                         "placement group must be enabled (ParallelCluster's "
                         "PlacementGroupNamingValidator); remove the name, or set "
                         "placement_group: true")


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ScriptSpec(_Model):
    """One custom action script, run as root on each node."""

    script: ScriptUrl = Field(description="``s3://`` or ``https://`` URL of the script.")
    args: list[str] = Field(default_factory=list, description="Arguments passed to the script.")


class QueueActionsSpec(_Model):
    """Custom action scripts of one queue's nodes, run after the cluster-wide ``bootstrap``
    scripts of the same event."""

    on_node_start: list[ScriptSpec] = Field(
        default_factory=list, description="Before the node is configured (``OnNodeStart``).")
    on_node_configured: list[ScriptSpec] = Field(
        default_factory=list, description="After ParallelCluster has configured the node "
                                          "(``OnNodeConfigured``).")


class HeadActionsSpec(QueueActionsSpec):
    """Custom action scripts of the head node only."""

    on_node_updated: list[ScriptSpec] = Field(
        default_factory=list, description="After a cluster update (``OnNodeUpdated``).")


class HeadNodeSpec(_Model):
    """The head node (slurmctld, the login point)."""

    instance_type: InstanceType = Field("m5.2xlarge",
                                        description="EC2 instance type of the head node.")
    subnet_id: SubnetId = Field(description="Subnet of the head node "
                                            "(``HeadNode.Networking.SubnetId``).")
    ssh_key: SshKeyName | None = Field(None, description="EC2 key pair name for SSH "
                                                  "(``HeadNode.Ssh.KeyName``); omit to use SSM "
                                                  "only.")
    root_volume_gib: RootVolumeGib | None = Field(
        None, description="Root volume size in GiB "
                                           "(``LocalStorage.RootVolume.Size``); ParallelCluster's "
                                           "default if unset.")
    imds_secured: bool | None = Field(
        None, description="Only root and the cluster admin may reach the instance metadata "
                          "service (``HeadNode.Imds.Secured``; ParallelCluster's default: true).")
    security_groups: list[SecurityGroupId] = Field(
        default_factory=list, description="Security groups instead of the one ParallelCluster "
                                          "creates (``Networking.SecurityGroups``).")
    additional_security_groups: list[SecurityGroupId] = Field(
        default_factory=list, description="Extra security groups, e.g. an existing file "
                                          "system's (``Networking.AdditionalSecurityGroups``).")
    additional_iam_policies: list[PolicyArn] = Field(
        default_factory=list, description="IAM policy ARNs added to the head node's role "
                                          "(``Iam.AdditionalIamPolicies``).")
    custom_actions: HeadActionsSpec = Field(
        default_factory=HeadActionsSpec, description="Scripts for the head node only, after "
                                                     "``bootstrap`` when it runs there.")


class ComputeSpec(_Model):
    """One compute resource: a set of identical nodes inside a queue."""

    name: str | None = Field(None, description="Compute resource name; defaults to the (first) "
                                               "instance type with dots turned into dashes.")
    instance_type: InstanceType | None = Field(
        None, description="EC2 instance type of the nodes, e.g. ``p5.48xlarge``.")
    instances: list[InstanceType] = Field(
        default_factory=list, description="Several instance types for one resource (flexible "
                                          "``Instances``), instead of instance_type; they must "
                                          "have the same vCPUs and accelerators.")
    min_nodes: NodeCount | None = Field(
        None,
        description="Static nodes that always run (``MinCount``); default 0, or ``max_nodes`` on "
                    "a capacity block (capacity blocks need static nodes).")
    max_nodes: MaxNodes = Field(
                           description="Most nodes this resource scales to (``MaxCount``).")
    efa: bool | None = Field(None, description="Attach EFA; default: on when every instance "
                                               "type supports it.")
    disable_smt: bool | None = Field(
        None, description="One thread per core (``DisableSimultaneousMultithreading``).")
    placement_group: bool | None = Field(
        None, description="This resource's own placement group; wins over the queue's.")
    placement_group_name: str | None = Field(
        None, description="Use this existing placement group for this resource.")
    reservation_id: ReservationId | None = Field(
        None, description="Capacity reservation for this resource only (overrides the "
                          "queue's).")
    reservation_resource_group_arn: ResourceGroupArn | None = Field(
        None, description="Capacity reservations of a resource group for this resource.")
    custom_slurm_settings: dict[str, SlurmValue] = Field(
        default_factory=dict, description="Extra slurm.conf node parameters for these nodes "
                                          "(e.g. ``Features``).")

    @model_validator(mode="after")
    def _checks(self) -> ComputeSpec:
        if (self.instance_type is None) == (not self.instances):
            raise ValueError("set instance_type, or instances for several types (not both)")
        if self.min_nodes is not None and self.min_nodes > self.max_nodes:
            raise ValueError(f"min_nodes ({self.min_nodes}) is above max_nodes "
                             f"({self.max_nodes}); min_nodes must be <= max_nodes")
        if self.reservation_id and self.reservation_resource_group_arn:
            raise ValueError("set reservation_id or reservation_resource_group_arn, not both")
        _placement_group_rule(self.placement_group, self.placement_group_name)
        return self

    @property
    def types(self) -> list[str]:
        """Every instance type of the resource."""
        return [self.instance_type] if self.instance_type else list(self.instances)


class QueueSpec(_Model):
    """One Slurm partition (a ParallelCluster SlurmQueue)."""

    name: str = Field(description="Queue (partition) name: lowercase letters, digits and "
                                  "hyphens, at most 25 characters.")
    capacity_type: Literal["ondemand", "spot", "capacity_block"] = Field(
        "ondemand", description="How the nodes are bought: on-demand, spot, or an EC2 Capacity "
                                "Block for ML.")
    reservation_id: ReservationId | None = Field(
        None, description="Capacity reservation id (``cr-...``); required for "
                          "``capacity_block``.")
    reservation_resource_group_arn: ResourceGroupArn | None = Field(
        None, description="Use the capacity reservations of this resource group "
                          "(``CapacityReservationResourceGroupArn``).")
    subnet_ids: list[SubnetId] = Field(min_length=1, description="Subnets of the queue; EFA "
                                                                 "queues need exactly one.")
    placement_group: bool | None = Field(
        None, description="Cluster placement group; default: on for EFA queues, off (with a "
                          "note) for reservations.")
    placement_group_name: str | None = Field(
        None, description="Use this existing placement group instead of one ParallelCluster "
                          "creates.")
    security_groups: list[SecurityGroupId] = Field(
        default_factory=list, description="Security groups instead of the one ParallelCluster "
                                          "creates; EFA needs one open to itself.")
    additional_security_groups: list[SecurityGroupId] = Field(
        default_factory=list, description="Extra security groups, e.g. an existing file "
                                          "system's.")
    job_exclusive_allocation: bool | None = Field(
        None, description="One job per node; default: ``slurm.job_exclusive_allocation``.")
    custom_ami: AmiId | None = Field(None, description="AMI of this queue's nodes "
                                                       "(``Image.CustomAmi``).")
    compute_root_volume_gib: RootVolumeGib | None = Field(
        None, description="Root volume size of each node in GiB "
                                           "(``ComputeSettings.LocalStorage.RootVolume.Size``).")
    additional_iam_policies: list[PolicyArn] = Field(
        default_factory=list, description="IAM policy ARNs added to the nodes' role.")
    custom_actions: QueueActionsSpec = Field(
        default_factory=QueueActionsSpec, description="Scripts for this queue's nodes only, "
                                                      "after ``bootstrap``.")
    tags: dict[str, str] = Field(default_factory=dict, description="Tags on this queue's "
                                                                   "instances.")
    custom_slurm_settings: dict[str, SlurmValue] = Field(
        default_factory=dict, description="Extra slurm.conf partition parameters for this "
                                          "queue.")
    compute: list[ComputeSpec] = Field(min_length=1, description="The compute resources of "
                                                                 "the queue.")

    @model_validator(mode="after")
    def _one_reservation(self) -> QueueSpec:
        if self.reservation_id and self.reservation_resource_group_arn:
            raise ValueError("set reservation_id or reservation_resource_group_arn, not both")
        _placement_group_rule(self.placement_group, self.placement_group_name)
        return self


class BootstrapSpec(_Model):
    """Node bootstrap scripts (ParallelCluster custom actions) for every queue, run in the order
    listed."""

    on_node_start: list[ScriptSpec] = Field(
        default_factory=list, description="Before the node is configured (``OnNodeStart``).")
    on_node_configured: list[ScriptSpec] = Field(
        default_factory=list, description="After ParallelCluster has configured the node "
                                          "(``OnNodeConfigured``).")
    head_node: bool = Field(False, description="Also run the scripts on the head node.")


class SlurmSpec(_Model):
    """Slurm settings of the whole cluster."""

    scaledown_idletime_min: ScaledownMin = Field(
        10, description="Minutes an idle dynamic node waits before it is stopped (-1: "
                               "never).")
    queue_update_strategy: Literal["COMPUTE_FLEET_STOP", "DRAIN", "TERMINATE"] = Field(
        "COMPUTE_FLEET_STOP", description="How a queue update treats running nodes; "
                                          "COMPUTE_FLEET_STOP never kills a running job.")
    job_exclusive_allocation: bool = Field(
        True, description="Default for every queue: one job per node (training jobs want whole "
                          "nodes).")
    custom_settings: dict[str, SlurmValue] = Field(
        default_factory=dict, description="Extra slurm.conf parameters; those ParallelCluster "
                                          "manages are refused.")


class S3AccessSpec(_Model):
    """S3 access granted to the nodes' IAM role."""

    bucket: BucketName = Field(description="Bucket name, e.g. the checkpoint bucket.")
    write: bool = Field(True, description="Allow writes (checkpoints need them).")


class MonitoringSpec(_Model):
    """CloudWatch logs and dashboard."""

    logs: bool = Field(True, description="Send node logs to CloudWatch Logs.")
    log_retention_days: RetentionDays = Field(
        14, description="Days CloudWatch keeps the logs.")
    dashboard: bool = Field(True, description="Create the CloudWatch dashboard.")
    detailed_monitoring: bool = Field(False, description="EC2 detailed (1-minute) monitoring.")


class LoginPoolSpec(_Model):
    """A pool of login nodes (``LoginNodes.Pools[]``), for users who should not log in to the
    head node."""

    name: str = Field(description="Pool name.")
    instance_type: InstanceType = Field(description="EC2 instance type of the login nodes.")
    count: NodeCount = Field(1, description="Number of login nodes.")
    subnet_id: SubnetId = Field(description="Subnet of the login nodes (they use the head "
                                            "node's key pair; ParallelCluster 3.15 dropped "
                                            "their own ``Ssh.KeyName``).")


class ClusterSpec(_Model):
    """A cluster for training: head node, queues, shared storage and bootstrap."""

    name: ClusterName = Field("hpcflow", description="Cluster name (used when validating; "
                                                     "``pcluster create-cluster`` takes it "
                                                     "again).")
    region: Region = Field(description="AWS region, e.g. ``us-east-1``.")
    os: Os = Field("alinux2023", description="Node operating system (``Image.Os``).")
    custom_ami: AmiId | None = Field(None, description="Custom AMI for every node "
                                                       "(``Image.CustomAmi``).")
    head_node: HeadNodeSpec = Field(description="The head node.")
    login_nodes: list[LoginPoolSpec] = Field(default_factory=list,
                                             description="Login node pools.")
    shared_home: Literal["head_node", "efs"] = Field(
        "head_node", description="Where ``/home`` lives: exported by the head node "
                                 "(ParallelCluster's default) or on EFS.")
    queues: list[QueueSpec] = Field(min_length=1, description="Slurm queues (partitions).")
    storage: list[StorageSpec] = Field(
        default_factory=list, description="Shared storage: FSx for Lustre (``type`` "
                                          "fsx_lustre, the default), fsx_openzfs, fsx_ontap, "
                                          "efs or ebs; see the storage tables below.")
    bootstrap: BootstrapSpec = Field(default_factory=BootstrapSpec,
                                     description="Node bootstrap scripts.")
    slurm: SlurmSpec = Field(default_factory=SlurmSpec, description="Slurm settings.")
    s3_access: list[S3AccessSpec] = Field(
        default_factory=list, description="Buckets the nodes may read (and write), e.g. the "
                                          "checkpoint bucket.")
    imds_v2_only: bool = Field(True, description="Require IMDSv2 tokens on every node "
                                                 "(``Imds.ImdsSupport: v2.0``).")
    monitoring: MonitoringSpec = Field(default_factory=MonitoringSpec,
                                       description="CloudWatch monitoring.")
    tags: dict[str, str] = Field(default_factory=dict,
                                 description="Tags on every resource of the cluster (``Tags``).")
    hyperpod: HyperPodSpec | None = Field(
        None, description="SageMaker HyperPod (Slurm) settings: with this block, ``hpcflow "
                          "cluster hyperpod create`` renders the same cluster as a HyperPod "
                          "CreateCluster request and lifecycle bundle (docs/hyperpod.md); "
                          "``cluster render`` ignores it.")
    pcluster: dict[str, Any] = Field(
        default_factory=dict,
        description="Raw ParallelCluster YAML deep-merged over the rendered config, for any "
                    "key without a field here. This block wins; mappings merge key by key; "
                    "lists of named items (queues, compute resources, storage, login pools) "
                    "merge item by item by ``Name`` (new names are appended); any other list "
                    "replaces the rendered one; ``null`` removes a key.")
