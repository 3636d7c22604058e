"""docs/cluster-spec.md is generated from ClusterSpec; this test keeps the two equal
(HPCFLOW_REGEN_GOLDEN=1 rewrites the doc)."""

import difflib
import os
from pathlib import Path

from pydantic import BaseModel

from hpcflow.spec.cluster import ClusterSpec
from hpcflow.spec.cluster_reference import cluster_reference_markdown
from hpcflow.spec.cluster_storage import STORAGE_MODELS

DOC = Path(__file__).resolve().parents[3] / "docs" / "cluster-spec.md"


def test_cluster_spec_doc_matches_the_model():
    want = cluster_reference_markdown()
    if os.environ.get("HPCFLOW_REGEN_GOLDEN") == "1":
        DOC.write_text(want)
    have = DOC.read_text() if DOC.exists() else ""
    diff = "".join(difflib.unified_diff(have.splitlines(True), want.splitlines(True),
                                        "docs/cluster-spec.md", "generated"))
    assert not diff, f"docs/cluster-spec.md is stale; rerun with HPCFLOW_REGEN_GOLDEN=1\n{diff}"


def _fields(model: type[BaseModel], seen: set) -> set[str]:
    """Every field name of ``model`` and the models below it."""
    if model in seen:
        return set()
    seen.add(model)
    names = set(model.model_fields)
    for field in model.model_fields.values():
        for arg in _models(field.annotation):
            names |= _fields(arg, seen)
    return names


def _models(annotation) -> list:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    out = []
    for arg in getattr(annotation, "__args__", ()) or ():
        out += _models(arg)
    meta = getattr(annotation, "__metadata__", ())
    if meta:
        out += _models(annotation.__origin__)
    return out


def test_every_field_of_every_model_is_listed_with_a_description():
    text = cluster_reference_markdown()
    listed = {line.split("`")[1].split(".")[-1] for line in text.splitlines()
              if line.startswith("| `")}
    missing = _fields(ClusterSpec, set()) | {n for m in STORAGE_MODELS for n in m.model_fields}
    assert missing - listed == set()
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert all(row.rstrip(" |").rsplit("|", 1)[-1].strip() for row in rows)  # a description each
    for path in ("queues.compute.instances", "storage.volume_id", "storage.size_gib",
                 "head_node.imds_secured", "pcluster", "login_nodes.count"):
        assert f"| `{path}` |" in text, path
