"""Slurm's time-limit grammar (sbatch(1) ``--time``): parse a limit into seconds and format
seconds back into the ``[D-]HH:MM:SS`` form."""

from __future__ import annotations

import re

#: A year: Slurm keeps a time limit in minutes in 32 bits, and no partition allows more.
MAX_TIME_LIMIT_S = 365 * 86400
_MAX_TIME_CHARS = 20
_TIME_FORMS = '"MM", "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM" or "D-HH:MM:SS"'


def parse_time_limit(value: str | int) -> int:
    """Parse a Slurm time limit into seconds.

    Accepts the forms of sbatch(1) ``--time``: ``"MM"``, ``"MM:SS"``, ``"HH:MM:SS"``,
    ``"D-HH"``, ``"D-HH:MM"``, ``"D-HH:MM:SS"``, or an int of minutes. ``0``, ``INFINITE`` and
    ``UNLIMITED`` (no limit) are refused: the preemption signal is timed from the limit.

    Returns:
        The limit in seconds (Slurm itself rounds a limit up to whole minutes).

    Raises:
        ValueError: the text is none of the forms above, a field is out of range, it is zero,
            or it is over a year (:data:`MAX_TIME_LIMIT_S`).
    """
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"must be a string in one of the forms {_TIME_FORMS}")
    if isinstance(value, int):
        text = str(value)
    else:
        text = value.strip()
    if len(text) > _MAX_TIME_CHARS:
        raise ValueError(f"is too long for a Slurm time; use one of {_TIME_FORMS} (at most "
                         f"{MAX_TIME_LIMIT_S // 86400} days)")
    m = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text)
    if not m:
        raise ValueError(f"is not a Slurm time; use one of {_TIME_FORMS}")
    days_s, first, second, third = m.groups()
    a, b, c = int(first), (int(second) if second else None), (int(third) if third else None)
    if days_s is not None:  # D-HH[:MM[:SS]]
        hours, minutes, seconds = a, b or 0, c or 0
        if hours > 23:
            raise ValueError(f"hours must be 0-23 after 'D-'; use one of {_TIME_FORMS}")
        total = ((int(days_s) * 24 + hours) * 60 + minutes) * 60 + seconds
        sub = [x for x in (b, c) if x is not None]
    elif c is not None:  # HH:MM:SS
        total, sub = (a * 60 + (b or 0)) * 60 + c, [b or 0, c]
    elif b is not None:  # MM:SS
        total, sub = a * 60 + b, [b]
    else:  # MM
        total, sub = a * 60, []
    if any(x > 59 for x in sub):
        raise ValueError(f"minutes and seconds must be 0-59; use one of {_TIME_FORMS}")
    if total <= 0:
        raise ValueError("must be more than zero (a job without a time limit gets no signal)")
    if total > MAX_TIME_LIMIT_S:
        raise ValueError(f"must be at most {MAX_TIME_LIMIT_S // 86400} days")
    return total


def format_time_limit(seconds: int) -> str:
    """``5400`` -> ``"01:30:00"``; ``93784`` -> ``"1-02:03:04"`` (sbatch(1) ``--time`` forms)."""
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    hms = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}-{hms}" if days else hms
