"""Read every spec field a ParallelCluster config can fill (``hpcflow cluster import``): each
value is taken as it is and checked later against the spec; what no field can say is left to
the ``pcluster:`` block. Pure functions over plain dicts.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter, ValidationError

from hpcflow.pcluster.builder import CAPACITY_TYPES
from hpcflow.pcluster.builder_storage import EBS_KEYS, EFS_KEYS, FSX_KEYS, KIND
from hpcflow.spec.cluster_storage import StorageSpec

_CAPACITY = {v: k for k, v in CAPACITY_TYPES.items()}
_EVENTS = {"OnNodeStart": "on_node_start", "OnNodeConfigured": "on_node_configured",
           "OnNodeUpdated": "on_node_updated"}
_STORAGE_KIND = {v[0]: k for k, v in KIND.items()}


def _d(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _only(mapping: Any, *keys: str) -> bool:
    return isinstance(mapping, dict) and set(mapping) <= set(keys)


def _put(out: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        out[key] = value


def _scripts(event: Any) -> list[dict[str, Any]] | None:
    seq = _d(event).get("Sequence")
    if not _only(event, "Sequence") or not isinstance(seq, list):
        return None
    out = []
    for item in seq:
        if not _only(item, "Script", "Args") or "Script" not in item:
            return None
        entry = {"script": item["Script"]}
        if item.get("Args"):
            entry["args"] = item["Args"]
        out.append(entry)
    return out


def _actions(actions: Any, events: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for event in events:
        if event in _d(actions):
            scripts = _scripts(actions[event])
            if scripts is not None:
                out[_EVENTS[event]] = scripts
    return out


def _tags(tags: Any) -> dict[str, str] | None:
    if not isinstance(tags, list) or not all(_only(t, "Key", "Value") for t in tags):
        return None
    out = {str(t.get("Key")): t.get("Value") for t in tags}
    return out if len(out) == len(tags) else None


def _policies(iam: Any) -> list[str] | None:
    items = _d(iam).get("AdditionalIamPolicies")
    if not isinstance(items, list) or not all(_only(p, "Policy") for p in items):
        return None
    return [p.get("Policy") for p in items]


def _head(h: dict[str, Any]) -> dict[str, Any]:
    net = _d(h.get("Networking"))
    out: dict[str, Any] = {}
    _put(out, "instance_type", h.get("InstanceType"))
    _put(out, "subnet_id", net.get("SubnetId"))
    _put(out, "ssh_key", _d(h.get("Ssh")).get("KeyName"))
    _put(out, "root_volume_gib", _d(_d(h.get("LocalStorage")).get("RootVolume")).get("Size"))
    _put(out, "imds_secured", _d(h.get("Imds")).get("Secured"))
    _put(out, "security_groups", net.get("SecurityGroups"))
    _put(out, "additional_security_groups", net.get("AdditionalSecurityGroups"))
    _put(out, "additional_iam_policies", _policies(h.get("Iam")))
    out["custom_actions"] = _actions(h.get("CustomActions"),
                                     ("OnNodeStart", "OnNodeConfigured", "OnNodeUpdated"))
    return out


def _placement(net: Any, out: dict[str, Any]) -> None:
    pg = _d(net).get("PlacementGroup")
    if _only(pg, "Enabled", "Name") and pg:
        _put(out, "placement_group", pg.get("Enabled"))
        _put(out, "placement_group_name", pg.get("Name"))


def _reservation(target: Any, out: dict[str, Any]) -> None:
    if _only(target, "CapacityReservationId"):
        _put(out, "reservation_id", target.get("CapacityReservationId"))
    elif _only(target, "CapacityReservationResourceGroupArn"):
        _put(out, "reservation_resource_group_arn",
             target.get("CapacityReservationResourceGroupArn"))


def _compute(c: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": c.get("Name"), "max_nodes": c.get("MaxCount", 10)}
    if "InstanceType" in c:
        out["instance_type"] = c["InstanceType"]
    elif isinstance(c.get("Instances"), list) and all(_only(i, "InstanceType")
                                                      for i in c["Instances"]):
        out["instances"] = [i.get("InstanceType") for i in c["Instances"]]
    _put(out, "min_nodes", c.get("MinCount", 0))
    _put(out, "efa", _d(c.get("Efa")).get("Enabled", False))
    _put(out, "disable_smt", c.get("DisableSimultaneousMultithreading"))
    _placement(c.get("Networking"), out)
    _reservation(c.get("CapacityReservationTarget"), out)
    _put(out, "custom_slurm_settings", c.get("CustomSlurmSettings"))
    return out


def _queue(q: dict[str, Any]) -> dict[str, Any]:
    net = _d(q.get("Networking"))
    out: dict[str, Any] = {"name": q.get("Name"), "subnet_ids": net.get("SubnetIds")}
    _put(out, "capacity_type", _CAPACITY.get(str(q.get("CapacityType", "ONDEMAND"))))
    _reservation(q.get("CapacityReservationTarget"), out)
    _placement(net, out)
    _put(out, "security_groups", net.get("SecurityGroups"))
    _put(out, "additional_security_groups", net.get("AdditionalSecurityGroups"))
    _put(out, "job_exclusive_allocation", q.get("JobExclusiveAllocation"))
    _put(out, "custom_ami", _d(q.get("Image")).get("CustomAmi"))
    _put(out, "compute_root_volume_gib", _d(_d(_d(q.get("ComputeSettings")).get(
        "LocalStorage")).get("RootVolume")).get("Size"))
    _put(out, "additional_iam_policies", _policies(q.get("Iam")))
    out["custom_actions"] = _actions(q.get("CustomActions"), ("OnNodeStart", "OnNodeConfigured"))
    _put(out, "tags", _tags(q.get("Tags")))
    _put(out, "custom_slurm_settings", q.get("CustomSlurmSettings"))
    out["compute"] = [_compute(c) for c in q.get("ComputeResources") or [] if isinstance(c, dict)]
    return out


def _storage(st: dict[str, Any]) -> dict[str, Any] | None:
    kind = _STORAGE_KIND.get(str(st.get("StorageType")))
    if kind is None:
        return None
    settings = _d(st.get(KIND[kind][1]))
    out: dict[str, Any] = {"type": kind, "name": st.get("Name"), "mount_dir": st.get("MountDir")}
    if kind in ("fsx_openzfs", "fsx_ontap"):
        out["volume_id"] = settings.get("VolumeId")
        return out
    keys = {"fsx_lustre": FSX_KEYS, "efs": EFS_KEYS, "ebs": EBS_KEYS}[kind]
    existing = settings.get("FileSystemId") or settings.get("VolumeId")
    for field, key in keys:
        _put(out, field, settings.get(key))
    if kind == "fsx_lustre":
        _put(out, "file_system_id", settings.get("FileSystemId"))
        if existing:
            return {k: out[k] for k in ("type", "name", "mount_dir", "file_system_id")}
        dras = settings.get("DataRepositoryAssociations")
        if isinstance(dras, list) and all(
                _only(d, "Name", "BatchImportMetaDataOnCreate", "DataRepositoryPath",
                      "FileSystemPath") for d in dras):
            out["data_repositories"] = [
                {"name": d.get("Name"), "s3_path": d.get("DataRepositoryPath"),
                 "fs_path": d.get("FileSystemPath"),
                 "import_metadata": d.get("BatchImportMetaDataOnCreate", False)} for d in dras]
    if not existing:
        out.setdefault("deletion_policy", None)  # absent: ParallelCluster's default
    return out


def _fits(adapter: TypeAdapter, value: Any) -> bool:
    try:
        adapter.validate_python(value)
        return True
    except ValidationError:
        return False


_STORAGE = TypeAdapter(StorageSpec)


def spec_fields(cfg: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    """Every field a spec can say about ``cfg``, as spec data (not yet validated as a whole)."""
    sched = _d(cfg.get("Scheduling"))
    slurm = _d(sched.get("SlurmSettings"))
    spec: dict[str, Any] = {}
    _put(spec, "name", name)
    _put(spec, "region", cfg.get("Region"))
    _put(spec, "os", _d(cfg.get("Image")).get("Os"))
    _put(spec, "custom_ami", _d(cfg.get("Image")).get("CustomAmi"))
    support = _d(cfg.get("Imds")).get("ImdsSupport")
    if support in ("v1.0", "v2.0"):
        spec["imds_v2_only"] = support == "v2.0"
    spec["head_node"] = _head(_d(cfg.get("HeadNode")))
    pools = _d(cfg.get("LoginNodes")).get("Pools")
    if isinstance(pools, list) and all(
            _only(p, "Name", "InstanceType", "Count", "Networking") and
            _only(p.get("Networking"), "SubnetIds") and
            len(_d(p.get("Networking")).get("SubnetIds") or []) == 1 for p in pools):
        spec["login_nodes"] = [{"name": p.get("Name"), "instance_type": p.get("InstanceType"),
                                "count": p.get("Count", 1),
                                "subnet_id": p["Networking"]["SubnetIds"][0]} for p in pools]
    spec["queues"] = [_queue(q) for q in sched.get("SlurmQueues") or [] if isinstance(q, dict)]
    storages = [st for st in cfg.get("SharedStorage") or [] if isinstance(st, dict)]
    mapped = [_storage(st) for st in storages]
    if all(m is not None and _fits(_STORAGE, m) for m in mapped):
        spec["storage"] = mapped
    settings = slurm.get("CustomSlurmSettings")
    custom: dict[str, Any] | None = None
    if isinstance(settings, list) and all(isinstance(e, dict) and len(e) == 1 for e in settings):
        custom = {k: v for e in settings for k, v in e.items()}
        custom = custom if len(custom) == len(settings) else None
    spec["slurm"] = {k: v for k, v in (
        ("scaledown_idletime_min", slurm.get("ScaledownIdletime")),
        ("queue_update_strategy", slurm.get("QueueUpdateStrategy")),
        ("custom_settings", custom)) if v is not None}
    _put(spec, "tags", _tags(cfg.get("Tags")))
    mon = _d(cfg.get("Monitoring"))
    logs = _d(_d(mon.get("Logs")).get("CloudWatch"))
    spec["monitoring"] = {k: v for k, v in (
        ("detailed_monitoring", mon.get("DetailedMonitoring")),
        ("logs", logs.get("Enabled")), ("log_retention_days", logs.get("RetentionInDays")),
        ("dashboard", _d(_d(mon.get("Dashboards")).get("CloudWatch")).get("Enabled")))
        if v is not None}
    _shared_settings(cfg, spec)
    return spec


def _shared_settings(cfg: dict[str, Any], spec: dict[str, Any]) -> None:
    """S3 access and bootstrap scripts the head node and every queue share become the
    cluster-wide fields."""
    queues = [q for q in _d(cfg.get("Scheduling")).get("SlurmQueues") or [] if isinstance(q, dict)]
    head = _d(cfg.get("HeadNode"))
    s3 = [_d(q.get("Iam")).get("S3Access") for q in queues] + [_d(head.get("Iam")).get("S3Access")]
    first = s3[0]
    if (isinstance(first, list) and first and all(x == first for x in s3)
            and all(_only(a, "BucketName", "EnableWriteAccess") for a in first)):
        spec["s3_access"] = [{"bucket": a.get("BucketName"), "write": a.get("EnableWriteAccess",
                                                                             False)}
                             for a in first]
    actions = [q["custom_actions"] for q in spec["queues"]]
    if actions and actions[0] and all(a == actions[0] for a in actions):
        spec["bootstrap"] = dict(actions[0])
        for q in spec["queues"]:
            q["custom_actions"] = {}
        hn = spec["head_node"]["custom_actions"]
        if all(hn.get(k) == v for k, v in actions[0].items()) and set(hn) <= set(actions[0]):
            spec["bootstrap"]["head_node"] = True
            spec["head_node"]["custom_actions"] = {}
