"""docs/cluster-spec.md, generated from :class:`~hpcflow.spec.cluster.ClusterSpec` (a test
keeps the page equal to the model; ``HPCFLOW_REGEN_GOLDEN=1`` rewrites it)."""

from __future__ import annotations

from hpcflow.spec.cluster import ClusterSpec
from hpcflow.spec.cluster_storage import EbsSpec, EfsSpec, FsxVolumeSpec
from hpcflow.spec.reference import reference_markdown

INTRO = """
A cluster spec is the YAML file `hpcflow cluster render` turns into a ParallelCluster v3 config,
checked by hpcflow's rules and the installed aws-parallelcluster schema before anything is
written. Unknown fields are refused, and every invalid value is reported with its field path,
the value and what is allowed. Override any field from the command line with
`--set path=value`. Examples: `pcluster_configs/*.spec.yaml`; `all-fields.spec.yaml` uses every
field. An existing ParallelCluster config becomes a spec with `hpcflow cluster import`
(docs/admin-guide.md, step 8).

Keys no field covers go in the `pcluster:` block: raw ParallelCluster YAML deep-merged over the
rendered config. The block wins on a conflict; mappings merge key by key; lists of named items
(`SlurmQueues`, `ComputeResources`, `SharedStorage`, `LoginNodes.Pools`: every item has a
`Name`) merge item by item by `Name`, keeping the rendered order, and an item with a new `Name`
is appended; any other list in the block replaces the rendered list whole; `null` removes a
key. The merged config is what the rules and the schema check.

This page is generated from the model (`hpcflow.spec.cluster.ClusterSpec`).
"""

_KINDS = ((FsxVolumeSpec, "fsx_openzfs or fsx_ontap"), (EfsSpec, "efs"), (EbsSpec, "ebs"))


def cluster_reference_markdown() -> str:
    """The cluster spec reference page: one table per section, every storage kind included."""
    text = reference_markdown(ClusterSpec, "Cluster spec reference", INTRO)
    text = text.replace("## `storage`\n", "## `storage` (type: fsx_lustre, the default)\n", 1)
    parts = [text.rstrip("\n"), ""]
    for model, kind in _KINDS:
        body = reference_markdown(model, "x").split("## Top level\n", 1)[1]
        body = body.replace("| `", "| `storage.").replace("| `storage.field` |", "| `field` |")
        parts += [f"## `storage` (type: {kind})", body.rstrip("\n"), ""]
    return "\n".join(parts)
