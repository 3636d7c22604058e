"""Number spec fields with bounds: booleans refused (YAML's ``true`` is not ``1``), a quoted
number refused as text, and a number too long for Python's ``int()`` (kept as its digits by
:mod:`hpcflow.spec.yamlread`) called out of range with the bound, not "not a valid integer".
Each message says the range."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

_DIGITS_RE = re.compile(r"[-+]?[0-9][0-9_]*")
# More digits than any bound here has: such a text is a number far out of range, not a typo.
_MANY_DIGITS = 19


def bounded_int(lo: int, hi: int) -> Any:
    """An ``int`` type for a pydantic field that must lie in ``lo..hi`` (inclusive).

    Refused, each with a message that says the range: ``true``/``false``; the digits of a number
    too long to convert (a 5,000-digit ``nodes`` reads "an integer of 5,000 digits: at most
    100,000"); a float or a quoted number (strict). pydantic's own ``ge``/``le`` messages cover
    the rest.
    """

    def check(value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError(f"a whole number from {lo:,} to {hi:,} is expected, not "
                             f"{str(value).lower()}")
        if isinstance(value, str) and _DIGITS_RE.fullmatch(value.strip()):
            digits = sum(ch.isdigit() for ch in value)
            if digits >= _MANY_DIGITS:
                where = f"at least {lo:,}" if value.strip().startswith("-") else f"at most {hi:,}"
                raise ValueError(f"an integer of {digits:,} digits is out of range: {where}")
        return value

    return Annotated[int, BeforeValidator(check), Field(strict=True, ge=lo, le=hi)]


def bounded_float(lo: float, hi: float) -> Any:
    """A finite ``float`` type for a pydantic field that must lie in ``lo..hi`` (inclusive); an
    ``int`` is taken as its float.

    Refused, each with a message that says the range: ``true``/``false`` (``step_factor: true``
    reads "a number from 1 to 100 is expected, not true"), a quoted number or other text (YAML
    1.1, PyYAML's, reads ``1e-4`` as text: a float needs a dot, and an exponent its sign), and
    NaN or an infinity. pydantic's own ``ge``/``le`` messages cover the rest.
    """

    def check(value: Any) -> Any:
        what = f"a number from {lo:,g} to {hi:,g} is expected"
        if isinstance(value, bool):
            raise ValueError(f"{what}, not {str(value).lower()}")
        if isinstance(value, str):
            raise ValueError(f"{what}, not text: write the number without quotes, and an "
                             "exponent with a dot and a sign (1.0e-4, not 1e-4, which YAML "
                             "reads as text)")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{what}, not {value}")
        return value

    return Annotated[float, BeforeValidator(check),
                     Field(strict=True, allow_inf_nan=False, ge=lo, le=hi)]
