"""The ``hyperpod:`` block of a cluster spec: what a SageMaker HyperPod cluster (Slurm) needs
beyond the fields a ParallelCluster config already takes from the same spec.

With the block, ``hpcflow cluster hyperpod create SPEC`` renders SageMaker's ``CreateCluster``
request and the lifecycle-script bundle (:mod:`hpcflow.hyperpod`); ``hpcflow cluster render SPEC``
still renders the ParallelCluster config and ignores the block. The head node becomes the
controller group, the first login pool the login group, and each queue one worker group and Slurm
partition.

Request shapes and patterns: botocore's ``sagemaker`` service model (``CreateClusterRequest``,
seen with botocore 1.44), the same text as the SageMaker API reference, CreateCluster
(https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateCluster.html).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from hpcflow.spec.cluster_types import MountDir, S3Path, SecurityGroupId, matching
from hpcflow.spec.numbers import bounded_int

#: botocore ``RoleArn`` pattern (sagemaker model).
RoleArn = Annotated[str, matching(r"arn:aws[a-z\-]*:iam::\d{12}:role/?[a-zA-Z_0-9+=,.@\-_/]+",
                                   "an IAM role ARN",
                                   "arn:aws:iam::123456789012:role/hyperpod-execution")]
#: botocore ``ClusterDnsName``: an FSx file system's DNS name, 16 to 275 characters.
FsxDnsName = Annotated[str, matching(r"(fs|fc)i?-[0-9a-f]{8,}\..{4,253}",
                                      "an FSx for Lustre DNS name",
                                      "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com")]
#: botocore ``ClusterMountName``: the Lustre mount name, 1 to 8 characters.
FsxMountName = Annotated[str, matching(r"[A-Za-z0-9_-]{1,8}", "an FSx for Lustre mount name "
                                        "(1 to 8 letters, digits, _ or -)", "abcdefgh")]
#: botocore ``ClusterInstanceGroupName``: letters and digits joined by hyphens, at most 63.
GroupName = Annotated[str, matching(r"(?=.{1,63}$)[a-zA-Z0-9](-*[a-zA-Z0-9])*",
                                     "an instance group name (letters and digits joined by "
                                     "hyphens, at most 63 characters)", "controller")]
#: A setting for the bootstrap steps (``hpcflow-bootstrap.sh --env NAME=VALUE``).
StepEnvName = Annotated[str, matching(r"HPCFLOW_[A-Z0-9_]+", "an HPCFLOW_* setting name",
                                       "HPCFLOW_ENROOT_SHA256")]
StepEnvValue = Annotated[str, matching(r"[!-~]+", "one word of printable ASCII (no blank)",
                                        "0123abcd")]
#: The steps of hpcflow's node bootstrap (bootstrap/hpcflow-bootstrap.sh ``ALL_STEPS``).
Step = Literal["efa", "nccl", "nccl-tests", "enroot-pyxis", "healthcheck"]
#: The worker groups' default steps: those of ``hpcflow cluster upload-bootstrap``.
DEFAULT_WORKER_STEPS: tuple[str, ...] = ("efa", "nccl", "nccl-tests", "healthcheck")


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class HyperPodFsxSpec(_Model):
    """An existing FSx for Lustre file system every node mounts (HyperPod creates none)."""

    dns_name: FsxDnsName = Field(description="Its DNS name (``fsx_dns_name`` in "
                                             "provisioning_parameters.json).")
    mount_name: FsxMountName = Field(description="Its Lustre mount name (``fsx_mountname``).")
    mount_dir: MountDir = Field("/fsx", description="Where every node mounts it.")


class HyperPodSpec(_Model):
    """A SageMaker HyperPod cluster with Slurm, from the same spec: ``hpcflow cluster hyperpod``."""

    execution_role: RoleArn = Field(
        description="IAM role every instance group runs as (``ExecutionRole``).")
    lifecycle_s3_uri: S3Path = Field(
        description="S3 prefix of the lifecycle-script bundle (``LifeCycleConfig.SourceS3Uri``); "
                    "AWS's managed HyperPod policy reads only buckets named ``sagemaker-...``.")
    security_group_ids: list[SecurityGroupId] = Field(
        min_length=1, max_length=5, description="Security groups of the nodes "
                                                "(``VpcConfig.SecurityGroupIds``, 1 to 5).")
    controller_group: GroupName = Field(
        "controller", description="Instance group name of the head node (the Slurm "
                                  "controller).")
    node_recovery: Literal["Automatic", "None"] = Field(
        "Automatic", description="``NodeRecovery``: HyperPod replaces a faulty node "
                                 "(Automatic) or leaves it to you.")
    deep_health_checks: list[Literal["InstanceStress", "InstanceConnectivity"]] = Field(
        default_factory=list, description="``OnStartDeepHealthChecks`` of the worker groups "
                                          "with GPUs or Trainium (long: hours on a large "
                                          "group).")
    ebs_volume_gib: bounded_int(1, 16384) | None = Field(  # type: ignore[valid-type]
        None, description="An extra EBS volume per node in GiB "
                          "(``InstanceStorageConfigs[].EbsVolumeConfig.VolumeSizeInGB``).")
    fsx: HyperPodFsxSpec | None = Field(None, description="An existing FSx for Lustre file "
                                                          "system to mount on every node.")
    worker_steps: list[Step] = Field(
        default_factory=lambda: list(DEFAULT_WORKER_STEPS),
        description="hpcflow bootstrap steps the worker nodes run, after the file system is "
                    "mounted.")
    controller_steps: list[Step] = Field(
        default_factory=list, description="hpcflow bootstrap steps the controller runs.")
    login_steps: list[Step] = Field(
        default_factory=list, description="hpcflow bootstrap steps the login nodes run.")
    step_env: dict[StepEnvName, StepEnvValue] = Field(
        default_factory=dict, description="Settings for the steps (``hpcflow-bootstrap.sh --env``),"
                                          " e.g. ``HPCFLOW_ENROOT_SHA256`` for enroot-pyxis.")
