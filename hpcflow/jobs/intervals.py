"""The checkpoint intervals ``checkpoint.interval: auto`` chose, as ``hpcflow report`` shows
them: the ``interval_chosen`` ledger events (docs/protocol.md), read defensively (the ledger is
the user's file: a field of the wrong type reads as None). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hpcflow import protocol as P

#: The fields of an ``interval_chosen`` event the report carries, with the types they must have.
_INTERVAL_FIELDS: dict[str, tuple[type, ...]] = {
    "step": (int,), "reason": (str,), "interval_steps": (int,), "interval_s": (int, float),
    "save_s": (int, float), "step_time_s": (int, float), "restart_s": (int, float),
    "mtbf_s": (int, float), "formula": (str,), "expected_goodput": (int, float),
}


def interval_choice(event: Mapping[str, Any]) -> dict[str, Any] | None:
    """The report's view of an ``interval_chosen`` event (None for any other event, or one
    without a whole ``interval_steps``); a field of the wrong type reads as None."""
    if event.get("event") != P.EVENT_INTERVAL_CHOSEN:
        return None
    out = {}
    for name, types in _INTERVAL_FIELDS.items():
        value = event.get(name)
        ok = isinstance(value, types) and not isinstance(value, bool)
        out[name] = value if ok else None
    return out if out["interval_steps"] is not None else None


def interval_line(attempt: int, choice: Mapping[str, Any]) -> str:
    """One line of ``hpcflow report`` for a chosen interval: what, when, why, from what."""
    def secs(name: str, digits: int) -> str:
        value = choice.get(name)
        return "unknown" if value is None else f"{value:.{digits}f} s"

    goodput = choice.get("expected_goodput")
    return (f"attempt {attempt} checkpoint interval: every {choice['interval_steps']} steps "
            f"from step {choice.get('step')} ({choice.get('reason') or 'auto'}; "
            f"{choice.get('formula') or 'formula unknown'}; save {secs('save_s', 3)}, "
            f"step {secs('step_time_s', 3)}, restart {secs('restart_s', 1)}, "
            f"MTBF {secs('mtbf_s', 0)}; expected goodput "
            f"{'unknown' if goodput is None else f'{goodput:.3f}'})")
