"""Is the node ``hpcflow submit`` runs on a SageMaker HyperPod (Slurm) node, and what does that mean
for a job that asks for HyperPod's auto-resume (``hyperpod.auto_resume``,
:mod:`hpcflow.spec.job_hyperpod`)?

Two facts of the node say HyperPod, each named in what ``submit`` prints:

- the resource config HyperPod writes for its lifecycle scripts
  (``/opt/ml/config/resource_config.json``, or the file ``SAGEMAKER_RESOURCE_CONFIG_PATH``
  names), with its ``InstanceGroups`` (the test ``hpcflow doctor`` makes,
  :func:`hpcflow.doctor.hyperpod.hyperpod_node`; AWS's reference lifecycle scripts,
  aws-samples/awsome-distributed-training,
  ``1.architectures/5.sagemaker-hyperpod/LifecycleScripts/base-config``);
- the folder ``/opt/sagemaker_cluster``, the test AWS's own HyperPod job scripts make before they
  add ``--auto-resume=1`` to srun (aws-samples/awsome-distributed-training, ``3.test_cases``:
  ``if [ -d "/opt/sagemaker_cluster" ]``).

Plain Slurm refuses the option at once: ``srun: unrecognized option '--auto-resume=1'``, exit
255 (seen with Slurm 22.05). So a job that asks for auto-resume is refused on a node that has
neither fact, unless it is a dry run (:func:`submit_verdict`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hpcflow.doctor.hyperpod import RESOURCE_CONFIG, RESOURCE_CONFIG_ENV, parse_resource_config
from hpcflow.spec.job_hyperpod import AUTO_RESUME_OPTION, FIELD

#: The folder AWS's HyperPod job scripts test for (see the module docstring).
SAGEMAKER_CLUSTER_DIR = "/opt/sagemaker_cluster"

#: The root the node's facts are read under; tests point it at a folder of their own.
ROOT = Path("/")

#: Bytes of a resource config read at most (a real one lists a few thousand instances).
MAX_CONFIG_BYTES = 16 * 1024 * 1024


def _under(root: Path, path: str) -> Path:
    return root / path.lstrip("/")


def hyperpod_node_fact(root: Path | None = None,
                       env: Mapping[str, str] | None = None) -> str | None:
    """The fact that makes this node a SageMaker HyperPod node, in words, or None.

    Args:
        root: the folder the node's paths are read under (default :data:`ROOT`, ``/``).
        env: the environment (default :data:`os.environ`), for ``SAGEMAKER_RESOURCE_CONFIG_PATH``.

    A resource config that is not one (not JSON, no ``InstanceGroups``) proves nothing; the
    folder is then the only fact looked at. Never raises on the node's files.
    """
    root = ROOT if root is None else root
    env = os.environ if env is None else env
    config = env.get(RESOURCE_CONFIG_ENV) or RESOURCE_CONFIG
    try:
        with open(_under(root, config), "rb") as fh:
            groups = parse_resource_config(fh.read(MAX_CONFIG_BYTES).decode("utf-8", "replace"))
    except (OSError, ValueError, TypeError, KeyError):
        groups = None
    if groups:
        return f"HyperPod's resource config {config} lists instance groups {', '.join(groups)}"
    if _under(root, SAGEMAKER_CLUSTER_DIR).is_dir():
        return f"{SAGEMAKER_CLUSTER_DIR} exists"
    return None


@dataclass(frozen=True)
class Verdict:
    """What ``submit`` says of the node for one job (:func:`submit_verdict`).

    Attributes:
        notes: lines to print before the job is submitted.
        warnings: lines to print as warnings.
        error: why the job is refused, or None.
    """

    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    error: str | None = None


def submit_verdict(*, auto_resume: bool, fact: str | None, dry_run: bool) -> Verdict:
    """Pure: what ``submit`` says and does for a job on a node.

    Args:
        auto_resume: the spec's ``hyperpod.auto_resume``.
        fact: :func:`hyperpod_node_fact`'s answer (None: not a HyperPod node).
        dry_run: ``--dry-run``: nothing is submitted, so a refusal is only a warning.

    On a HyperPod node the note names the fact; a job that asks for auto-resume elsewhere is
    refused (a warning with ``--dry-run``): srun there would refuse ``--auto-resume=1``.
    """
    if fact is not None and auto_resume:
        return Verdict(notes=(f"SageMaker HyperPod node ({fact}): the step runs as srun "
                              f"{AUTO_RESUME_OPTION}; on a node fault HyperPod replaces the node "
                              "and reruns the step, and hpcflow excludes no node "
                              "(docs/hyperpod.md)",))
    if fact is not None:
        return Verdict(notes=(f"SageMaker HyperPod node ({fact}); {FIELD}: true would let "
                              "HyperPod replace a faulty node and rerun the step "
                              "(docs/hyperpod.md)",))
    if not auto_resume:
        return Verdict()
    why = (f"{FIELD} is true, but this is not a SageMaker HyperPod node (no resource config at "
           f"{RESOURCE_CONFIG} or ${RESOURCE_CONFIG_ENV}, no {SAGEMAKER_CLUSTER_DIR}): srun here "
           f"refuses {AUTO_RESUME_OPTION} and the step would fail at its start; submit from the "
           f"HyperPod cluster's login or head node, or set {FIELD}: false "
           f"(--set {FIELD}=false)")
    if dry_run:
        return Verdict(warnings=(why,))
    return Verdict(error=why)
