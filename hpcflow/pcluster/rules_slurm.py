"""Custom Slurm settings: the ones ParallelCluster manages itself are refused, and keys or values
that would slip past that deny list are refused too.

Mirrors aws-parallelcluster 3.16.1 ``pcluster/validators/slurm_settings_validator.py``
(``SLURM_SETTINGS_DENY_LIST``, CustomSlurmSettingsValidator) as registered in
``pcluster/config/cluster_config.py``:

- ``SlurmSettings.CustomSlurmSettings`` is a list of mappings. A mapping with one key is a
  slurm.conf parameter, checked against the global deny list, plus the accounting list only when
  ``SlurmSettings.Database`` is set. A mapping with several keys is a custom node, nodeset or
  partition line (``PartitionName: ...``, ``NodeName: ...``), which ParallelCluster does not
  check against the deny list.
- A queue's and a compute resource's ``CustomSlurmSettings`` is one mapping, checked against the
  queue or compute resource deny list.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from hpcflow.pcluster.catalog import Catalog
from hpcflow.pcluster.findings import QP, Ctx, FieldPath, as_dict, computes, queues

DENY_SLURMCONF = frozenset({
    "epilog", "grestypes", "launchparameters", "prolog", "reconfigflags", "resumefailprogram",
    "resumeprogram", "resumetimeout", "slurmctldhost", "slurmctldlogfile", "slurmctldparameters",
    "slurmdlogfile", "slurmuser", "suspendexcnodes", "suspendprogram", "suspendtime",
    "taskplugin", "treewidth",
})
DENY_ACCOUNTING = frozenset({"accountingstoragetype", "accountingstoragehost",
                             "accountingstorageport", "accountingstorageuser",
                             "jobacctgathertype"})
DENY_QUEUE = frozenset({"nodes", "partitionname", "resumetimeout", "state", "suspendtime",
                        "oversubscribe"})
DENY_COMPUTE = frozenset({"cpus", "gres", "nodeaddr", "nodehostname", "nodename", "state",
                          "weight"})

# slurm.conf parameter names are letters and digits (slurm.conf(5)); underscores are allowed
# for safety with site plugins.
KEY_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def _visible(key: str) -> str:
    """``key`` without whitespace and invisible (format/control) characters: what a reader of
    slurm.conf would take it for."""
    return "".join(ch for ch in key if not ch.isspace()
                   and unicodedata.category(ch) not in ("Cf", "Cc", "Zs", "Zl", "Zp"))


def _bad_value(value: Any) -> str | None:
    if isinstance(value, (dict, list)):
        return ("a slurm.conf value is one scalar (text, number or true/false), not a list or "
                "mapping (stricter than ParallelCluster, which writes the list's or mapping's "
                "Python text into slurm.conf)")
    if isinstance(value, str) and any(
            unicodedata.category(ch) in ("Cc", "Zl", "Zp") for ch in value):
        return ("line breaks and control characters are not allowed in a value (stricter than "
                "ParallelCluster: a line break starts a new slurm.conf line, e.g. "
                "'\\nProlog=...', which slips past its deny list)")
    return None


def _check_item(key: Any, value: Any, path: FieldPath, deny: frozenset[str], level: str,
                ctx: Ctx, use_deny: bool = True) -> None:
    text = str(key)
    if not KEY_RE.fullmatch(text):
        ctx.add("SLURM_SETTING_KEY", "error", path, key,
                f"{text!r} is not a slurm.conf parameter name: letters, digits and underscores, "
                "starting with a letter (stricter than ParallelCluster: a space or invisible "
                "character lets a managed setting slip past its deny list)")
    visible = _visible(text).lower()
    if use_deny and visible in deny:
        hint = (" (put prolog/epilog hooks in /opt/slurm/etc/scripts/prolog.d/ through a "
                "bootstrap script)" if visible in ("prolog", "epilog") else "")
        disguised = ("" if text.lower() in deny else
                     f" (read as {visible!r}; stricter than ParallelCluster, which compares the "
                     "key as written)")
        ctx.add("SLURM_SETTING_FORBIDDEN", "error", path, key,
                f"{text!r} is managed by ParallelCluster and cannot be set at {level} "
                f"level{hint}{disguised}")
    problem = _bad_value(value)
    if problem:
        ctx.add("SLURM_SETTING_VALUE", "error", path, value, f"{text!r}: {problem}")


def _check_mapping(settings: Any, base: FieldPath, deny: frozenset[str], level: str, ctx: Ctx) -> None:
    """A queue's or compute resource's settings: one mapping (a list is the schema's to refuse,
    but its items are still checked)."""
    items: list[tuple[Any, Any, FieldPath]] = []
    if isinstance(settings, dict):
        items = [(k, v, base + ("CustomSlurmSettings", k)) for k, v in settings.items()]
    elif isinstance(settings, list):
        items = [(k, v, base + ("CustomSlurmSettings", i)) for i, entry in enumerate(settings)
                 for k, v in as_dict(entry).items()]
    for key, value, path in items:
        _check_item(key, value, path, deny, level, ctx)


def _check_node_names(entry: dict[str, Any], path: FieldPath, ctx: Ctx) -> None:
    """CustomSlurmNodeNamesValidator: ``-st-`` and ``-dy-`` name ParallelCluster's own nodes."""
    for key, value in entry.items():
        if str(key).lower() == "nodename" and ("-st-" in str(value) or "-dy-" in str(value)):
            ctx.add("SLURM_CUSTOM_NODE_NAME", "error", path, value,
                    f"custom node name {value!r} contains '-st-' or '-dy-', which ParallelCluster "
                    "reserves for the nodes it manages; rename it")


def check_slurm_settings(cfg: Mapping[str, Any], cat: Catalog, ctx: Ctx) -> None:
    """Custom Slurm settings at cluster, queue and compute resource level."""
    sched = as_dict(cfg.get("Scheduling"))
    slurm = as_dict(sched.get("SlurmSettings"))
    deny = DENY_SLURMCONF | (DENY_ACCOUNTING if slurm.get("Database") else frozenset())
    base: FieldPath = ("Scheduling", "SlurmSettings")
    entries = slurm.get("CustomSlurmSettings") or []
    for i, entry in enumerate(entries if isinstance(entries, list) else []):
        entry = as_dict(entry)
        line = len(entry) == 1  # several keys: a custom node/partition line, not deny-listed
        for key, value in entry.items():
            _check_item(key, value, base + ("CustomSlurmSettings", i), deny, "cluster", ctx,
                        use_deny=line)
        _check_node_names(entry, base + ("CustomSlurmSettings", i), ctx)
    for qi, q in queues(cfg):
        _check_mapping(q.get("CustomSlurmSettings"), QP(qi), DENY_QUEUE, "queue", ctx)
        for ci, c in computes(q):
            _check_mapping(c.get("CustomSlurmSettings"), QP(qi) + ("ComputeResources", ci),
                           DENY_COMPUTE, "compute resource", ctx)
