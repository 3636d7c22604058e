"""What the ranks' exit records of a step say: the first failing rank, and the ``step_end``
members and log words that describe them (pure; used by :mod:`hpcflow.supervisor.rules` and
:mod:`hpcflow.supervisor.turns`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hpcflow import protocol as P
from hpcflow.supervisor.model import RankExit, StepFacts

__all__ = ["first_failure", "rank_summary"]


def first_failure(exits: Sequence[RankExit | None]) -> tuple[int, RankExit] | None:
    first: tuple[int, RankExit] | None = None
    for rank, e in enumerate(exits):
        if e is None or e.rc in (0, P.EXIT_PREEMPTED):
            continue
        if first is None or e.time_ms < first[1].time_ms:
            first = (rank, e)
    return first


def rank_summary(facts: StepFacts) -> tuple[dict[str, Any], str]:
    """The ``step_end`` members that describe the ranks (``ranks_exited``, ``ranks_missing``,
    ``missing`` (at most 16 ranks), ``first_failure``) and the log's words for the first failure
    (``""`` when none), which name the ranks that left no record first: a rank killed by a
    signal (``kill -9``, the OOM killer) records nothing and no time, and the others' errors
    (a closed connection) may follow from it."""
    missing = [r for r, e in enumerate(facts.exits) if e is None]
    first = first_failure(facts.exits)
    fields: dict[str, Any] = {
        "ranks_exited": len(facts.exits) - len(missing), "ranks_missing": len(missing),
        "missing": missing[:16],
        "first_failure": None if first is None else {
            "rank": first[0], "rc": first[1].rc, "reason": first[1].reason},
    }
    if first is None:
        return fields, ""
    words = f"rank {first[0]} exited with status {first[1].rc}: {first[1].reason}"
    if missing:  # a kill leaves no record and no time: it may have come first (kill -9)
        shown = ",".join(map(str, missing[:16])) + ("..." if len(missing) > 16 else "")
        return fields, (f"rank(s) {shown} left no exit record (killed by a signal); of the "
                        f"ranks that recorded one, the first failure: {words}")
    return fields, f"first failure: {words}"
