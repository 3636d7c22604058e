"""Bounded JSON and the kinds of a value: what every decoder of :mod:`hpcflow.contract` stands
on. One JSON line is bounded in length and in nesting depth (``json.loads`` of a line nested
100,000 levels deep raises ``RecursionError``, not ``ValueError``); a boolean is never a number
(``true`` is not ``1``), and a number is finite (``1e400`` reads as infinity) and within
:data:`MAX_MAGNITUDE`."""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["KINDS", "MAX_DEPTH", "MAX_LINE_CHARS", "MAX_MAGNITUDE", "fits", "is_int", "is_number",
           "loads_bounded"]

#: The deepest nesting a record line may have: an event is two levels deep (``first_failure``,
#: ``budgets``); a rank's error record one.
MAX_DEPTH = 16
#: The longest line decoded, in characters: an event is ~200 bytes, a rank's error record a few
#: KiB (its traceback is bounded by the runtime).
MAX_LINE_CHARS = 1024 * 1024
#: The largest magnitude a number may have: above any Unix time, step, byte count or exit
#: status a job writes, below where a float stops holding whole numbers exactly (2**53).
MAX_MAGNITUDE = 2**53


def loads_bounded(text: str | bytes, *, max_depth: int = MAX_DEPTH,
                  max_chars: int = MAX_LINE_CHARS) -> Any:
    """``json.loads(text)``, refusing a text longer than ``max_chars`` or nested deeper than
    ``max_depth`` (before the parser recurses: its ``RecursionError`` is caught too).

    Raises:
        ValueError: not JSON, too long or too deep.
    """
    if len(text) > max_chars:
        raise ValueError(f"longer than {max_chars} characters")
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    # Fast path: fewer openers than the bound cannot nest deeper than it.
    if text.count("[") + text.count("{") > max_depth and _depth(text) > max_depth:
        raise ValueError(f"nested deeper than {max_depth} levels")
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deep") from None


def _depth(text: str) -> int:
    """The deepest bracket nesting of ``text``, brackets inside JSON strings not counted (an
    upper bound for a text that is not JSON: the parser refuses it anyway)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_DEPTH * 4:
                    return deepest
        elif ch in "]}":
            depth -= 1
    return deepest


def is_number(value: Any) -> bool:
    """A JSON number hpcflow takes: an int or float, not a boolean, finite, at most
    :data:`MAX_MAGNITUDE` in magnitude."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and abs(value) <= MAX_MAGNITUDE)


def is_int(value: Any) -> bool:
    """A whole JSON number hpcflow takes (:func:`is_number`, and an ``int``)."""
    return isinstance(value, int) and is_number(value)


#: The kinds of member: a test of the value. ``?`` after a kind also allows null.
KINDS = {
    "int": is_int,
    "count": lambda v: is_int(v) and v >= 0,
    "number": is_number,
    "str": lambda v: isinstance(v, str),
    "bool": lambda v: isinstance(v, bool),
    "list": lambda v: isinstance(v, list),
    "map": lambda v: isinstance(v, dict),
}


def fits(value: Any, kind: str) -> bool:
    """Whether ``value`` is of ``kind`` (a key of :data:`KINDS`; ``?`` after it also allows
    null)."""
    if kind.endswith("?"):
        return value is None or KINDS[kind[:-1]](value)
    return KINDS[kind](value)

