"""Argument checks shared by the ``hpcflow plan`` commands: numbers and instance types, with
errors that name the option, the value and what is allowed (exit 2, :class:`SpecError`)."""

from __future__ import annotations

import math

from hpcflow.errors import SpecError
from hpcflow.pcluster.catalog import gpu_instance  # noqa: F401 - the plan commands' check
from hpcflow.spec.messages import short_value

#: Ten years, as ``cluster cost`` allows: beyond it an hourly figure means nothing.
MAX_HOURS = 87_600
#: Nodes: more than any cluster built so far (Llama 3 trained on 2,048 nodes).
MAX_NODES = 100_000


def number(option: str, text: str | None, *, low: float, high: float, low_open: bool = False,
           integer: bool = False, example: str = "1") -> float:
    """``text`` as a number in ``[low, high]`` (``(low, high]`` when ``low_open``).

    Raises:
        SpecError: not a number, not whole when ``integer``, NaN, infinite or out of range.
    """
    what = "a whole number" if integer else "a number"
    bound = f"above {low:g}" if low_open else f"at least {low:g}"
    allowed = f"{what} {bound} and at most {high:,g}"
    try:
        value = float(text) if text is not None else math.nan
    except ValueError:
        value = math.nan
    ok = math.isfinite(value) and (value > low if low_open else value >= low) and value <= high
    if ok and integer and (value != int(value) or not str(text).strip().lstrip("+").isdigit()):
        ok = False
    if not ok:
        raise SpecError(f"{option}: {short_value(text)} is not allowed; give {allowed}, "
                        f"e.g. {option} {example}")
    return int(value) if integer else value


def known_region(option: str, region: str) -> str:
    """``region`` when it is a region ParallelCluster supports: the one region check of the
    plan commands, the same as the cluster spec's ``region`` (and so ``cluster cost``'s:
    :func:`hpcflow.spec.cluster_types.region_problem`).

    Raises:
        SpecError: naming the option, the value and the nearest supported name.
    """
    from hpcflow.spec.cluster_types import region_problem

    if problem := region_problem(region):
        raise SpecError(f"{option}: {short_value(region)}: {problem}")
    return region
