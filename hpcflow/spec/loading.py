"""Shared spec plumbing: read a YAML mapping, apply ``--set key=value`` overrides, and turn a
pydantic ``ValidationError`` into a :class:`~hpcflow.errors.SpecError` whose lines each name the
field path, the value and what is allowed.

Used by both the job spec and the cluster spec.
"""

from __future__ import annotations

import math
import re
import reprlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from hpcflow.errors import SpecError

_MAX_VALUE_CHARS = 60

#: A spec file is read only this far: ``/dev/zero`` or a huge file is refused, not read forever.
#: Job and cluster specs are a few hundred bytes; the biggest ParallelCluster config a few KiB.
MAX_SPEC_BYTES = 256 * 1024
#: Nodes (scalars, lists, mappings) a spec may hold once YAML aliases are expanded: a few lines
#: of nested anchors (a "billion laughs" file) would otherwise expand to ~10^9 objects.
MAX_SPEC_NODES = 10_000
#: Nesting of lists and mappings (after alias expansion); PyYAML's composer recurses per level.
MAX_SPEC_DEPTH = 32


def read_spec_text(path: str | Path, *, max_bytes: int = MAX_SPEC_BYTES) -> str:
    """Read at most ``max_bytes`` of a UTF-8 spec file.

    Args:
        path: the file (any readable file: a pipe from ``<(...)`` works, ``/dev/zero`` is
            refused after ``max_bytes``).
        max_bytes: the largest file accepted, in bytes.

    Raises:
        SpecError: the file is missing, unreadable, not UTF-8, or larger than ``max_bytes``.
    """
    p = Path(path)
    try:
        with p.open("rb") as fh:
            raw = fh.read(max_bytes + 1)
    except FileNotFoundError:
        raise SpecError(f"{source_name(p)}: no such file") from None
    except OSError as exc:
        raise SpecError(f"{source_name(p)}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > max_bytes:
        raise SpecError(f"{source_name(p)}: larger than {max_bytes} bytes; a spec is a short YAML "
                        "file (is this the right file?)")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(f"{source_name(p)}: not UTF-8 text (byte {exc.start}: "
                        f"{raw[exc.start:exc.start + 1]!r})") from None


def parse_yaml_bounded(text: str, source: str, *, max_nodes: int = MAX_SPEC_NODES,
                       max_depth: int = MAX_SPEC_DEPTH) -> Any:
    """Parse one YAML document with bounds on what it may expand to.

    Refused, each with a :class:`SpecError` that names ``source``: a YAML syntax error (with line
    and column), a key given twice in one mapping, nesting deeper than ``max_depth``, more than
    ``max_nodes`` nodes once aliases are expanded (alias bombs), and an anchor used inside
    itself (a recursive structure). The size check walks the node graph once per distinct
    node, so an alias bomb costs time in proportion to its text, not its expansion. An integer
    too long for Python's ``int()`` (over 4300 digits) is kept as its text, so a field that
    wants a number reports a wrong type instead of crashing.

    Returns:
        The loaded value (None for an empty document).
    """
    loader = None
    try:
        loader = _BoundedLoader(text, max_depth)  # its reader refuses control characters at once
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node, source, max_nodes, max_depth)
        return loader.construct_document(node)
    except _DuplicateKey as exc:
        raise SpecError(f"{source}: {exc}") from None
    except _TooDeep as exc:
        raise SpecError(f"{source}: nested deeper than {max_depth} levels of lists and mappings "
                        f"(line {exc.line}); a spec is a shallow mapping") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError(f"{source}: not valid YAML{where}: {problem}") from None
    finally:
        if loader is not None:
            loader.dispose()


def load_yaml_bounded(path: str | Path, *, max_bytes: int = MAX_SPEC_BYTES,
                      max_nodes: int = MAX_SPEC_NODES, max_depth: int = MAX_SPEC_DEPTH) -> Any:
    """:func:`read_spec_text` then :func:`parse_yaml_bounded`: a YAML file read and parsed
    within bounds (bytes read, expanded nodes, nesting); any top-level type.

    Raises:
        SpecError: see the two functions.
    """
    return parse_yaml_bounded(read_spec_text(path, max_bytes=max_bytes), source_name(Path(path)),
                              max_nodes=max_nodes, max_depth=max_depth)


def load_yaml_mapping(path: str | Path) -> dict[str, Any]:
    """Read a YAML file whose top level must be a mapping, within the bounds of
    :func:`load_yaml_bounded`.

    Raises:
        SpecError: the file is missing, unreadable, too big, not YAML, or not a mapping; the
            message names the file and, for YAML syntax errors, the line and column.
    """
    return yaml_mapping(load_yaml_bounded(path), source_name(Path(path)))


def yaml_mapping(data: Any, source: str) -> dict[str, Any]:
    """``data`` when it is a mapping (``None``, an empty document, is ``{}``).

    Raises:
        SpecError: the top level is not a mapping.
    """
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SpecError(f"{source}: the top level must be a mapping of fields, got {type(data).__name__}")
    return data


def source_name(path: str | Path) -> str:
    """A file name as messages show it: control characters escaped so it cannot forge lines."""
    text = str(path)
    return text if text.isprintable() else ascii(text)


class _DuplicateKey(Exception):
    pass


class _TooDeep(Exception):
    def __init__(self, line: int) -> None:
        self.line = line


class _UniqueKeyLoader(yaml.SafeLoader):
    """A SafeLoader that refuses a key given twice in one mapping (plain YAML keeps the last
    one silently, so a typo'd second ``nodes:`` would win unnoticed)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _value in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *base`: merged keys may be overridden here (flatten_mapping)
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            try:
                hash(key)
            except TypeError:
                continue  # an unhashable key: the base loader reports it
            if key in seen:
                raise _DuplicateKey(f"key {_short(key)} is given twice (lines {seen[key]} and "
                                    f"{line}); keep one")
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


class _BoundedLoader(_UniqueKeyLoader):
    """Refuses nesting deeper than ``max_depth`` while composing (PyYAML's composer recurses
    once per level, so 5000 levels would end in RecursionError), and keeps integers too long
    for ``int()`` as text."""

    def __init__(self, stream: str, max_depth: int) -> None:
        super().__init__(stream)
        self._depth = 0
        self._max_depth = max_depth

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            return super().compose_node(parent, index)
        self._depth += 1
        try:
            if self._depth > self._max_depth:
                raise _TooDeep(self.peek_event().start_mark.line + 1)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_yaml_int(self, node: yaml.ScalarNode) -> Any:
        try:
            return super().construct_yaml_int(node)
        except ValueError:  # more digits than int() converts (sys.get_int_max_str_digits)
            return self.construct_scalar(node)


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _BoundedLoader.construct_yaml_int)


def _check_expansion(root: yaml.Node, source: str, max_nodes: int, max_depth: int) -> None:
    """Refuse a node graph that expands past ``max_nodes`` nodes or ``max_depth`` levels, or
    that contains itself. Each distinct node is visited once (sizes are memoised), so the cost
    follows the text, not the expansion. Recursion stops at ``max_depth``."""
    seen: dict[int, tuple[int, int]] = {}  # id -> (expanded size, levels below it)
    on_path: set[int] = set()

    def too_deep(where: str) -> SpecError:
        return SpecError(f"{source}: {where}: nested deeper than {max_depth} levels once YAML "
                         "aliases are expanded")

    def size(node: yaml.Node, depth: int, where: str) -> int:
        key = id(node)
        if key in on_path:
            raise SpecError(f"{source}: {where}: an anchor is used inside itself (a recursive "
                            "structure); a spec cannot contain itself")
        if key in seen:
            total, height = seen[key]
            if depth + height > max_depth:
                raise too_deep(where)
            return total
        if depth > max_depth:
            raise too_deep(where)
        on_path.add(key)
        total, height = 1, 0
        if isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:
            children = []
        for child in children:
            total += size(child, depth + 1, where)
            height = max(height, 1 + seen[id(child)][1])
            if total > max_nodes:
                raise SpecError(f"{source}: {where}: expands to more than {max_nodes} values "
                                "(YAML anchors and aliases); a spec is a short file")
        on_path.discard(key)
        seen[key] = (total, height)
        return total

    if isinstance(root, yaml.MappingNode):
        total = 1
        for key_node, value in root.value:
            name = key_node.value if isinstance(key_node, yaml.ScalarNode) else "(a key)"
            where = format_loc([name])
            total += size(key_node, 1, where) + size(value, 1, where)
            if total > max_nodes:
                raise SpecError(f"{source}: {where}: the file expands to more than {max_nodes} "
                                "values (YAML anchors and aliases); a spec is a short file")
    else:
        size(root, 0, "(top level)")


def apply_overrides(data: Mapping[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Return a copy of ``data`` with ``key.sub=value`` overrides applied.

    Values are parsed as YAML scalars/flow collections (``nodes=4`` gives an int,
    ``program.args=[--steps, "10"]`` a list); ``key=`` sets an empty string. A scalar followed
    by `` #...`` keeps its whole text (``env.NOTE=run #2`` is ``"run #2"``, not a YAML comment);
    a list or mapping followed by one is refused. Intermediate mappings are created when
    missing.

    Raises:
        SpecError: an override lacks ``=``, has an empty key, descends into a non-mapping, or
            its value is nested too deep (the bounds of :func:`parse_yaml_bounded`).
    """
    overrides = list(overrides)
    if not overrides:
        return dict(data)
    result: dict[str, Any] = _deep_copy(data)
    for item in overrides:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key or any(not part for part in key.split(".")):
            raise SpecError(f"--set {item!r}: expected KEY=VALUE with a dotted key, e.g. nodes=2")
        value = _override_value(key, raw)
        node: dict[str, Any] = result
        parts = key.split(".")
        for depth, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise SpecError(f"--set {item!r}: {format_loc(parts[: depth + 1])} is not a "
                                f"mapping, cannot set {format_loc(parts)}")
            node = child
        node[parts[-1]] = value
    return result


def _override_value(key: str, raw: str) -> Any:
    """The value of ``--set KEY=RAW``: a YAML scalar or flow collection, else the text."""
    if not raw.strip():
        return ""
    try:
        value = parse_yaml_bounded(raw, source_name(f"--set {key}"))
    except SpecError as exc:
        if "not valid YAML" in str(exc):
            return raw
        raise
    end = _yaml_end(raw)
    if end is not None and raw[end:].strip():
        # ' #' started a YAML comment: `--set 'env.NOTE=run #2'` means the text "run #2".
        if isinstance(value, dict | list):
            raise SpecError(f"{source_name(f'--set {key}')}: {_short(raw)}: ' #' starts a YAML "
                            f"comment, which would drop {_short(raw[end:].strip())} from the "
                            "value; quote the items that hold '#'")
        return raw.strip()
    return value


def _yaml_end(text: str) -> int | None:
    """Where the one YAML node in ``text`` ends (a comment after it is not part of it)."""
    loader = _BoundedLoader(text, MAX_SPEC_DEPTH)
    try:
        node = loader.get_single_node()
        return None if node is None else node.end_mark.index
    except (yaml.YAMLError, _TooDeep, _DuplicateKey):
        return None
    finally:
        loader.dispose()


def _deep_copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


_PLAIN_KEY_RE = re.compile(r"[A-Za-z0-9_@#%+:=/-]+")


def format_loc(loc: Iterable[Any]) -> str:
    """``("queues", 1, "name")`` -> ``"queues[1].name"``.

    A key that is not plain text (a newline, a control character, a space, a dot) is shown
    quoted and escaped, ``env['A\\n#SBATCH --uid=0']``, so a key cannot forge a line of output.
    """
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and _PLAIN_KEY_RE.fullmatch(part):
            out += ("." if out else "") + part
        else:
            out += f"[{_short(part)}]"
    return out or "(top level)"


class _ShortRepr(reprlib.Repr):
    """``reprlib`` with room for a path or a command line, and big integers summarised (repr of
    an int over 4300 digits raises ValueError; a long one is unreadable anyway)."""

    def __init__(self) -> None:
        super().__init__()
        self.maxstring = self.maxother = self.maxlong = _MAX_VALUE_CHARS

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 128:
            digits = int(x.bit_length() * math.log10(2)) + 1
            return f"<{'a negative' if x < 0 else 'an'} integer of about {digits} digits>"
        return repr(x)

    def repr_str(self, x: str, level: int) -> str:
        if len(x) > _MAX_VALUE_CHARS:
            return ascii(x[:_MAX_VALUE_CHARS])[:-1] + "'..."
        return x.__repr__() if x.isprintable() else ascii(x)


_SHORT_REPR = _ShortRepr()


def _short(value: Any) -> str:
    """A value as messages show it: bounded in length, control characters escaped."""
    text = _SHORT_REPR.repr(value)
    return text if len(text) <= 2 * _MAX_VALUE_CHARS else text[: 2 * _MAX_VALUE_CHARS - 3] + "..."


def text_problems(data: Any, source: str, loc: tuple[Any, ...] = ()) -> list[str]:
    """Lines naming every key or string in ``data`` that is not valid Unicode text.

    YAML's ``"\\ud800"`` escape and ``--set`` with bytes that are not UTF-8 give lone
    surrogates: Python holds them, but no file, environment or ``#SBATCH`` line can. ``data``
    must be bounded (as :func:`parse_yaml_bounded` returns it): shared values are walked again.
    """
    out: list[str] = []
    if isinstance(data, str):
        if _SURROGATE_RE.search(data):
            out.append(f"{source}: {format_loc(loc)}: {_short(data)}: not valid Unicode text "
                       "(a lone surrogate such as \\ud800 cannot be written to a file)")
    elif isinstance(data, Mapping):
        for key, value in data.items():
            if isinstance(key, str) and _SURROGATE_RE.search(key):
                out.append(f"{source}: {format_loc((*loc, key))}: the key is not valid Unicode "
                           "text (a lone surrogate such as \\ud800)")
                continue
            out += text_problems(value, source, (*loc, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            out += text_problems(value, source, (*loc, i))
    return out


_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def spec_error(exc: ValidationError, source: str) -> SpecError:
    """Convert a pydantic error into one :class:`SpecError` with a line per problem.

    Each line reads ``<source>: <field.path>: <value> <what is wrong / allowed>``. Pydantic's
    own messages already say what is allowed ("Input should be 'srun' or 'torchrun'",
    "Extra inputs are not permitted"); the wrapper adds the path and the value.

    Args:
        exc: the pydantic error.
        source: the file (or "--set") the data came from, put in front of every line.
    """
    source = source_name(source)
    problems = []
    for err in exc.errors(include_url=False):
        # pydantic marks a dict key's own error with a trailing "[key]": the path names the key.
        loc = [p for p in err.get("loc", ())
               if not (isinstance(p, str) and (p.startswith("function-") or p == "[key]"))]
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
    """``model.model_validate(data)``, raising :func:`spec_error` on failure.

    Raises:
        SpecError: a string or key is not valid Unicode (:func:`text_problems`), or the model
            refuses the data.
    """
    source = source_name(source)
    if isinstance(data, Mapping) and data and not any(key in model.model_fields for key in data):
        raise SpecError(f"{source}: none of its {len(data)} top-level keys is a field of "
                        f"{model.__name__} ({', '.join(list(model.model_fields)[:4])}, ...); is "
                        "this the right file?")
    if problems := text_problems(data, source):
        header = f"{source}: {len(problems)} problem(s) in the spec"
        raise SpecError(header + "\n  " + "\n  ".join(problems), problems)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise spec_error(exc, source) from None
