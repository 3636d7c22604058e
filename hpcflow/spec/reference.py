"""Render a spec model's field reference as Markdown (docs/job-spec.md is generated from it, so
the docs cannot drift from the model: a test compares them)."""

from __future__ import annotations

from typing import Any

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


def _default(field: Any) -> str:
    if field.is_required():
        return "**required**"
    value = field.default
    if value is PydanticUndefined or value is None:
        return "-"
    if isinstance(value, BaseModel):
        return "see below"
    return f"`{value!r}`" if not isinstance(value, str) else f"`{value}`"


def reference_markdown(model: type[BaseModel], title: str, intro: str = "") -> str:
    """A Markdown page with one table per (nested) model: field, default, description.

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
        lines += [f"## {heading}", "", "| field | default | meaning |", "|---|---|---|"]
        for name, field in current.model_fields.items():
            path = f"{prefix}.{name}" if prefix else name
            desc = (field.description or "").replace("|", "\\|")
            lines.append(f"| `{path}` | {_default(field)} | {desc} |")
            nested = _nested_model(field.annotation)
            if nested is not None:
                queue.append((path, nested))
        lines.append("")
    return "\n".join(lines)
