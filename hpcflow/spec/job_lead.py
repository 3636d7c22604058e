"""How far ahead of the time limit a job is warned (``preemption.signal_lead_s``), against its
``time_limit``: one rule for a lead given in the spec and for the default lead.

Slurm sends the ``--signal`` warning up to 60 s earlier than asked (sbatch(1), ``--signal``:
"the signal may be sent up to 60 seconds earlier than specified"; docs/protocol.md). A warning
due ``signal_lead_s`` before the limit may so come as early as ``time_limit - signal_lead_s - 60``
seconds into the attempt. The rule: that earliest moment leaves the job at least
:data:`~hpcflow.spec.job_fields.MIN_RUN_BEFORE_WARNING_S` (60 s) to start and train, that is
``time_limit - signal_lead_s >= 120`` s (:data:`~hpcflow.spec.job_fields.MIN_TIME_BEFORE_WARNING_S`).
A lead closer to the limit would put the warning at (or before) the start of every attempt, and a
job that joins the protocol would save and requeue at once each time, never training.

- A lead given in the spec that breaks the rule is refused (:func:`lead_problems`), never changed.
- A spec that leaves the lead out gets the default (120 s) when it fits, that is with a time limit
  of at least 240 s, and otherwise no warning at all (:func:`lead_for_short_jobs`): a shorter
  default lead would still have to be at least 90 s (:data:`~hpcflow.spec.job_fields.
  MIN_SIGNAL_LEAD_S`: the jitter and a step and a save), which no limit under 210 s fits, and a
  lead that shifts with the limit is a surprise of its own.
"""

from __future__ import annotations

from typing import Any

from hpcflow.spec.job_fields import (
    MIN_RUN_BEFORE_WARNING_S,
    MIN_SIGNAL_LEAD_S,
    MIN_TIME_BEFORE_WARNING_S,
    SIGNAL_JITTER_S,
)
from hpcflow.spec.job_parts import SHORTEST_DEFAULT_LIMIT_S, PreemptionSpec
from hpcflow.spec.timefmt import parse_time_limit

_FIELD = "preemption.signal_lead_s"
_NO_WARNING = "or 0 (or left out) for a job without a warning"


def lead_problems(lead: int, time_limit: str, time_limit_s: int) -> list[tuple[str, Any, str]]:
    """``(field, value, message)`` for a warning lead that does not fit the time limit (see the
    module docstring); empty when it fits or is 0 (no warning).

    Args:
        lead: ``preemption.signal_lead_s``, in seconds.
        time_limit: the time limit as the spec keeps it (``[D-]HH:MM:SS``), for the message.
        time_limit_s: the same, in seconds.
    """
    if not lead:
        return []
    limit = f"time_limit ({time_limit} = {time_limit_s} s)"
    if lead >= time_limit_s:
        return [(_FIELD, lead,
                 f"must be less than {limit}; Slurm sends the signal up to {SIGNAL_JITTER_S} s "
                 "off its mark (sbatch --signal), so the lead must cover that plus a step and a "
                 f"checkpoint save; {_NO_WARNING}")]
    left = time_limit_s - lead
    if left >= MIN_TIME_BEFORE_WARNING_S:
        return []
    most = time_limit_s - MIN_TIME_BEFORE_WARNING_S
    fits = (f"so at most {most} s" if most >= MIN_SIGNAL_LEAD_S else
            f"which no lead does with a time_limit under "
            f"{MIN_SIGNAL_LEAD_S + MIN_TIME_BEFORE_WARNING_S} s (a lead is at least "
            f"{MIN_SIGNAL_LEAD_S} s)")
    return [(_FIELD, lead,
             f"must leave at least {MIN_TIME_BEFORE_WARNING_S} s of {limit} before the warning, "
             f"{fits}: Slurm may send it {SIGNAL_JITTER_S} s early (sbatch --signal), and the job "
             f"needs {MIN_RUN_BEFORE_WARNING_S} s of run before that; with {left} s left it may "
             f"come {max(0, left - SIGNAL_JITTER_S)} s after the job starts, and the job saves "
             f"and requeues without training; {_NO_WARNING}")]


def lead_for_short_jobs(data: Any) -> Any:
    """Job spec data that leaves ``preemption.signal_lead_s`` out, and whose time limit is too
    short for the default lead under the rule of :func:`lead_problems` (less than
    :data:`~hpcflow.spec.job_parts.SHORTEST_DEFAULT_LIMIT_S`, 240 s), gets ``signal_lead_s: 0``: no warning
    signal (and so no checkpoint-and-requeue on it); the job runs until it ends or reaches its
    time limit. A lead given explicitly is never changed: the model refuses one that does not
    fit, naming it.

    Args:
        data: the raw spec mapping (before validation); anything else is returned unchanged.

    Returns:
        ``data``, or a copy with ``preemption.signal_lead_s`` set to 0.
    """
    if not isinstance(data, dict):
        return data
    pre = data.get("preemption", {})
    if isinstance(pre, PreemptionSpec):
        if "signal_lead_s" in pre.model_fields_set:
            return data
        pre = pre.model_dump()
    elif not isinstance(pre, dict) or "signal_lead_s" in pre:
        return data
    try:
        limit_s = parse_time_limit(data.get("time_limit"))  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return data  # refused by the time_limit field, with its own message
    if limit_s >= SHORTEST_DEFAULT_LIMIT_S:
        return data
    return {**data, "preemption": {**pre, "signal_lead_s": 0}}
