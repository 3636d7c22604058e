"""Shared spec plumbing: apply ``--set key=value`` overrides, keep the written text of scalars
YAML would turn into numbers, and turn a pydantic
``ValidationError`` into a :class:`~hpcflow.errors.SpecError` whose lines each name the field
path, the value and what is allowed. Reading YAML within bounds lives in
:mod:`hpcflow.spec.yamlread` and is re-exported here (``load_yaml_bounded``,
``load_yaml_mapping``, ...), so a spec module needs only this import.

Used by both the job spec and the cluster spec.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from hpcflow.errors import SpecError
from hpcflow.spec.messages import format_loc, source_name
from hpcflow.spec.messages import short_value as _short
from hpcflow.spec.yamlread import (  # noqa: F401 - re-exported: the spec loaders' one import
    MAX_SPEC_BYTES,
    MAX_SPEC_DEPTH,
    MAX_SPEC_NODES,
    load_yaml_bounded,
    load_yaml_mapping,
    parse_yaml_bounded,
    parse_yaml_nodes,
    read_spec_text,
    yaml_mapping,
    yaml_node_end,
)


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
    end = yaml_node_end(raw)
    if end is not None and raw[end:].strip():
        # ' #' started a YAML comment: `--set 'env.NOTE=run #2'` means the text "run #2".
        if isinstance(value, dict | list):
            raise SpecError(f"{source_name(f'--set {key}')}: {_short(raw)}: ' #' starts a YAML "
                            f"comment, which would drop {_short(raw[end:].strip())} from the "
                            "value; quote the items that hold '#'")
        return raw.strip()
    return value


def _deep_copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


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
        if (line := _key_problem(err)) is not None:
            problems.append(f"{source}: {line}")
            continue
        # pydantic marks a dict key's own error with a trailing "[key]": the path names the key.
        loc = [p for p in err.get("loc", ())
               if not (isinstance(p, str) and (p.startswith("function-") or p == "[key]"))]
        path = format_loc(loc)
        msg = err.get("msg", "invalid")
        if err.get("type") == "extra_forbidden":
            msg = "unknown field (check the spelling; see the docs for the allowed fields)"
        elif err.get("type") == "model_type":  # pydantic names the class ("... of ProgramSpec")
            msg = "should be a block of fields (a YAML mapping such as `key: value` lines)"
        elif msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        if "input" in err and err.get("type") != "missing":
            problems.append(f"{source}: {path}: {_short(err['input'])}: {msg}")
        else:
            problems.append(f"{source}: {path}: {msg}")
    header = f"{source}: {len(problems)} problem(s) in the spec"
    return SpecError(header + "\n  " + "\n  ".join(problems), problems)


def _key_problem(err: Any) -> str | None:
    """``path: what is wrong`` for a key that is not text (``~: x``, ``5: x``), whose own
    pydantic line read "None: None: Keys should be strings"; None for any other error."""
    loc = list(err.get("loc", ()))
    if err.get("type") == "invalid_key":
        parent = loc[:-1]
    elif loc and loc[-1] == "[key]" and not isinstance(err.get("input"), str):
        parent = loc[:-2]
    else:
        return None
    key = err.get("input")
    what = ("a null key (YAML's `~`, `null`, or a line that starts with ':')" if key is None
            else f"the key {_short(key)} ({type(key).__name__})")
    where = format_loc(parent) if parent else "(top level)"
    return f"{where}: {what} is not allowed: keys are field names or text; quote it or remove it"


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


_NUMERIC_TAGS = {"tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:bool"}


def keep_literal_scalars(data: dict[str, Any], root: yaml.Node | None) -> dict[str, Any]:
    """Put back the written text of unquoted scalars YAML turned into numbers or booleans, for
    ``time_limit``, ``sagemaker.max_wait``, ``env`` values and ``program.args``/``argv`` items
    of a job spec.

    ``time_limit: 1:30:00`` is the base-60 int 5400 in YAML 1.1 and ``env: {MODE: 0755}`` an
    octal int; ``root`` is the node tree :func:`parse_yaml_nodes` composed ``data`` from, so the
    file is parsed once.
    """
    if not isinstance(root, yaml.MappingNode):
        return data

    def raw(node: Any) -> str | None:
        return node.value if isinstance(node, yaml.ScalarNode) and node.tag in _NUMERIC_TAGS else None

    def children(node: Any) -> dict[str, Any]:
        if not isinstance(node, yaml.MappingNode):
            return {}
        return {k.value: v for k, v in node.value if isinstance(k, yaml.ScalarNode)}

    top = children(root)
    if "time_limit" in top and (value := raw(top["time_limit"])) is not None:
        data["time_limit"] = value
    env = data.get("env")
    if isinstance(env, dict):
        for name, node in children(top.get("env")).items():
            if name in env and (value := raw(node)) is not None:
                env[name] = value
    sagemaker = data.get("sagemaker")
    if isinstance(sagemaker, dict):
        node = children(top.get("sagemaker")).get("max_wait")
        if "max_wait" in sagemaker and (value := raw(node)) is not None:
            sagemaker["max_wait"] = value
    program = data.get("program")
    if isinstance(program, dict):
        for key, node in children(top.get("program")).items():
            items = program.get(key)
            if (
                key in ("args", "argv")
                and isinstance(node, yaml.SequenceNode)
                and isinstance(items, list)
                and len(items) == len(node.value)
            ):
                for i, item_node in enumerate(node.value):
                    if (value := raw(item_node)) is not None:
                        items[i] = value
    return data


def keep_override_text(data: dict[str, Any], parts: list[str], raw: str) -> None:
    """After ``--set time_limit=1:30:00`` keep the text when YAML made it a number or bool."""
    node: Any = data
    for part in parts[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict) and isinstance(node.get(parts[-1]), int | float | bool):
        node[parts[-1]] = raw
