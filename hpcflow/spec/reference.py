"""Render a spec model's field reference as Markdown (docs/job-spec.md is generated from it, so
the docs cannot drift from the model: a test compares them)."""

from __future__ import annotations

from typing import Any, Literal, get_args, get_origin

import annotated_types
from pydantic import BaseModel
from pydantic_core import PydanticUndefined


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _nested_model(arg)
        if found is not None:
            return found
    return None


def _nested_prefix(path: str, annotation: Any) -> str:
    """Where a nested model's fields sit under ``path``: ``path`` itself, or ``path.<NAME>`` when
    the model is the value type of a mapping (``env: {NAME: {from_file: ...}}``): its fields
    are then fields of one entry, never of the mapping."""
    if get_origin(annotation) is dict:
        return f"{path}.<NAME>"
    for arg in getattr(annotation, "__args__", ()) or ():
        if _nested_model(arg) is not None:
            return _nested_prefix(path, arg)
    return path


def _default(field: Any) -> str:
    if field.is_required():
        return "**required**"
    value = field.default
    if value is PydanticUndefined and field.default_factory is not None:
        value = field.default_factory()
    if value is PydanticUndefined or value is None:
        return "-"
    if isinstance(value, BaseModel):
        return "see below"
    return f"`{value!r}`" if not isinstance(value, str) else f"`{value}`"


def _limits(field: Any) -> str:
    """What a field allows: ``limits`` from ``json_schema_extra``, else its bounds or choices."""
    extra = field.json_schema_extra
    if isinstance(extra, dict) and "limits" in extra:
        return str(extra["limits"])
    low = high = None
    for item in [*field.metadata, *_optional_bounds(field.annotation)]:
        if isinstance(item, annotated_types.Ge):
            low = item.ge
        elif isinstance(item, annotated_types.Le):
            high = item.le
    if low is not None and high is not None:
        return f"{low} to {high:_}".replace("_", ",")
    if low is not None:
        return f"at least {low}"
    if get_origin(field.annotation) is Literal:
        return ", ".join(f"`{v}`" for v in get_args(field.annotation))
    return ""


def _optional_bounds(annotation: Any) -> list[Any]:
    """The ``ge``/``le`` metadata of an ``Annotated[int, ..., Field(ge=, le=)] | None`` (pydantic
    keeps it inside the union, not on the field)."""
    out: list[Any] = []
    for arg in getattr(annotation, "__args__", ()) or ():
        for meta in getattr(arg, "__metadata__", ()):
            out += list(getattr(meta, "metadata", ()))
    return out


def reference_markdown(model: type[BaseModel], title: str, intro: str = "") -> str:
    """A Markdown page with one table per (nested) model: field, default, limits, description.

    Args:
        model: the top-level pydantic model.
        title: the page title.
        intro: a paragraph under the title.
    """
    lines = [f"# {title}", ""]
    if intro:
        lines += [intro.strip(), ""]
    queue: list[tuple[str, type[BaseModel]]] = [("", model)]
    seen: set[type[BaseModel]] = set()
    while queue:
        prefix, current = queue.pop(0)
        if current in seen:
            continue
        seen.add(current)
        heading = f"`{prefix}`" if prefix else "Top level"
        lines += [f"## {heading}", ""]
        if prefix.endswith(".<NAME>") and current.__doc__:
            # A mapping's value: say that the table is one form of one entry, not the mapping's.
            doc = current.__doc__.strip()
            lines += [f"When an entry's value is a mapping: {doc[:1].lower()}{doc[1:]}", ""]
        lines += ["| field | default | limits | meaning |", "|---|---|---|---|"]
        for name, field in current.model_fields.items():
            path = f"{prefix}.{name}" if prefix else name
            desc = (field.description or "").replace("|", "\\|")
            limits = _limits(field).replace("|", "\\|")
            lines.append(f"| `{path}` | {_default(field)} | {limits} | {desc} |")
            nested = _nested_model(field.annotation)
            if nested is not None:
                queue.append((_nested_prefix(path, field.annotation), nested))
        lines.append("")
    return "\n".join(lines)
