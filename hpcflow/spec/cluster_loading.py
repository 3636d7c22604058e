"""Read a cluster spec (or a ParallelCluster config) file within bounds and validate it into a
:class:`~hpcflow.spec.cluster.ClusterSpec`, with errors that name each field path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import PydanticCustomError

from hpcflow.errors import SpecError
from hpcflow.spec.cluster import ClusterSpec
from hpcflow.spec.cluster_storage import STORAGE_TAGS
from hpcflow.spec.loading import apply_overrides, parse_yaml_bounded, read_spec_text, spec_error


def load_cluster_spec(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> ClusterSpec:
    """Read a cluster spec YAML file, apply ``--set`` overrides, and validate its shape.

    Raises:
        SpecError: the file cannot be read, or a field is unknown, of the wrong type or not
            allowed; one line per problem naming the field path.
    """
    if Path(path).is_dir():
        raise SpecError(f"{path}: is a directory; give the spec file, e.g. cluster.spec.yaml")
    data = load_yaml_file(path)
    if not data and not overrides:
        raise SpecError(f"{path}: the file is empty; a cluster spec needs at least region, "
                        "head_node and queues (see docs/admin-guide.md, step 3)")
    if overrides:
        data = apply_overrides(data, overrides)
    return validate_cluster_spec(data, str(path))


def validate_cluster_spec(data: dict[str, Any], source: str) -> ClusterSpec:
    """``ClusterSpec.model_validate(data)``, raising a :class:`SpecError` whose lines name
    ``storage[1].size_gib`` rather than pydantic's ``storage[1].ebs.size_gib`` (the storage kind
    pydantic adds to the path of a tagged union).

    A text value with a line break or another control character is refused wherever it is
    (outside the raw ``pcluster:`` block, which the rules and the schema check): every value of a
    cluster spec is one line, and a line break written into the config could start a new line of
    a file ParallelCluster renders from it.

    Raises:
        SpecError: one line per invalid field.
    """
    bad = [f"{source}: {path}: {value!r}: a line break or control character is not allowed; "
           "values are one line" for path, value in _multiline(data, "")]
    if bad:
        raise SpecError(f"{source}: {len(bad)} problem(s) in the spec\n  " + "\n  ".join(bad),
                        bad)
    try:
        return ClusterSpec.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors(include_url=False):
            loc = list(err["loc"])
            loc = [p for i, p in enumerate(loc)
                   if not (p in STORAGE_TAGS and i > 0 and isinstance(loc[i - 1], int))]
            msg = err["msg"].replace("{", "{{").replace("}", "}}")
            lines.append({"type": PydanticCustomError(err["type"], msg), "loc": tuple(loc),
                          "input": err["input"]})
        raise spec_error(ValidationError.from_exception_data(exc.title, lines), source) from None


# A real cluster config or spec is a few thousand YAML values (50 queues x 50 compute resources
# at most); the bound only stops alias bombs (``hpcflow.spec.loading.parse_yaml_bounded``).
MAX_YAML_NODES = 200_000
#: The largest cluster spec or config file read, in bytes (a 50-queue config is about 100 KiB).
MAX_YAML_BYTES = 4 * 1024 * 1024


def load_yaml_file(path: str | Path) -> dict[str, Any]:
    """Read a cluster spec or ParallelCluster YAML file whose top level must be a mapping, with
    aliases bounded to :data:`MAX_YAML_NODES` expanded values.

    Raises:
        SpecError: the file is missing, unreadable, not YAML, expands past the bound, or is not
            a mapping; the message names the file.
    """
    p = Path(path)
    text = read_spec_text(p, max_bytes=MAX_YAML_BYTES)  # /dev/zero is refused, not read forever
    data = parse_yaml_bounded(text, str(p), max_nodes=MAX_YAML_NODES)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SpecError(f"{p}: the top level must be a mapping of fields, got {type(data).__name__}")
    return data


def _multiline(node: Any, path: str) -> list[tuple[str, str]]:
    """(field path, value) of every string holding a control character, keys included."""
    found: list[tuple[str, str]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            sub = f"{path}.{key}" if path else str(key)
            if not path and key == "pcluster":
                continue
            if isinstance(key, str) and _has_control(key):
                found.append((sub, key))
            found += _multiline(value, sub)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += _multiline(value, f"{path}[{i}]")
    elif isinstance(node, str) and _has_control(node):
        found.append((path, node))
    return found


def _has_control(text: str) -> bool:
    return any(ord(ch) < 32 or ord(ch) == 127 or ch in "\u0085\u2028\u2029" for ch in text)
