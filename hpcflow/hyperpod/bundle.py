"""The lifecycle-script bundle of a HyperPod cluster: every file HyperPod copies from
``LifeCycleConfig.SourceS3Uri`` to a node before it runs the ``OnCreate`` script there.

- ``on_create.sh``: hpcflow's entry script (``bootstrap/hyperpod/on_create.sh``): it finds this
  node's instance group in the node's resource config, mounts the file system, runs hpcflow's
  bootstrap steps for the group and starts the Slurm daemon of its role.
- ``provisioning_parameters.json``: the controller, login and worker groups (each worker group a
  Slurm partition) and the FSx for Lustre DNS and mount names, under the names HyperPod's
  lifecycle scripts read (``controller_group``, ``login_group``, ``worker_groups[]
  {instance_group_name, partition_name}``, ``fsx_dns_name``, ``fsx_mountname``; AWS's reference
  set, aws-samples/awsome-distributed-training
  ``1.architectures/5.sagemaker-hyperpod/LifecycleScripts/base-config/provisioning_parameters.json``
  and its ``lifecycle_script.py``).
- ``hpcflow-hyperpod.json``: hpcflow's own per-group plan (role, partition, steps, instance type,
  mount point), kept apart so that the provisioning parameters hold only the names above.
- ``hpcflow-bootstrap.sh``, ``lib/``, ``steps/``, ``prolog/``: hpcflow's node bootstrap, the same
  files (pins and sha256 values) ``hpcflow cluster upload-bootstrap`` puts in S3.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hpcflow.hyperpod.request import ON_CREATE, HyperPodPlan

PROVISIONING = "provisioning_parameters.json"
NODE_PLAN = "hpcflow-hyperpod.json"


def provisioning_parameters(plan: HyperPodPlan) -> dict[str, Any]:
    """The ``provisioning_parameters.json`` of ``plan``: only the names HyperPod's lifecycle
    contract uses (see the module docstring)."""
    params: dict[str, Any] = {"version": "1.0.0", "workload_manager": "slurm"}
    for g in plan.groups:
        if g.role == "controller":
            params["controller_group"] = g.name
        elif g.role == "login":
            params["login_group"] = g.name
    params["worker_groups"] = [{"instance_group_name": g.name, "partition_name": g.partition}
                               for g in plan.groups if g.role == "worker"]
    if plan.hyperpod.fsx is not None:
        params["fsx_dns_name"] = plan.hyperpod.fsx.dns_name
        params["fsx_mountname"] = plan.hyperpod.fsx.mount_name
    return params


def node_plan(plan: HyperPodPlan) -> dict[str, Any]:
    """hpcflow's per-group plan the entry script reads: role, partition, bootstrap steps and
    instance type of each group, the steps' settings and the file system's mount point."""
    fsx = plan.hyperpod.fsx
    return {"fsx_mount_dir": fsx.mount_dir if fsx is not None else None,
            "env": dict(plan.hyperpod.step_env),
            "groups": {g.name: {"role": g.role, "partition": g.partition,
                                "steps": list(g.steps), "instance_type": g.instance_type}
                       for g in plan.groups}}


def bundle_files(plan: HyperPodPlan, bootstrap_root: Path) -> dict[str, bytes]:
    """Every file of the bundle by its path under ``SourceS3Uri``, sorted.

    Args:
        bootstrap_root: hpcflow's ``bootstrap/`` folder (:func:`hpcflow.resources.data_dir`);
            its ``hyperpod/`` files go to the top of the bundle.
    """
    files: dict[str, bytes] = {}
    for path in sorted(p for p in bootstrap_root.rglob("*")
                       if p.is_file() and "__pycache__" not in p.parts and p.name != "README.md"):
        rel = path.relative_to(bootstrap_root)
        key = rel.name if rel.parts[0] == "hyperpod" else rel.as_posix()
        files[key] = path.read_bytes()
    files[PROVISIONING] = _json(provisioning_parameters(plan))
    files[NODE_PLAN] = _json(node_plan(plan))
    if ON_CREATE not in files:
        raise FileNotFoundError(f"{bootstrap_root}/hyperpod/{ON_CREATE} is missing")
    return dict(sorted(files.items()))


def _json(data: Any) -> bytes:
    return (json.dumps(data, indent=2) + "\n").encode()


def write_bundle(files: dict[str, bytes], folder: Path) -> list[Path]:
    """Write the bundle under ``folder`` (created; existing files of the same names replaced);
    shell scripts are made executable. Returns the paths written."""
    written = []
    for key, body in files.items():
        path = folder / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
        if key.endswith(".sh"):
            path.chmod(0o755)
        written.append(path)
    return written


def upload_bundle(client: Any, files: dict[str, bytes], s3_uri: str) -> list[str]:
    """Put every file of the bundle under ``s3_uri`` (``s3://bucket/prefix``); returns the URLs.

    Raises:
        SpecError: the bucket does not exist.
        Ec2Error: S3 could not be asked or refused a write (credentials, network, access).
    """
    from hpcflow.aws.s3_bootstrap import put_object

    bucket, _, prefix = s3_uri.removeprefix("s3://").partition("/")
    base = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
    return [put_object(client, bucket, base + key, body, field="hyperpod.lifecycle_s3_uri")
            for key, body in files.items()]
