"""The hangs the watchdog suspected in an attempt, as ``hpcflow report`` shows them: each
``hang_suspected`` ledger event with what became of it, the ``hang_cleared`` or ``hang`` event
that followed it in the same try (docs/protocol.md, "Hangs and in-job restarts"). Read
defensively (the ledger is the user's file: a field of the wrong type reads as None). Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hpcflow import protocol as P

#: What became of a suspicion: the ranks reported again, the step was ended, or neither yet.
CLEARED = "cleared"
ENDED = "ended"
OPEN = "open"


def _get(event: Mapping[str, Any], name: str, types: tuple[type, ...]) -> Any:
    value = event.get(name)
    return value if isinstance(value, types) and not isinstance(value, bool) else None


def suspected_hangs(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One attempt's suspected hangs, oldest first.

    Returns:
        dicts of ``try``, ``step``, ``section``, ``ranks``, ``stopped``, ``timeout_s`` (seconds
        silent before the stacks were written), ``stacks`` (file under the run directory),
        ``outcome`` (:data:`CLEARED`, :data:`ENDED` or :data:`OPEN`) and ``after_s`` (seconds
        from the suspicion to its clearing, or None).
    """
    out: list[dict[str, Any]] = []
    for event in events:
        name = event.get("event")
        if name == P.EVENT_HANG_SUSPECTED:
            out.append({
                "try": _get(event, "try", (int,)), "step": _get(event, "step", (int,)),
                "section": _get(event, "section", (str,)),
                "ranks": _get(event, "ranks", (list,)), "stopped": _get(event, "stopped", (list,)),
                "timeout_s": _get(event, "timeout_s", (int, float)),
                "stacks": _get(event, "stacks", (str,)), "outcome": OPEN, "after_s": None,
            })
        elif name in (P.EVENT_HANG_CLEARED, P.EVENT_HANG) and out and out[-1]["outcome"] == OPEN:
            if _get(event, "try", (int,)) != out[-1]["try"]:
                continue
            out[-1]["outcome"] = CLEARED if name == P.EVENT_HANG_CLEARED else ENDED
            if name == P.EVENT_HANG_CLEARED:
                out[-1]["after_s"] = _get(event, "after_s", (int, float))
    return out


def suspicion_line(attempt: int, hang: Mapping[str, Any]) -> str:
    """One line of ``hpcflow report`` for a suspected hang."""
    silent = hang.get("timeout_s")
    what = {CLEARED: "the ranks reported again" + (
                "" if hang.get("after_s") is None else f" {hang['after_s']:.0f} s later"),
            ENDED: "the step was ended",
            OPEN: "no outcome recorded"}[hang.get("outcome", OPEN)]
    stopped = hang.get("stopped")
    return (f"attempt {attempt} hang suspected at step {hang.get('step')} "
            f"({hang.get('section') or 'unknown section'}; ranks {hang.get('ranks')} silent more "
            f"than {'unknown' if silent is None else f'{silent:.0f}'} s"
            + (f"; stopped: {stopped}" if stopped else "")
            + f"): {what}; stacks in {hang.get('stacks')}")
