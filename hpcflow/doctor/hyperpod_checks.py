"""What matters on a SageMaker HyperPod node once doctor has recognised it
(:mod:`hpcflow.doctor.hyperpod`): the lines ``hyperpod-config``, ``hyperpod-partition``,
``hyperpod-fsx`` and ``hyperpod-lifecycle`` of ``hpcflow doctor``.

Every file is read under a node root (``/`` on a node; a folder in the tests), through the
:class:`~hpcflow.doctor.probe.Probe`, and nothing here raises for what it finds.

What the checks rely on:

- The resource config HyperPod writes (``/opt/ml/config/resource_config.json``, or the file
  ``SAGEMAKER_RESOURCE_CONFIG_PATH`` names) lists each instance group with its instances'
  addresses; the node's group is the one listing one of its own (``hostname -I``).
- HyperPod puts the ``provisioning_parameters.json`` of the lifecycle bucket in
  ``/opt/ml/config/``, where its cluster agent reads the groups and partitions (AWS's HyperPod
  workshop, "AI on SageMaker HyperPod", adding a worker group: the updated file goes to
  ``/opt/ml/config/`` and the cluster agent is restarted). Its names are those of AWS's
  reference lifecycle scripts (aws-samples/awsome-distributed-training,
  ``1.architectures/5.sagemaker-hyperpod/LifecycleScripts/base-config``): ``controller_group``,
  ``login_group``, ``worker_groups[] {instance_group_name, partition_name}`` (each worker group
  a Slurm partition), ``fsx_dns_name``, ``fsx_mountname``; hpcflow's bundle writes them
  (:func:`hpcflow.hyperpod.bundle.provisioning_parameters`).
- A Slurm partition exists when ``sinfo --noheader --format=%R`` lists it (sinfo(1): ``%R`` is
  the partition name without the default's ``*``).
- FSx for Lustre is mounted as ``<address>@tcp:/<mount name>`` of type ``lustre`` (FSx for
  Lustre User Guide, "Mounting from an Amazon EC2 instance"); ``/proc/mounts`` (proc(5)) lists
  what is mounted, the NID as an address or the DNS name.
- hpcflow's entry script (``bootstrap/hyperpod/on_create.sh``) logs to
  ``/var/log/hpcflow-bootstrap.log`` (``HPCFLOW_BOOTSTRAP_LOG``) as ``hyperpod-on-create``: its
  last line is ``done: <role> node of group <group>`` when it finished, ``error: ...`` when it
  stopped. HyperPod's own copy of the lifecycle output is
  ``/var/log/provision/provisioning.log`` (and the cluster's CloudWatch log group).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

from hpcflow.check_result import CheckResult, fail, ok, warn
from hpcflow.doctor.hyperpod import RESOURCE_CONFIG, RESOURCE_CONFIG_ENV, parse_resource_config
from hpcflow.doctor.probe import Probe

PROVISIONING = "/opt/ml/config/provisioning_parameters.json"
PROC_MOUNTS = "/proc/mounts"
BOOTSTRAP_LOG = "/var/log/hpcflow-bootstrap.log"
BOOTSTRAP_LOG_ENV = "HPCFLOW_BOOTSTRAP_LOG"
ON_CREATE_STEP = "hyperpod-on-create"
PROVISION_LOG = "/var/log/provision/provisioning.log"


@dataclass(frozen=True)
class Provisioning:
    """The names of a ``provisioning_parameters.json``.

    Attributes:
        controller: the controller group.
        login: the login group, or None.
        partitions: each worker group's Slurm partition, in the file's order.
        fsx_dns, fsx_mount: the FSx for Lustre DNS and mount names, or None.
    """

    controller: str
    login: str | None
    partitions: dict[str, str]
    fsx_dns: str | None
    fsx_mount: str | None

    def role(self, group: str) -> str | None:
        """``controller``, ``login`` or ``worker``; None when the file does not name ``group``."""
        if group == self.controller:
            return "controller"
        if group == self.login:
            return "login"
        return "worker" if group in self.partitions else None


def parse_provisioning(text: str) -> Provisioning:
    """The names in a ``provisioning_parameters.json``'s text.

    Raises:
        ValueError: not JSON, not an object, no ``controller_group``, or a worker group without
            its two names.
    """
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    controller = data.get("controller_group")
    if not isinstance(controller, str) or not controller:
        raise ValueError("no controller_group")
    workers = data.get("worker_groups") or []
    if not isinstance(workers, list):
        raise ValueError("worker_groups is not a list")
    partitions: dict[str, str] = {}
    for w in workers:
        name = w.get("instance_group_name") if isinstance(w, dict) else None
        part = w.get("partition_name") if isinstance(w, dict) else None
        if not (isinstance(name, str) and name and isinstance(part, str) and part):
            raise ValueError("a worker group without instance_group_name and partition_name")
        partitions[name] = part

    def text_or_none(key: str) -> str | None:
        value = data.get(key)
        return value if isinstance(value, str) and value else None

    return Provisioning(controller, text_or_none("login_group"), partitions,
                        text_or_none("fsx_dns_name"), text_or_none("fsx_mountname"))


def under(root: str, path: str) -> str:
    """``path`` (absolute, on the node) inside the node root ``root``."""
    return os.path.join(root, path.lstrip("/"))


def hyperpod_node_checks(probe: Probe, root: str = "/") -> list[CheckResult]:
    """The HyperPod lines of ``hpcflow doctor``; none on a node without a resource config."""
    rc_path = probe.env.get(RESOURCE_CONFIG_ENV) or under(root, RESOURCE_CONFIG)
    rc_text = probe.read(rc_path)
    if rc_text is None:
        return []
    pp_path = under(root, PROVISIONING)
    pp_text = probe.read(pp_path)
    params: Provisioning | None = None
    problem = None
    try:
        groups = parse_resource_config(rc_text)
    except ValueError as exc:
        groups, problem = {}, f"{rc_path} is not a HyperPod resource config ({exc})"
    if pp_text is None:
        problem = problem or f"{pp_path} is missing or unreadable"
    else:
        try:
            params = parse_provisioning(pp_text)
        except ValueError as exc:
            problem = problem or f"{pp_path} is not HyperPod provisioning parameters ({exc})"
    group = _own_group(probe, groups)
    results = [check_config(group, groups, params, problem, rc_path, pp_path)]
    role = params.role(group) if params is not None and group is not None else None
    if params is not None and group is not None and role is not None:
        results.append(check_partition(probe, group, role, params))
    if params is not None and (fsx := check_fsx(probe, root, params)) is not None:
        results.append(fsx)
    if group is not None:
        results.append(check_lifecycle(probe, root, group))
    return results


def _own_group(probe: Probe, groups: dict[str, list[str]]) -> str | None:
    out = probe.run(["hostname", "-I"])
    addresses = out.text.split() if out is not None and out.returncode == 0 else []
    return next((name for name, ips in groups.items() if any(a in ips for a in addresses)), None)


def check_config(group: str | None, groups: dict[str, list[str]], params: Provisioning | None,
                 problem: str | None, rc_path: str, pp_path: str) -> CheckResult:
    """``hyperpod-config``: the resource config and the provisioning parameters are readable
    and both name this node's group."""
    if problem is not None:
        return fail("hyperpod-config", problem, "HyperPod writes both files when it creates the "
                    "node from the lifecycle bucket; compare them with `aws sagemaker "
                    "describe-cluster` and the bucket's provisioning_parameters.json")
    assert params is not None  # noqa: S101 - no problem means both were read
    if group is None:
        return fail("hyperpod-config", f"{rc_path} lists none of this node's addresses "
                    f"(hostname -I) in its groups ({', '.join(groups)})",
                    "run doctor on a node of the cluster, or check that the resource config "
                    "is this cluster's")
    role = params.role(group)
    if role is None:
        named = ", ".join(dict.fromkeys(g for g in (params.controller, params.login,
                                                     *params.partitions) if g))
        return fail("hyperpod-config", f"{pp_path} does not name this node's group {group} "
                    f"(it names {named})", "the lifecycle bucket's provisioning_parameters.json "
                    "must name every instance group of the cluster; re-create the bundle with "
                    "`hpcflow cluster hyperpod create` from the cluster's spec")
    what = f"{role}, partition {params.partitions[group]}" if role == "worker" else role
    return ok("hyperpod-config", f"group {group} ({what}) in {rc_path} and {pp_path}")


def check_partition(probe: Probe, group: str, role: str, params: Provisioning) -> CheckResult:
    """``hyperpod-partition``: a worker group's partition is one Slurm knows."""
    if role != "worker":
        return ok("hyperpod-partition", f"{role} group {group}: no partition of its own")
    part = params.partitions[group]
    out = probe.run(["sinfo", "--noheader", "--format=%R"])
    if out is None or out.returncode != 0:
        why = "sinfo not found" if out is None else f"sinfo failed: {_last(out.text)}"
        return warn("hyperpod-partition", f"partition {part} of group {group} not checked "
                    f"({why})", "run doctor where the Slurm commands work (slurmd up)")
    known = [ln.strip() for ln in out.text.splitlines() if ln.strip()]
    if part not in known:
        return fail("hyperpod-partition", f"group {group}'s partition {part} is not a Slurm "
                    f"partition (sinfo lists: {', '.join(known) or 'none'})",
                    "HyperPod's cluster agent makes a partition per worker group from "
                    "/opt/ml/config/provisioning_parameters.json; restart it on the controller "
                    "(systemctl restart sagemaker-cluster-agent) or check the file")
    return ok("hyperpod-partition", f"group {group} -> Slurm partition {part}")


def parse_mounts(text: str) -> list[tuple[str, str, str]]:
    """``/proc/mounts`` -> (device, mount point, type) rows; octal escapes (``\\040``) decoded."""
    rows = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3:
            dev, where = (re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), p)
                          for p in parts[:2])
            rows.append((dev, where, parts[2]))
    return rows


def check_fsx(probe: Probe, root: str, params: Provisioning) -> CheckResult | None:
    """``hyperpod-fsx``: the FSx for Lustre file system the provisioning parameters name is
    mounted; None when they name none."""
    if params.fsx_mount is None:
        return None
    source = f"{params.fsx_dns or '<dns>'}@tcp:/{params.fsx_mount}"
    path = under(root, PROC_MOUNTS)
    text = probe.read(path)
    if text is None:
        return warn("hyperpod-fsx", f"{path} unreadable: cannot tell whether {source} is "
                    "mounted", "run doctor on the node itself")
    lustre = [(dev, where) for dev, where, kind in parse_mounts(text) if kind == "lustre"]
    hits = [where for dev, where in lustre if dev.endswith(f":/{params.fsx_mount}")]
    if hits:
        return ok("hyperpod-fsx", f"FSx for Lustre {source} mounted at {', '.join(hits)}")
    others = ", ".join(f"{dev} at {where}" for dev, where in lustre) or "no Lustre file system"
    return fail("hyperpod-fsx", f"FSx for Lustre {source} (provisioning parameters) is not "
                f"mounted ({others})", f"mount -t lustre -o relatime,flock {source} /fsx "
                "(on_create.sh does this and adds it to /etc/fstab)")


def check_lifecycle(probe: Probe, root: str, group: str) -> CheckResult:
    """``hyperpod-lifecycle``: hpcflow's ``on_create.sh`` finished on this node, by its last
    line in the bootstrap log."""
    path = probe.env.get(BOOTSTRAP_LOG_ENV) or under(root, BOOTSTRAP_LOG)
    text = probe.read(path) or ""
    marker = f" {ON_CREATE_STEP}: "
    lines = [ln.split(marker, 1)[1].strip() for ln in text.splitlines() if marker in ln]
    see = f"see {path} and {PROVISION_LOG} (or the cluster's CloudWatch log group)"
    if not lines:
        return warn("hyperpod-lifecycle", f"no line of hpcflow's on_create.sh in {path}: the "
                    "node was not set up by hpcflow's lifecycle bundle, or its log is elsewhere",
                    f"create the cluster with `hpcflow cluster hyperpod create`; {see}")
    last = lines[-1]
    if last.startswith("error: "):
        return fail("hyperpod-lifecycle", f"on_create.sh stopped: {last.removeprefix('error: ')}",
                    f"{see}; fix the cause, then replace the node (aws sagemaker "
                    "batch-replace-cluster-nodes) so HyperPod runs the scripts again")
    done = re.fullmatch(r"done: (\w+) node of group (\S+)", last)
    if done is None:
        return warn("hyperpod-lifecycle", f"on_create.sh has not finished (last line: {last})",
                    f"it may still be running, or was stopped; {see}")
    if done.group(2) != group:
        return warn("hyperpod-lifecycle", f"on_create.sh finished for group {done.group(2)}, "
                    f"but this node is in group {group}", f"{see}")
    return ok("hyperpod-lifecycle", f"on_create.sh finished: {done.group(1)} node of group "
              f"{group} ({path})")


def _last(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "(no output)"

