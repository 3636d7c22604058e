"""Slurm hostlist expressions, through the well-kept ``python-hostlist`` library.

Slurm writes node sets compactly: ``n[01-03,07],gpu-[1-2]``. (Slurm ``scontrol show hostnames``;
python-hostlist implements the same grammar, including zero padding and several bracket groups.)
"""

from __future__ import annotations

import hostlist as _hostlist


def expand_hostlist(expr: str) -> list[str]:
    """Expand a Slurm hostlist expression into host names, in Slurm's order.

    Args:
        expr: e.g. ``"queue-dy-p548xlarge-[1-16]"`` or ``"a[01-02],b3"``.

    Returns:
        The host names, e.g. ``["a01", "a02", "b3"]``.

    Raises:
        ValueError: the expression is empty or malformed (the message quotes it).
    """
    text = expr.strip()
    if not text:
        raise ValueError("hostlist is empty")
    try:
        return list(_hostlist.expand_hostlist(text))
    except _hostlist.BadHostlist as exc:
        raise ValueError(f"bad hostlist {expr!r}: {exc}") from None


def first_host(expr: str) -> str:
    """The first host of a hostlist expression (the rendezvous host of a job)."""
    return expand_hostlist(expr)[0]


def collect_hostlist(hosts: list[str]) -> str:
    """Compress host names back into a hostlist expression (inverse of :func:`expand_hostlist`)."""
    return str(_hostlist.collect_hostlist(list(hosts)))
