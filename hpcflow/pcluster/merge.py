"""Deep merge of a raw ParallelCluster block over a rendered config, and its inverse.

The rules (the cluster spec's ``pcluster:`` block, documented in docs/cluster-spec.md):

- the raw block wins: a scalar or a list in it replaces the rendered value;
- mappings merge key by key, recursively;
- lists of named items (every item a mapping with a ``Name``: ``SlurmQueues``,
  ``ComputeResources``, ``SharedStorage``, ``LoginNodes.Pools``, ...) merge item by item: a raw
  item merges into the rendered item of the same ``Name``, keeping the rendered order, and a raw
  item with a new ``Name`` is appended;
- any other list replaces the rendered list whole;
- ``null`` removes the key from the rendered config.

:func:`raw_delta` is the inverse: the smallest raw block that turns one config into another
(used by ``hpcflow cluster import``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

_SAME = object()


def _named(items: Any) -> bool:
    return (isinstance(items, list) and bool(items)
            and all(isinstance(i, dict) and "Name" in i for i in items)
            and len({str(i["Name"]) for i in items}) == len(items))


def strip_nulls(value: Any) -> Any:
    """``value`` with every ``None`` mapping value removed, recursively."""
    if isinstance(value, dict):
        return {k: strip_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [strip_nulls(v) for v in value]
    return value


def deep_merge(base: Any, raw: Any) -> Any:
    """``raw`` merged over ``base`` by the rules above; neither argument is changed."""
    if isinstance(base, dict) and isinstance(raw, Mapping):
        out = copy.deepcopy(base)
        for key, value in raw.items():
            if value is None:
                out.pop(key, None)
            elif key in out:
                out[key] = deep_merge(out[key], value)
            else:
                out[key] = strip_nulls(copy.deepcopy(value))
        return out
    if _named(base) and _named(raw):
        by_name = {str(item["Name"]): item for item in raw}
        merged = [deep_merge(item, by_name[str(item["Name"])]) if str(item["Name"]) in by_name
                  else copy.deepcopy(item) for item in base]
        known = {str(item["Name"]) for item in base}
        merged += [strip_nulls(copy.deepcopy(item)) for item in raw
                   if str(item["Name"]) not in known]
        return merged
    return strip_nulls(copy.deepcopy(raw))


def raw_delta(base: Any, target: Any) -> Any:
    """The raw block ``d`` with ``deep_merge(base, d) == target``, as small as the rules allow;
    ``None`` when ``base`` already equals ``target``.

    ``target`` must hold no ``null`` values (they would read as removals).
    """
    delta = _delta(base, target)
    return None if delta is _SAME else delta


def _delta(base: Any, target: Any) -> Any:
    if base == target and type(base) is type(target):
        return _SAME
    if isinstance(base, dict) and isinstance(target, dict):
        out: dict[str, Any] = {}
        for key, value in target.items():
            if key not in base:
                out[key] = copy.deepcopy(value)
            else:
                sub = _delta(base[key], value)
                if sub is not _SAME:
                    out[key] = sub
        for key in base:
            if key not in target:
                out[key] = None
        return out or _SAME
    if _named(base) and _named(target):
        delta = _named_delta(base, target)
        if delta is not None:
            return delta
    return copy.deepcopy(target)


def _named_delta(base: list[dict[str, Any]], target: list[dict[str, Any]]) -> Any:
    """Item-by-item delta of two named lists, or None when merging by name cannot give
    ``target`` (an item to drop, or another order): then the caller replaces the list."""
    base_names = [str(i["Name"]) for i in base]
    target_names = [str(i["Name"]) for i in target]
    common = [n for n in target_names if n in base_names]
    if common != base_names or target_names[: len(common)] != common:
        return None
    by_name = {str(i["Name"]): i for i in base}
    out = []
    for item in target:
        name = str(item["Name"])
        if name not in by_name:
            out.append(copy.deepcopy(item))
            continue
        sub = _delta(by_name[name], item)
        if sub is not _SAME:
            out.append({"Name": item["Name"], **sub})
    return out or _SAME
