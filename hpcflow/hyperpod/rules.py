"""hpcflow's rules for a HyperPod cluster, over the spec and the rendered ``CreateCluster``
request, in the :class:`~hpcflow.pcluster.findings.Finding` format of ``hpcflow cluster
validate``. Every rule takes what it is given and never raises on a strange value: a hostile spec
gets findings, and botocore's parameter validation is the last gate (:func:`check_plan`).

Sources: botocore's ``sagemaker`` model (``ClusterInstanceType``, ``ClusterInstanceGroupName``,
``ClusterPartitionName``; botocore 1.44); SageMaker API reference, ClusterLifeCycleConfig
(https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ClusterLifeCycleConfig.html: "Make
sure that the S3 bucket path starts with s3://sagemaker-").
"""

from __future__ import annotations

import difflib
import re

from hpcflow.aws.requests import (
    constraint_problems,
    enum_values,
    request_problems,
    to_ml_instance_type,
)
from hpcflow.hyperpod.request import HyperPodPlan
from hpcflow.pcluster.catalog import Catalog
from hpcflow.pcluster.findings import Finding, Level
from hpcflow.spec.cluster import ClusterSpec

# botocore ClusterInstanceGroupName / ClusterPartitionName / ClusterName patterns.
_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9])*")
MAX_NAME = 63


class _Findings(list):
    def add(self, code: str, level: Level, path: str, value: object, message: str) -> None:
        self.append(Finding(code, level, path, value, message))


def check_plan(spec: ClusterSpec, plan: HyperPodPlan, catalog: Catalog) -> list[Finding]:
    """Every HyperPod rule, then botocore's parameter validation of the request and the model's
    own bounds, patterns and enums (:func:`~hpcflow.aws.requests.constraint_problems`), only
    when no rule found an error, so that one mistake is said once, in hpcflow's words.

    Costs: loading botocore's sagemaker model once per process (about 0.3 s).
    """
    out = _Findings()
    _check_names(spec, plan, out)
    _check_instance_types(spec, plan, catalog, out)
    _check_queues(spec, out)
    _check_left_out(spec, out)
    _check_lifecycle(plan, out)
    _check_health_checks(plan, catalog, out)
    if not any(f.level == "error" for f in out):
        for line in request_problems("sagemaker", "CreateCluster", plan.request):
            out.add("HYPERPOD_REQUEST", "error", "request", None,
                    f"botocore's parameter validation: {line}")
        for line in constraint_problems("sagemaker", "CreateCluster", plan.request):
            out.add("HYPERPOD_REQUEST", "error", "request", None,
                    f"the sagemaker service model: {line}")
    return list(out)


def _check_names(spec: ClusterSpec, plan: HyperPodPlan, out: _Findings) -> None:
    if not _name_ok(spec.name):
        out.add("HYPERPOD_NAME", "error", "name", spec.name,
                f"{spec.name!r} is not a HyperPod cluster name: letters and digits joined by "
                f"hyphens, at most {MAX_NAME} characters (botocore ClusterName)")
    seen: dict[str, str] = {}
    for g in plan.groups:
        path = "hyperpod.controller_group" if g.role == "controller" else f"{g.spec_path}.name"
        if not _name_ok(g.name):
            what = "an instance group and partition" if g.role == "worker" else "an instance group"
            out.add("HYPERPOD_GROUP_NAME", "error", path, g.name,
                    f"{g.name!r} is not allowed as {what} name: letters and digits joined by "
                    f"hyphens, at most {MAX_NAME} characters (botocore ClusterInstanceGroupName"
                    f"{', ClusterPartitionName' if g.role == 'worker' else ''})")
        elif g.name in seen:
            out.add("HYPERPOD_GROUP_NAME", "error", path, g.name,
                    f"instance group {g.name!r} is also {seen[g.name]}; each group (controller, "
                    "login pool, queue) needs its own name")
        seen.setdefault(g.name, path)


def _name_ok(name: object) -> bool:
    return isinstance(name, str) and len(name) <= MAX_NAME and bool(_NAME.fullmatch(name))


def _check_instance_types(spec: ClusterSpec, plan: HyperPodPlan, catalog: Catalog,
                          out: _Findings) -> None:
    allowed = enum_values("sagemaker", "ClusterInstanceType")
    for g in plan.groups:
        path = {"controller": "head_node.instance_type", "login": "login_nodes[0].instance_type"
                }.get(g.role, f"{g.spec_path}.compute[0].instance_type")
        ml = to_ml_instance_type(g.instance_type)
        if ml not in allowed:
            near = difflib.get_close_matches(ml, allowed, n=1, cutoff=0.6)
            hint = f"; did you mean {near[0].removeprefix('ml.')!r} ({near[0]})?" if near else ""
            out.add("HYPERPOD_INSTANCE_TYPE", "error", path, g.instance_type,
                    f"{g.instance_type!r} ({ml}) is not an instance type HyperPod offers"
                    f"{hint} (botocore sagemaker ClusterInstanceType lists {len(allowed)})")
    for qi, q in enumerate(spec.queues):
        for ci, c in enumerate(q.compute):
            for t in c.types:
                efa = catalog.efa_supported(t)
                if c.efa is True and efa is False:
                    out.add("EFA_UNSUPPORTED", "error", f"queues[{qi}].compute[{ci}].efa", True,
                            f"{t} has no EFA (EC2 EfaSupported false); remove efa: true or "
                            "pick a type with EFA, e.g. p5.48xlarge")
                elif c.efa is False and efa:
                    out.add("HYPERPOD_EFA", "info", f"queues[{qi}].compute[{ci}].efa", False,
                            f"HyperPod sets up EFA on {t} itself; efa: false is not rendered")


def _check_queues(spec: ClusterSpec, out: _Findings) -> None:
    if len(spec.login_nodes) > 1:
        out.add("HYPERPOD_LOGIN_GROUPS", "error", "login_nodes", len(spec.login_nodes),
                f"{len(spec.login_nodes)} login pools; HyperPod's provisioning parameters name "
                "one login group: keep one pool")
    for qi, q in enumerate(spec.queues):
        base = f"queues[{qi}]"
        if len(q.compute) > 1:
            out.add("HYPERPOD_QUEUE_RESOURCES", "error", f"{base}.compute", len(q.compute),
                    f"queue {q.name!r} has {len(q.compute)} compute resources; hpcflow makes each "
                    "queue one HyperPod worker group of one instance type: split it into one "
                    "queue per resource")
        c = q.compute[0]
        if c.instances:
            out.add("HYPERPOD_FLEXIBLE", "error", f"{base}.compute[0].instances", c.instances,
                    "a HyperPod worker group has one instance type; set instance_type")
        if q.capacity_type != "ondemand":
            out.add("HYPERPOD_CAPACITY", "error", f"{base}.capacity_type", q.capacity_type,
                    f"capacity_type {q.capacity_type} is not rendered for HyperPod; hpcflow "
                    "renders on-demand groups only (set ondemand)")
        for path, value in ((f"{base}.reservation_id", q.reservation_id),
                            (f"{base}.compute[0].reservation_id", c.reservation_id)):
            if value:
                out.add("HYPERPOD_CAPACITY", "error", path, value,
                        "a capacity reservation is not rendered for HyperPod; remove it")
        if c.min_nodes is not None and c.min_nodes < c.max_nodes:
            out.add("HYPERPOD_STATIC_NODES", "info", f"{base}.compute[0].min_nodes", c.min_nodes,
                    f"HyperPod keeps every node of a group running: {c.max_nodes} nodes "
                    "(max_nodes) run for the life of the cluster")


def _check_left_out(spec: ClusterSpec, out: _Findings) -> None:
    """Spec fields a HyperPod cluster does not take: said once each, never silently dropped."""
    for i, st in enumerate(spec.storage):
        what = ("a new file system is not created on HyperPod"
                if getattr(st, "file_system_id", "x") is None else "it is not mounted on HyperPod")
        out.add("HYPERPOD_STORAGE", "warning", f"storage[{i}]", st.name,
                f"{what}; give an existing FSx for Lustre file system in hyperpod.fsx "
                "(dns_name, mount_name)")
    left = [path for path, value in (
        ("bootstrap", spec.bootstrap.on_node_start or spec.bootstrap.on_node_configured),
        ("head_node.custom_actions", spec.head_node.custom_actions.on_node_start
         or spec.head_node.custom_actions.on_node_configured
         or spec.head_node.custom_actions.on_node_updated),
        ("slurm.custom_settings", spec.slurm.custom_settings),
        ("custom_ami", spec.custom_ami),
        ("s3_access", spec.s3_access)) if value]
    left += [f"queues[{qi}].{name}" for qi, q in enumerate(spec.queues)
             for name, value in (("custom_actions", q.custom_actions.on_node_start
                                  or q.custom_actions.on_node_configured),
                                 ("custom_slurm_settings", q.custom_slurm_settings),
                                 ("custom_ami", q.custom_ami)) if value]
    for path in left:
        out.add("HYPERPOD_NOT_RENDERED", "warning", path, None,
                "not part of the HyperPod request or bundle (the bundle runs hpcflow's steps; "
                "S3 access comes from hyperpod.execution_role)")
    if spec.pcluster:
        out.add("HYPERPOD_NOT_RENDERED", "info", "pcluster", None,
                "the raw ParallelCluster block applies to `hpcflow cluster render` only")


def _check_lifecycle(plan: HyperPodPlan, out: _Findings) -> None:
    uri = plan.hyperpod.lifecycle_s3_uri
    if not uri.startswith("s3://sagemaker-"):
        out.add("HYPERPOD_LIFECYCLE_BUCKET", "warning", "hyperpod.lifecycle_s3_uri", uri,
                "the bucket name does not start with sagemaker-: AWS's managed policy for "
                "HyperPod nodes (AmazonSageMakerClusterInstanceRolePolicy) reads only such "
                "buckets, so the execution role needs its own read access (SageMaker API "
                "reference, ClusterLifeCycleConfig)")


def _check_health_checks(plan: HyperPodPlan, catalog: Catalog, out: _Findings) -> None:
    if plan.hyperpod.deep_health_checks and not any(
            "OnStartDeepHealthChecks" in g for g in plan.request["InstanceGroups"]):
        out.add("HYPERPOD_HEALTH_CHECKS", "warning", "hyperpod.deep_health_checks",
                plan.hyperpod.deep_health_checks,
                "no worker group has GPUs or Trainium in hpcflow's catalog; the deep health "
                "checks are not requested")
