"""Read and parse a YAML spec within bounds: bytes read, values after alias expansion,
nesting; a key given twice, a recursive anchor or an integer too long for ``int()`` is a clean
:class:`~hpcflow.errors.SpecError`, never a crash or a machine out of memory.

Used for job specs, cluster specs and ParallelCluster configs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from hpcflow.errors import SpecError
from hpcflow.spec.messages import format_loc, short_value, source_name

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
    """:func:`parse_yaml_nodes` without the node tree: the loaded value (None for an empty
    document).

    Raises:
        SpecError: see :func:`parse_yaml_nodes`.
    """
    return parse_yaml_nodes(text, source, max_nodes=max_nodes, max_depth=max_depth)[0]


def parse_yaml_nodes(text: str, source: str, *, max_nodes: int = MAX_SPEC_NODES,
                     max_depth: int = MAX_SPEC_DEPTH) -> tuple[Any, yaml.Node | None]:
    """Parse one YAML document with bounds on what it may expand to.

    Refused, each with a :class:`SpecError` that names ``source``: a YAML syntax error (with line
    and column), a key given twice in one mapping, nesting deeper than ``max_depth``, more than
    ``max_nodes`` nodes once aliases are expanded (alias bombs), and an anchor used inside
    itself (a recursive structure). The size check walks the node graph once per distinct
    node, so an alias bomb costs time in proportion to its text, not its expansion. An integer
    too long for Python's ``int()`` (over 4300 digits) is kept as its text, so a field that
    wants a number reports a wrong type instead of crashing.

    Returns:
        The loaded value (None for an empty document) and the composed node tree it was built
        from (None for an empty document): how each scalar was written, for a caller that wants
        the text rather than what YAML 1.1 made of it.

    Raises:
        SpecError: any of the refusals above.
    """
    loader = None
    try:
        loader = _BoundedLoader(text, max_depth)  # its reader refuses control characters at once
        node = loader.get_single_node()
        if node is None:
            return None, None
        _check_expansion(node, source, max_nodes, max_depth)
        return loader.construct_document(node), node
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
                raise _DuplicateKey(f"key {short_value(key)} is given twice (lines {seen[key]} and "
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


def yaml_node_end(text: str) -> int | None:
    """Where the one YAML node in ``text`` ends (a comment after it is not part of it)."""
    loader = None
    try:
        loader = _BoundedLoader(text, MAX_SPEC_DEPTH)
        node = loader.get_single_node()
        return None if node is None else node.end_mark.index
    except (yaml.YAMLError, _TooDeep, _DuplicateKey):
        return None
    finally:
        if loader is not None:
            loader.dispose()
