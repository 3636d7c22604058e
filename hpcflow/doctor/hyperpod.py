"""Is this node part of a SageMaker HyperPod cluster, and which instance group is it?

A HyperPod node has the resource config HyperPod writes for its lifecycle scripts:
``/opt/ml/config/resource_config.json`` (or the file ``SAGEMAKER_RESOURCE_CONFIG_PATH`` names),
listing each instance group (``InstanceGroups[].Name``) with its instances' addresses
(``Instances[].CustomerIpAddress``). A node is in the group that lists one of its own addresses.
Source: AWS's reference lifecycle scripts (aws-samples/awsome-distributed-training,
``1.architectures/5.sagemaker-hyperpod/LifecycleScripts/base-config``: ``on_create.sh`` and
``lifecycle_script.py``), the same contract ``bootstrap/hyperpod/on_create.sh`` reads.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from hpcflow.check_result import CheckResult, ok, warn
from hpcflow.doctor.probe import Probe

RESOURCE_CONFIG = "/opt/ml/config/resource_config.json"
RESOURCE_CONFIG_ENV = "SAGEMAKER_RESOURCE_CONFIG_PATH"


@dataclass(frozen=True)
class HyperPodNode:
    """What the resource config says of this node.

    Attributes:
        path: the resource config read.
        groups: each instance group's name and its instances' addresses, in the file's order.
        group: this node's group, None when none lists one of its addresses.
        address: the address that matched.
    """

    path: str
    groups: dict[str, list[str]]
    group: str | None
    address: str | None


def parse_resource_config(text: str) -> dict[str, list[str]]:
    """Group name -> instance addresses, from a resource config's text.

    Raises:
        ValueError: not JSON, no ``InstanceGroups`` list of named groups, or a group whose
            ``Instances`` is not a list.
    """
    data = json.loads(text)
    groups = data.get("InstanceGroups") if isinstance(data, dict) else None
    if not isinstance(groups, list) or not groups:
        raise ValueError("no InstanceGroups list")
    out: dict[str, list[str]] = {}
    for g in groups:
        if not isinstance(g, dict) or not isinstance(g.get("Name"), str):
            raise ValueError("an instance group without a Name")
        instances = g.get("Instances", [])
        if not isinstance(instances, list):
            raise ValueError(f"group {g['Name']!r}: Instances is not a list")
        out[g["Name"]] = [str(i["CustomerIpAddress"]) for i in instances
                          if isinstance(i, dict) and i.get("CustomerIpAddress")]
    return out


def hyperpod_node(probe: Probe) -> HyperPodNode | str | None:
    """This node as HyperPod's resource config describes it; None when the node has no resource
    config (not a HyperPod node); the reason as text when the file is there but unreadable as
    one."""
    path = probe.env.get(RESOURCE_CONFIG_ENV) or RESOURCE_CONFIG
    text = probe.read(path)
    if text is None:
        return None
    try:
        groups = parse_resource_config(text)
    except ValueError as exc:  # json.JSONDecodeError is a ValueError
        return f"{path} is not a HyperPod resource config ({exc})"
    out = probe.run(["hostname", "-I"])
    addresses = out.text.split() if out is not None and out.returncode == 0 else []
    for name, ips in groups.items():
        hit = next((a for a in addresses if a in ips), None)
        if hit is not None:
            return HyperPodNode(path, groups, name, hit)
    return HyperPodNode(path, groups, None, None)


def check_hyperpod(probe: Probe) -> CheckResult | None:
    """The ``hyperpod`` line of ``hpcflow doctor``, only on a node with a resource config: pass
    with the node's instance group, warn when the file is malformed or lists none of the node's
    addresses."""
    node = hyperpod_node(probe)
    if node is None:
        return None
    if isinstance(node, str):
        return warn("hyperpod", node, "HyperPod writes this file when it creates the node; "
                                      "compare it with `aws sagemaker describe-cluster`")
    names = ", ".join(f"{n} ({len(ips)})" for n, ips in node.groups.items())
    if node.group is None:
        return warn("hyperpod", f"SageMaker HyperPod node ({node.path}: {names}), but none of "
                                "this node's addresses (hostname -I) is listed",
                    "run doctor on a node of the cluster, or check that the resource config is "
                    "this cluster's")
    return ok("hyperpod", f"SageMaker HyperPod node: instance group {node.group} at "
                          f"{node.address} ({node.path}: {names})")
