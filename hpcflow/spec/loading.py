"""Shared spec plumbing: read a YAML mapping, apply ``--set key=value`` overrides, and turn a
pydantic ``ValidationError`` into a :class:`~hpcflow.errors.SpecError` whose lines each name the
field path, the value and what is allowed.

Used by both the job spec and the cluster spec.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from hpcflow.errors import SpecError

_MAX_VALUE_CHARS = 60


def load_yaml_mapping(path: str | Path) -> dict[str, Any]:
    """Read a YAML file whose top level must be a mapping.

    Raises:
        SpecError: the file is missing, unreadable, not YAML, or not a mapping; the message names
            the file and, for YAML syntax errors, the line and column.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"{p}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{p}: cannot read: {exc}") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except _DuplicateKey as exc:
        raise SpecError(f"{p}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError(f"{p}: not valid YAML{where}: {problem}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SpecError(f"{p}: the top level must be a mapping of fields, got {type(data).__name__}")
    return data


class _DuplicateKey(Exception):
    pass


class _UniqueKeyLoader(yaml.SafeLoader):
    """A SafeLoader that refuses a key given twice in one mapping (plain YAML keeps the last
    one silently, so a typo'd second ``nodes:`` would win unnoticed)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _value in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            try:
                hash(key)
            except TypeError:
                continue  # an unhashable key: the base loader reports it
            if key in seen:
                raise _DuplicateKey(f"key {key!r} is given twice (lines {seen[key]} and {line}); "
                                    "keep one")
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def apply_overrides(data: Mapping[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Return a copy of ``data`` with ``key.sub=value`` overrides applied.

    Values are parsed as YAML scalars/flow collections (``nodes=4`` gives an int,
    ``program.args=[--steps, "10"]`` a list); ``key=`` sets an empty string. Intermediate
    mappings are created when missing.

    Raises:
        SpecError: an override lacks ``=``, has an empty key, or descends into a non-mapping.
    """
    result: dict[str, Any] = _deep_copy(data)
    for item in overrides:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key or any(not part for part in key.split(".")):
            raise SpecError(f"--set {item!r}: expected KEY=VALUE with a dotted key, e.g. nodes=2")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        node: dict[str, Any] = result
        parts = key.split(".")
        for depth, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                path = ".".join(parts[: depth + 1])
                raise SpecError(f"--set {item!r}: {path} is not a mapping, cannot set {key}")
            node = child
        node[parts[-1]] = value
    return result


def _deep_copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


def format_loc(loc: Iterable[Any]) -> str:
    """``("queues", 1, "name")`` -> ``"queues[1].name"``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_VALUE_CHARS else text[: _MAX_VALUE_CHARS - 3] + "..."


def spec_error(exc: ValidationError, source: str) -> SpecError:
    """Convert a pydantic error into one :class:`SpecError` with a line per problem.

    Each line reads ``<source>: <field.path>: <value> <what is wrong / allowed>``. Pydantic's
    own messages already say what is allowed ("Input should be 'srun' or 'torchrun'",
    "Extra inputs are not permitted"); the wrapper adds the path and the value.

    Args:
        exc: the pydantic error.
        source: the file (or "--set") the data came from, put in front of every line.
    """
    problems = []
    for err in exc.errors(include_url=False):
        loc = [p for p in err.get("loc", ()) if not (isinstance(p, str) and p.startswith("function-"))]
        path = format_loc(loc)
        msg = err.get("msg", "invalid")
        if err.get("type") == "extra_forbidden":
            msg = "unknown field (check the spelling; see the docs for the allowed fields)"
        elif msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        if "input" in err and err.get("type") != "missing":
            problems.append(f"{source}: {path}: {_short(err['input'])}: {msg}")
        else:
            problems.append(f"{source}: {path}: {msg}")
    header = f"{source}: {len(problems)} problem(s) in the spec"
    return SpecError(header + "\n  " + "\n  ".join(problems), problems)


def validate_model(model: type[BaseModel], data: Mapping[str, Any], source: str) -> Any:
    """``model.model_validate(data)``, raising :func:`spec_error` on failure."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise spec_error(exc, source) from None


def load_yaml_bounded(text: str, *, max_nodes: int, source: str = "<string>") -> Any:
    """Parse YAML like :func:`yaml.safe_load`, refusing a document whose aliases expand past
    ``max_nodes`` nodes, and a key given twice in one mapping.

    YAML aliases let a few hundred bytes stand for billions of items (the "billion laughs"
    document: each level repeats the one below nine times). PyYAML builds every repetition, so
    such a file exhausts memory. Here the document is first composed into its node graph, where
    an alias is one shared node; the expanded size (each alias counted as a full copy of what it
    names) is computed on that graph in time linear in the file, and Python objects are built
    only when it is within ``max_nodes``.

    Args:
        text: the YAML text.
        max_nodes: most scalars, sequences and mappings the document may expand to.
        source: the file name put in front of error messages.

    Returns:
        The parsed document (None for an empty one).

    Raises:
        SpecError: not valid YAML (with line and column), a duplicate key, a recursive alias,
            or an expanded size above ``max_nodes``.
    """
    loader = _UniqueKeyLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        try:
            size = _expanded_size(node, {}, set(), max_nodes)
        except SpecError as exc:
            raise SpecError(f"{source}: {exc}") from None
        if size > max_nodes:
            raise SpecError(f"{source}: the YAML expands to more than {max_nodes:,} values "
                            "(aliases repeating anchors); write the values out or use fewer "
                            "aliases")
        return loader.construct_document(node)
    except _DuplicateKey as exc:
        raise SpecError(f"{source}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError(f"{source}: not valid YAML{where}: {problem}") from None
    except RecursionError:
        raise SpecError(f"{source}: the YAML is nested too deeply") from None
    finally:
        loader.dispose()


def _expanded_size(node: yaml.Node, sizes: dict[int, int], active: set[int], cap: int) -> int:
    """Nodes ``node`` stands for once every alias is expanded; stops counting past ``cap``."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in active:
        mark = node.start_mark
        raise SpecError(f"an alias refers to a value that contains it (line {mark.line + 1}): "
                        "recursive YAML is not allowed")
    active.add(key)
    total = 1
    if isinstance(node, yaml.SequenceNode):
        children: list[yaml.Node] = list(node.value)
    elif isinstance(node, yaml.MappingNode):
        children = [part for pair in node.value for part in pair]
    else:
        children = []
    for child in children:
        total += _expanded_size(child, sizes, active, cap)
        if total > cap:
            break
    active.discard(key)
    sizes[key] = min(total, cap + 1)
    return sizes[key]
