"""Where an attempt's start-up went, as ``hpcflow report`` shows it: rank 0's first
``hpcflow-startup`` line of the attempt (docs/protocol.md, "Where the start-up goes"), read
defensively (a value that is not a number is left out). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hpcflow import protocol as P
from hpcflow.contract import is_number


def startup_phases(payload: Mapping[str, Any]) -> dict[str, float]:
    """The seconds of each of :data:`hpcflow.protocol.STARTUP_PHASES` and ``total_s`` that the
    record gives as a finite number (:func:`hpcflow.contract.is_number`; a phase it could not
    measure is null there, and left out)."""
    out: dict[str, float] = {}
    for name in (*P.STARTUP_PHASES, "total_s"):
        value = payload.get(name)
        if is_number(value) and value >= 0:
            out[name] = float(value)
    return out


def startup_line(attempt: int, phases: Mapping[str, float]) -> str:
    """One line of ``hpcflow report``: ``attempt 1 start-up (rank 0): launch 0.3 s, ...``."""
    parts = [f"{name.removesuffix('_s').replace('_', ' ')} {phases[name]:.1f} s"
             for name in P.STARTUP_PHASES if name in phases]
    total = f"; total {phases['total_s']:.1f} s" if "total_s" in phases else ""
    return f"attempt {attempt} start-up (rank 0): {', '.join(parts) or 'not measured'}{total}"
