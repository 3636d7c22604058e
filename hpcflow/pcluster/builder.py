"""ClusterSpec -> ParallelCluster v3 config dict. Pure: no I/O, no AWS, no pcluster import.

Keys and their meaning: ParallelCluster user guide, "Cluster configuration file"
(https://docs.aws.amazon.com/parallelcluster/latest/ug/cluster-configuration-file-v3.html),
checked against the aws-parallelcluster 3.16.1 ``ClusterSchema``.

Defaults chosen for GPU training (docs/architecture.md, "Cluster configs"):

- EFA is on for every compute resource whose instance types all support it (catalog facts).
- An EFA queue always has an explicit ``Networking.PlacementGroup`` (unless each EFA compute
  resource has its own): enabled, except on capacity blocks and capacity reservations, which
  bring their own placement (AWS advice; ParallelCluster's ``EfaPlacementGroupValidator``
  accepts ``Enabled: false`` there).
- Capacity-block compute resources are static: ``MinCount`` defaults to ``MaxCount``.
- ``Efa.GdrSupport`` is never written: it has had no effect since ParallelCluster 3.0.2.
- Shared storage ``DeletionPolicy`` defaults to Retain (ParallelCluster's default, Delete, loses
  the data).

Last, the spec's ``pcluster:`` block is deep-merged over the result (``hpcflow.pcluster.merge``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hpcflow.pcluster.builder_storage import shared_storage
from hpcflow.pcluster.catalog import Catalog
from hpcflow.pcluster.findings import FieldPath
from hpcflow.pcluster.merge import deep_merge
from hpcflow.spec.cluster import ClusterSpec, ComputeSpec, QueueSpec, ScriptSpec

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
    sources: dict[FieldPath, str] = field(default_factory=dict)


def compute_name(compute: ComputeSpec) -> str:
    """The compute resource name: given, or the (first) instance type with dots as dashes."""
    return compute.name or compute.types[0].replace(".", "-")


def efa_enabled(compute: ComputeSpec, catalog: Catalog) -> bool:
    """EFA for a compute resource: the spec's choice, else on when every type supports it."""
    if compute.efa is not None:
        return compute.efa
    return all(catalog.efa_supported(t) for t in compute.types)


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
    rendered = build_fields(spec, catalog)
    if spec.pcluster:
        rendered.config = deep_merge(rendered.config, spec.pcluster)
        _raw_sources(spec.pcluster, rendered.config, (), "pcluster", rendered.sources)
    return rendered


def _raw_sources(raw: Any, merged: Any, base: FieldPath, sp: str,
                 src: dict[FieldPath, str]) -> None:
    """Map each key the raw block sets to ``pcluster.<key path>``, into lists too: an item of a
    list is named by its index in the raw block, and found in the merged config by its ``Name``
    (a named list merges item by item) or its index (any other list replaces the rendered one)."""
    if isinstance(raw, dict):
        for key, value in raw.items():
            src[base + (key,)] = f"{sp}.{key}"
            inner = merged.get(key) if isinstance(merged, dict) else None
            _raw_sources(value, inner, base + (key,), f"{sp}.{key}", src)
    elif isinstance(raw, list) and isinstance(merged, list):
        names = [item.get("Name") if isinstance(item, dict) else None for item in merged]
        for i, item in enumerate(raw):
            name = item.get("Name") if isinstance(item, dict) else None
            at = names.index(name) if name is not None and names.count(name) == 1 else i
            if at < len(merged):
                # An item merged into a rendered one keeps the spec field that rendered it.
                src.setdefault(base + (at,), f"{sp}[{i}]")
                _raw_sources(item, merged[at], base + (at,), f"{sp}[{i}]", src)


def build_fields(spec: ClusterSpec, catalog: Catalog | None = None) -> Rendered:
    """The config from the spec's fields alone, before the ``pcluster:`` block is merged."""
    cat = catalog or Catalog.offline()
    src: dict[FieldPath, str] = {}
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
    if spec.login_nodes:
        cfg["LoginNodes"] = {"Pools": [_login_pool(spec, i, src)
                                       for i in range(len(spec.login_nodes))]}
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
    shared = shared_storage(spec, src)
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
    if spec.tags:
        cfg["Tags"] = _tags(spec.tags)
        src[("Tags",)] = "tags"
    return Rendered(cfg, src)


def _tags(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in tags.items()]


def _iam(spec: ClusterSpec, policies: list[str], base: FieldPath, sp: str,
         src: dict[FieldPath, str]) -> dict[str, Any]:
    iam: dict[str, Any] = {}
    if spec.s3_access:
        iam["S3Access"] = [{"BucketName": a.bucket, "EnableWriteAccess": a.write}
                           for a in spec.s3_access]
        src[base + ("Iam", "S3Access")] = "s3_access"
    if policies:
        iam["AdditionalIamPolicies"] = [{"Policy": p} for p in policies]
        src[base + ("Iam", "AdditionalIamPolicies")] = sp + ".additional_iam_policies"
    return iam


def _networking_groups(holder: Any, out: dict[str, Any], base: FieldPath, sp: str,
                       src: dict[FieldPath, str]) -> None:
    for field_name, key in (("security_groups", "SecurityGroups"),
                            ("additional_security_groups", "AdditionalSecurityGroups")):
        value = getattr(holder, field_name)
        if value:
            out[key] = list(value)
            src[base + ("Networking", key)] = f"{sp}.{field_name}"


def _head_node(spec: ClusterSpec, src: dict[FieldPath, str]) -> dict[str, Any]:
    hn = spec.head_node
    base: FieldPath = ("HeadNode",)
    networking: dict[str, Any] = {"SubnetId": hn.subnet_id}
    out: dict[str, Any] = {"InstanceType": hn.instance_type, "Networking": networking}
    src[("HeadNode", "InstanceType")] = "head_node.instance_type"
    src[("HeadNode", "Networking", "SubnetId")] = "head_node.subnet_id"
    _networking_groups(hn, networking, base, "head_node", src)
    if hn.ssh_key:
        out["Ssh"] = {"KeyName": hn.ssh_key}
        src[("HeadNode", "Ssh")] = "head_node.ssh_key"
    if hn.root_volume_gib:
        out["LocalStorage"] = {"RootVolume": {"Size": hn.root_volume_gib}}
        src[("HeadNode", "LocalStorage")] = "head_node.root_volume_gib"
    if hn.imds_secured is not None:
        out["Imds"] = {"Secured": hn.imds_secured}
        src[("HeadNode", "Imds")] = "head_node.imds_secured"
    iam = _iam(spec, hn.additional_iam_policies, base, "head_node", src)
    if iam:
        out["Iam"] = iam
    events = {"OnNodeStart": [], "OnNodeConfigured": [], "OnNodeUpdated": []}
    if spec.bootstrap.head_node:
        events["OnNodeStart"] += spec.bootstrap.on_node_start
        events["OnNodeConfigured"] += spec.bootstrap.on_node_configured
    events["OnNodeStart"] += hn.custom_actions.on_node_start
    events["OnNodeConfigured"] += hn.custom_actions.on_node_configured
    events["OnNodeUpdated"] += hn.custom_actions.on_node_updated
    actions = _custom_actions(events, base + ("CustomActions",), _action_sources(
        "head_node.custom_actions", hn.custom_actions, spec.bootstrap.head_node), src)
    if actions:
        out["CustomActions"] = actions
    return out


def _login_pool(spec: ClusterSpec, i: int, src: dict[FieldPath, str]) -> dict[str, Any]:
    pool = spec.login_nodes[i]
    base: FieldPath = ("LoginNodes", "Pools", i)
    sp = f"login_nodes[{i}]"
    src[base] = sp
    for key, name in (("Name", "name"), ("InstanceType", "instance_type"), ("Count", "count"),
                      ("Networking", "subnet_id")):
        src[base + (key,)] = f"{sp}.{name}"
    return {"Name": pool.name, "InstanceType": pool.instance_type, "Count": pool.count,
            "Networking": {"SubnetIds": [pool.subnet_id]}}


def _queue(spec: ClusterSpec, q: QueueSpec, qi: int, cat: Catalog,
           src: dict[FieldPath, str]) -> dict[str, Any]:
    base: FieldPath = ("Scheduling", "SlurmQueues", qi)
    sp = f"queues[{qi}]"
    src[base] = sp
    out: dict[str, Any] = {"Name": q.name, "CapacityType": CAPACITY_TYPES[q.capacity_type]}
    src[base + ("Name",)] = sp + ".name"
    src[base + ("CapacityType",)] = sp + ".capacity_type"
    target = _reservation(q.reservation_id, q.reservation_resource_group_arn)
    if target:
        out["CapacityReservationTarget"] = target
        src[base + ("CapacityReservationTarget",)] = sp + ".reservation_id"
    if q.custom_ami:
        out["Image"] = {"CustomAmi": q.custom_ami}
        src[base + ("Image",)] = sp + ".custom_ami"
    if q.compute_root_volume_gib:
        out["ComputeSettings"] = {"LocalStorage": {"RootVolume": {
            "Size": q.compute_root_volume_gib}}}
        src[base + ("ComputeSettings",)] = sp + ".compute_root_volume_gib"
    networking: dict[str, Any] = {"SubnetIds": list(q.subnet_ids)}
    src[base + ("Networking", "SubnetIds")] = sp + ".subnet_ids"
    _networking_groups(q, networking, base, sp, src)
    pg = q.placement_group
    efa_without_own_pg = any(efa_enabled(c, cat) and c.placement_group is None
                             and not c.placement_group_name for c in q.compute)
    if pg is None and efa_without_own_pg:
        pg = not (q.capacity_type == "capacity_block" or target)
    if pg is not None or q.placement_group_name:
        # A Name without Enabled: ParallelCluster implies Enabled (PlacementGroup.implied).
        networking["PlacementGroup"] = {} if pg is None else {"Enabled": pg}
        if pg is not False and q.placement_group_name:
            networking["PlacementGroup"]["Name"] = q.placement_group_name
        src[base + ("Networking", "PlacementGroup")] = sp + (
            ".placement_group" if pg is not None else ".placement_group_name")
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
    events = {"OnNodeStart": spec.bootstrap.on_node_start + q.custom_actions.on_node_start,
              "OnNodeConfigured": (spec.bootstrap.on_node_configured
                                   + q.custom_actions.on_node_configured)}
    actions = _custom_actions(events, base + ("CustomActions",), _action_sources(
        sp + ".custom_actions", q.custom_actions, True), src)
    if actions:
        out["CustomActions"] = actions
    iam = _iam(spec, q.additional_iam_policies, base, sp, src)
    if iam:
        out["Iam"] = iam
    if q.tags:
        out["Tags"] = _tags(q.tags)
        src[base + ("Tags",)] = sp + ".tags"
    return out


def _reservation(reservation_id: str | None, group_arn: str | None) -> dict[str, Any]:
    if reservation_id:
        return {"CapacityReservationId": reservation_id}
    if group_arn:
        return {"CapacityReservationResourceGroupArn": group_arn}
    return {}


def _compute(q: QueueSpec, c: ComputeSpec, ci: int, qbase: FieldPath, qsp: str, cat: Catalog,
             src: dict[FieldPath, str]) -> dict[str, Any]:
    base = qbase + ("ComputeResources", ci)
    sp = f"{qsp}.compute[{ci}]"
    src[base] = sp
    min_src = "min_nodes" if c.min_nodes is not None or q.capacity_type != "capacity_block" \
        else "max_nodes"
    for key, field_name in (("Name", "name"), ("InstanceType", "instance_type"),
                            ("Instances", "instances"), ("MinCount", min_src),
                            ("MaxCount", "max_nodes"), ("Efa", "efa"),
                            ("DisableSimultaneousMultithreading", "disable_smt"),
                            ("Networking", "placement_group"),
                            ("CapacityReservationTarget", "reservation_id")):
        src[base + (key,)] = f"{sp}.{field_name}"
    if c.name is None:
        src[base + ("Name",)] = f"{sp}.instance_type" if c.instance_type else f"{sp}.instances"
    out: dict[str, Any] = {"Name": compute_name(c)}
    if c.instance_type:
        out["InstanceType"] = c.instance_type
    else:
        out["Instances"] = [{"InstanceType": t} for t in c.instances]
    out.update({"MinCount": min_nodes(q, c), "MaxCount": c.max_nodes,
                "Efa": {"Enabled": efa_enabled(c, cat)}})
    if c.disable_smt is not None:
        out["DisableSimultaneousMultithreading"] = c.disable_smt
    if c.placement_group is not None or c.placement_group_name:
        pg: dict[str, Any] = {}
        if c.placement_group is not None:
            pg["Enabled"] = c.placement_group
        if c.placement_group_name and c.placement_group is not False:
            pg["Name"] = c.placement_group_name
        out["Networking"] = {"PlacementGroup": pg}
    target = _reservation(c.reservation_id, c.reservation_resource_group_arn)
    if target:
        out["CapacityReservationTarget"] = target
    if c.custom_slurm_settings:
        out["CustomSlurmSettings"] = _custom_mapping(
            c.custom_slurm_settings, base, sp + ".custom_slurm_settings", src)
    return out


def _custom_mapping(settings: dict[str, Any], base: FieldPath, sp: str,
                    src: dict[FieldPath, str]) -> dict[str, Any]:
    """A queue's or compute resource's settings: one mapping (aws-parallelcluster 3.16.1
    ``SlurmQueueSchema.custom_slurm_settings`` is a ``fields.Dict``)."""
    for key in settings:
        src[base + ("CustomSlurmSettings", key)] = f"{sp}.{key}"
    return dict(settings)


def _custom_settings(settings: dict[str, Any], base: FieldPath, sp: str,
                     src: dict[FieldPath, str]) -> list[dict[str, Any]]:
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


EVENTS = {"OnNodeStart": "on_node_start", "OnNodeConfigured": "on_node_configured",
          "OnNodeUpdated": "on_node_updated"}


def _action_sources(sp: str, own: Any, with_bootstrap: bool) -> dict[str, str]:
    """Spec field per event: the node's own ``custom_actions`` when it has scripts there, else
    the cluster-wide ``bootstrap``."""
    out = {}
    for event, name in EVENTS.items():
        mine = getattr(own, name, None)
        out[event] = f"{sp}.{name}" if mine or not with_bootstrap else f"bootstrap.{name}"
    return out


def _custom_actions(events: dict[str, list[ScriptSpec]], base: FieldPath, sources: dict[str, str],
                    src: dict[FieldPath, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for event, scripts in events.items():
        if scripts:
            out[event] = _scripts(scripts)
            src[base + (event,)] = sources[event]
    return out
