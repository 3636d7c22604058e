"""How spec messages show what they quote: field paths, values and file names, bounded in
length and escaped so that no key, value or name can forge a line of output."""

from __future__ import annotations

import math
import re
import reprlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

_MAX_VALUE_CHARS = 60


def source_name(path: str | Path) -> str:
    """A file name as messages show it: control characters escaped so it cannot forge lines."""
    text = str(path)
    return text if text.isprintable() else ascii(text)


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
            out += f"[{short_value(part)}]"
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


def short_value(value: Any) -> str:
    """A value as messages show it: bounded in length, control characters escaped."""
    text = _SHORT_REPR.repr(value)
    return text if len(text) <= 2 * _MAX_VALUE_CHARS else text[: 2 * _MAX_VALUE_CHARS - 3] + "..."
