"""Argument checks shared by the ``hpcflow plan`` commands: numbers and instance types, with
errors that name the option, the value and what is allowed (exit 2, :class:`SpecError`)."""

from __future__ import annotations

import math

from hpcflow.errors import SpecError

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
        raise SpecError(f"{option}: {text!r} is not allowed; give {allowed}, "
                        f"e.g. {option} {example}")
    return int(value) if integer else value


def gpu_instance(option: str, instance_type: str, region: str) -> tuple[int, float]:
    """(GPUs per node, GiB per GPU) of ``instance_type`` from the catalog
    (:class:`hpcflow.pcluster.catalog.Catalog`: the shipped table and the region's EC2 cache).

    Raises:
        SpecError: the type is not known, or has no accelerators.
    """
    from hpcflow.aws.instances import read_cache
    from hpcflow.pcluster.catalog import Catalog, ec2_types

    catalog = Catalog.offline(read_cache(region))
    facts = catalog.get(instance_type)
    row = ec2_types().get(instance_type)
    if facts is None and row is not None and not (row.nvidia_gpus or row.aws_accelerators):
        raise SpecError(f"{option}: {instance_type!r} has no GPUs or other accelerators; give a "
                        "GPU instance type, e.g. p5.48xlarge")
    if facts is None and row is not None:
        raise SpecError(f"{option}: the GPU memory of {instance_type!r} is not known here; run "
                        "`hpcflow cluster instances --refresh` to fetch it from EC2")
    if facts is None:
        hint = catalog.suggest(instance_type)
        tip = f"; did you mean {hint!r}?" if hint else ""
        raise SpecError(f"{option}: {instance_type!r} is not an instance type hpcflow knows "
                        f"the GPUs of{tip} (see `hpcflow cluster instances`)")
    if facts.accelerator_count < 1:
        raise SpecError(f"{option}: {instance_type!r} has no GPUs or other accelerators; give a "
                        "GPU instance type, e.g. p5.48xlarge")
    return facts.accelerator_count, facts.accelerator_memory_mib / 1024
