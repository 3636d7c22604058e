"""SageMaker HyperPod (Slurm): the ``CreateCluster`` request rendered from a cluster spec with a
``hyperpod:`` block. Pure: no AWS call, no file.

The mapping (docs/hyperpod.md): the head node is the controller group (one instance), the first
login pool the login group, each queue one worker group whose name is the queue's and which
provisioning_parameters.json makes a Slurm partition of the same name. HyperPod keeps every node
of a group running, so a worker group's ``InstanceCount`` is the queue's ``max_nodes``.

Request shape: botocore's ``sagemaker`` model, ``CreateClusterRequest`` (botocore 1.44), as in the
SageMaker API reference, CreateCluster
(https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateCluster.html). A Slurm
cluster driven by lifecycle scripts has no ``Orchestrator`` (that member names EKS, or the newer
API-managed Slurm configuration hpcflow does not render).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from hpcflow.aws.requests import to_ml_instance_type
from hpcflow.pcluster.catalog import Catalog
from hpcflow.spec.cluster import ClusterSpec
from hpcflow.spec.cluster_hyperpod import HyperPodSpec

#: The entry script's name in the bundle (``LifeCycleConfig.OnCreate``).
ON_CREATE = "on_create.sh"
Role = Literal["controller", "login", "worker"]


@dataclass(frozen=True)
class Group:
    """One instance group as hpcflow planned it.

    Attributes:
        name: ``InstanceGroupName``.
        role: controller, login or worker.
        instance_type: the EC2 name (``p5.48xlarge``); the request carries the ``ml.`` name.
        count: ``InstanceCount``.
        spec_path: the spec field the group comes from (``queues[0]``).
        partition: the Slurm partition of a worker group, else None.
        steps: hpcflow bootstrap steps its nodes run.
    """

    name: str
    role: Role
    instance_type: str
    count: int
    spec_path: str
    partition: str | None = None
    steps: tuple[str, ...] = ()


@dataclass(frozen=True)
class HyperPodPlan:
    """The rendered request and the groups behind it."""

    request: dict[str, Any]
    groups: list[Group]
    hyperpod: HyperPodSpec
    #: Spec field path of each instance group, by index in ``InstanceGroups``.
    sources: dict[int, str] = field(default_factory=dict)


def plan_groups(spec: ClusterSpec, hp: HyperPodSpec) -> list[Group]:
    """The instance groups of ``spec``: controller, login (first pool), one per queue.

    A queue with several compute resources or a flexible ``instances`` list is planned from its
    first resource's first type; :mod:`hpcflow.hyperpod.rules` reports it as an error.
    """
    groups = [Group(hp.controller_group, "controller", spec.head_node.instance_type, 1,
                    "head_node", steps=tuple(hp.controller_steps))]
    if spec.login_nodes:
        pool = spec.login_nodes[0]
        groups.append(Group(pool.name, "login", pool.instance_type, pool.count,
                            "login_nodes[0]", steps=tuple(hp.login_steps)))
    for qi, q in enumerate(spec.queues):
        c = q.compute[0]
        groups.append(Group(q.name, "worker", c.types[0], c.max_nodes, f"queues[{qi}]",
                            partition=q.name, steps=tuple(hp.worker_steps)))
    return groups


def build_request(spec: ClusterSpec, catalog: Catalog) -> HyperPodPlan:
    """The ``CreateCluster`` keyword arguments for ``spec`` (boto3's ``create_cluster(**it)``).

    Args:
        spec: a cluster spec whose ``hyperpod`` block is set.
        catalog: instance facts (GPUs, Trainium) that decide where deep health checks go.

    Raises:
        ValueError: ``spec.hyperpod`` is None (the caller checks first and says so to the user).
    """
    hp = spec.hyperpod
    if hp is None:
        raise ValueError("the spec has no hyperpod: block")
    groups = plan_groups(spec, hp)
    storage = ([{"EbsVolumeConfig": {"VolumeSizeInGB": hp.ebs_volume_gib}}]
               if hp.ebs_volume_gib is not None else [])
    smt = _threads_per_core(spec)
    out: list[dict[str, Any]] = []
    for g in groups:
        item: dict[str, Any] = {
            "InstanceGroupName": g.name,
            "InstanceType": to_ml_instance_type(g.instance_type),
            "InstanceCount": g.count,
            "LifeCycleConfig": {"SourceS3Uri": hp.lifecycle_s3_uri, "OnCreate": ON_CREATE},
            "ExecutionRole": hp.execution_role,
        }
        item["ThreadsPerCore"] = smt.get(g.name, 2)
        if storage:
            item["InstanceStorageConfigs"] = storage
        if g.role == "worker" and hp.deep_health_checks and _accelerated(catalog, g):
            item["OnStartDeepHealthChecks"] = list(hp.deep_health_checks)
        out.append(item)
    subnets = list(dict.fromkeys([spec.head_node.subnet_id,
                                  *(s for q in spec.queues for s in q.subnet_ids)]))
    request: dict[str, Any] = {
        "ClusterName": spec.name,
        "InstanceGroups": out,
        "VpcConfig": {"SecurityGroupIds": list(hp.security_group_ids), "Subnets": subnets},
        "NodeRecovery": hp.node_recovery,
    }
    if spec.tags:
        request["Tags"] = [{"Key": k, "Value": v} for k, v in spec.tags.items()]
    return HyperPodPlan(request, groups, hp, {i: g.spec_path for i, g in enumerate(groups)})


def _threads_per_core(spec: ClusterSpec) -> dict[str, int]:
    """``ThreadsPerCore`` of the worker groups: 1 where the queue's resource sets
    ``disable_smt: true``, else 2, as on EC2 and ParallelCluster, where simultaneous
    multithreading is on unless turned off. Every group gets the member, said rather than left
    to a default."""
    return {q.name: 1 if q.compute[0].disable_smt else 2 for q in spec.queues}


def _accelerated(catalog: Catalog, group: Group) -> bool:
    facts = catalog.get(group.instance_type)
    return facts is not None and facts.accelerator_count > 0
