"""Ledger events and rank 0's tagged lines, typed (docs/protocol.md, "Ledger"): a reader of a run
directory (``status``, ``report``, ``plan goodput --from-job``, the supervisor reading its own
ledger) gets an event whose members are of their kinds, or a counted skip, never an exception.
The *program* prints the tagged lines, so any text may come. Versioned with
:data:`hpcflow.protocol.PROTOCOL_VERSION`: a member added there is added here."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from hpcflow import protocol as P
from hpcflow.contract.bounded import fits, is_int, loads_bounded

__all__ = ["COMMON_FIELDS", "EVENT_FIELDS", "TAG_FIELDS", "Decoded", "decode_event",
           "decode_events", "decode_tagged"]

#: The members every ledger event has (:func:`hpcflow.ledger.event_line` writes them).
COMMON_FIELDS = {"event": "str", "time": "number", "job_id": "str", "restart": "count"}

#: Per event word, the members hpcflow's readers use and their kinds (a member that is absent
#: is fine: readers take their defaults; one of another kind skips the event). Text, lists,
#: mappings and flags may be null (a writer's "none": ``step_end``'s ``node`` and
#: ``first_failure`` are); numbers are null only where the protocol says so (``step``).
EVENT_FIELDS: dict[str, dict[str, str]] = {
    P.EVENT_ATTEMPT_START: {"nodelist": "str?", "budgets": "map?"},
    P.EVENT_SIGNAL: {"source": "str?", "signal": "str?", "cause": "str?"},
    P.EVENT_STEP_END: {"rc": "int", "ranks_exited": "count", "ranks_missing": "count",
                       "missing": "list?", "first_failure": "map?", "node": "str?"},
    P.EVENT_REQUEUE: {"by": "str?", "checkpoint": "bool?", "cause": "str?", "step": "int?",
                      "over_budget": "bool?"},
    P.EVENT_JOB_END: {"rc": "int", "reason": "str?"},
    P.EVENT_SPOT_NOTICE: {"action": "str?", "node": "str?", "notice_time": "int"},
    P.EVENT_NETWORK: {"summary": "str?", "problems": "list?", "fix": "str?", "stopped": "bool?"},
    P.EVENT_NODE_EXCLUDED: {"node": "str?", "failures": "count", "spare": "bool?"},
    P.EVENT_PROGRAM_ERROR: {"errors": "str?", "try": "count"},
    P.EVENT_STEP_RESTART: {"step": "int?", "try": "count"},
    P.EVENT_HANG: {"try": "count", "after_s": "number"},
    P.EVENT_HANG_SUSPECTED: {"try": "count", "step": "int?", "timeout_s": "number",
                             "stacks": "str?"},
    P.EVENT_HANG_CLEARED: {"try": "count", "after_s": "number"},
    P.EVENT_MIRROR_DONE: {"step": "int", "bytes": "count", "lag_s": "number"},
    P.EVENT_MIRROR_PULL: {"step": "int", "bytes": "count"},
}

#: Per tag rank 0 prints, the members the report reads and their kinds.
TAG_FIELDS: dict[str, dict[str, str]] = {
    P.TAG_STEP: {"step": "int", "step_time_s": "number"},
    P.TAG_RESUME: {"step": "int"},
    P.TAG_CHECKPOINT: {"save_s": "number", "failed": "bool", "step": "int?"},
    P.TAG_STARTUP: {},
}


def _members_fit(obj: Mapping[str, Any], fields: Mapping[str, str]) -> bool:
    return all(name not in obj or fits(obj[name], kind) for name, kind in fields.items())


def decode_event(obj: Any) -> dict[str, Any] | None:
    """The ledger event ``obj`` (a decoded JSON line), or None when it is not one.

    An event is a JSON object with an ``event`` word; its common members (:data:`COMMON_FIELDS`)
    and its event's members (:data:`EVENT_FIELDS`) must be of their kinds when present. A
    missing ``time`` or ``restart`` reads as 0 (what every reader took for it), and a whole
    ``job_id`` as its digits. An event word hpcflow does not know (a newer writer) is kept.
    """
    if not isinstance(obj, dict) or not isinstance(obj.get("event"), str):
        return None
    if is_int(obj.get("job_id")):
        obj["job_id"] = str(obj["job_id"])
    obj.setdefault("time", 0)
    obj.setdefault("restart", 0)
    if not _members_fit(obj, COMMON_FIELDS):
        return None
    if not _members_fit(obj, EVENT_FIELDS.get(obj["event"], {})):
        return None
    return obj


def decode_tagged(tag: str, payload: Any) -> dict[str, Any] | None:
    """A tagged line's JSON payload if it is an object whose members the report reads are of
    their kinds (:data:`TAG_FIELDS`); else None."""
    if not isinstance(payload, dict) or not _members_fit(payload, TAG_FIELDS.get(tag, {})):
        return None
    return payload


@dataclass(frozen=True)
class Decoded:
    """The events of some ledger lines, and how many lines were skipped.

    Attributes:
        events: the events that decoded, in line order.
        skipped: lines that were not a JSON object, too long or deep, or an event with a member
            of the wrong kind (a torn last line after a crash counts too).
    """

    events: list[dict[str, Any]]
    skipped: int


def decode_events(lines: Iterable[str], *, job_id: str | None = None) -> Decoded:
    """:func:`decode_event` of each line (blank lines ignored); with ``job_id``, that job's
    events only (an event of another job is not a skip)."""
    events: list[dict[str, Any]] = []
    skipped = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            event = decode_event(loads_bounded(line))
        except ValueError:
            event = None
        if event is None:
            skipped += 1
        elif job_id is None or event.get("job_id") == job_id:
            events.append(event)
    return Decoded(events, skipped)
