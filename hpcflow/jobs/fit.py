"""Does the job's layout fit in GPU memory? The check ``submit`` and ``--dry-run`` make when
the spec names the model's shape (``parallelism.model``), before the job waits in the queue.

The memory per GPU is the planner's (:func:`hpcflow.plan.layout.plan_layouts`, docs/plan.md:
parameters, gradients and optimizer state by sharding, activations with and without full
activation checkpointing); the GPU memory comes from the instance catalog
(:func:`hpcflow.pcluster.catalog.gpu_instance`). A layout fits when its total with activation
checkpointing is at most the GPU memory less the headroom.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from hpcflow.errors import SpecError
from hpcflow.spec.job import JobSpec

#: The region whose EC2 cache may add instance types (the shipped table needs none).
DEFAULT_REGION = "us-east-1"


@dataclass(frozen=True)
class Fit:
    """The verdict on one job's layout.

    Attributes:
        layout: ``dp=.. pp=.. tp=..`` as the job resolves it.
        instance_type: the instance whose GPUs it was checked against.
        usable_gib: GPU memory less the headroom, GiB.
        total_gib, total_ckpt_gib: memory per GPU without and with activation checkpointing.
        fits: the total without activation checkpointing fits.
        fits_ckpt: the total with activation checkpointing fits.
        problem: why the model cannot take this layout at all ("" when it can).
        better: up to three layouts of the same ranks that fit, best first.
    """

    layout: str
    instance_type: str
    usable_gib: float
    total_gib: float
    total_ckpt_gib: float
    fits: bool
    fits_ckpt: bool
    problem: str
    better: list[str]

    def message(self, model: str) -> str:
        """One sentence: what does not fit, by how much, and what would."""
        if self.problem:
            head = f"{self.layout} cannot hold {model}: {self.problem}"
        else:
            head = (f"{self.layout} of {model} needs {self.total_gib:.1f} GiB per GPU "
                    f"({self.total_ckpt_gib:.1f} GiB with activation checkpointing); a GPU of "
                    f"{self.instance_type} has {self.usable_gib:.1f} GiB usable")
        tip = (f"layouts that fit these ranks: {', '.join(self.better)}" if self.better else
               "no layout of these ranks fits: add nodes, use a larger-memory instance, or lower "
               "parallelism.model.micro_batch or seq_len")
        return f"{head}; {tip} (hpcflow plan layout shows them all)"


def check_fit(spec: JobSpec) -> Fit | None:
    """The fit of ``spec``'s layout, or None when the spec names no model shape.

    Ranks per node are ``tasks_per_node`` (one GPU each); the GPU memory is that of
    ``parallelism.model.instance_type``, else ``network.instance_type``.

    Raises:
        SpecError: a model shape without an instance type, or an instance type without known
            GPUs (the message names the field).
    """
    from hpcflow.pcluster.catalog import gpu_instance
    from hpcflow.plan.layout import plan_layouts

    par = spec.parallelism
    if par is None or par.model is None:
        return None
    field = "parallelism.model.instance_type"
    instance = par.model.instance_type
    if instance is None and spec.network is not None:
        field, instance = "network.instance_type", spec.network.instance_type
    if instance is None:
        raise SpecError("parallelism.model: the memory check needs the nodes' instance type; "
                        "set network.instance_type or parallelism.model.instance_type, e.g. "
                        "p5.48xlarge")
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or DEFAULT_REGION
    _, gib = gpu_instance(field, instance, region)
    model = par.model.shape()
    plan = plan_layouts(model, spec.nodes, spec.tasks_per_node, gib, instance_type=instance,
                        sharding=par.model.sharding, headroom=par.model.headroom)
    pp, tp = par.pp, par.tp
    dp = par.dp if par.dp > 0 else spec.ntasks // (pp * tp)
    mine = next((x for x in plan.layouts if (x.dp, x.pp, x.tp) == (dp, pp, tp)), None)
    if mine is None:  # the spec's own checks refuse such a layout first
        raise SpecError(f"parallelism: dp={dp} pp={pp} tp={tp} is not a layout of "
                        f"{spec.nodes} x {spec.tasks_per_node} ranks")
    better = [f"dp={x.dp} pp={x.pp} tp={x.tp}" for x in plan.layouts if x.fits_ckpt][:3]
    return Fit(f"dp={dp} pp={pp} tp={tp}", instance, plan.usable_gib, mine.total_gib,
               mine.total_ckpt_gib, mine.fits, mine.fits_ckpt, mine.problem, better)


def fit_warning(spec: JobSpec) -> str | None:
    """Refuse (or, with ``parallelism.model.if_unfit: warn``, return a warning for) a layout
    that fits no GPU even with activation checkpointing; a note when it fits only with it;
    None when it fits or the spec names no model.

    Raises:
        SpecError: the layout does not fit and ``if_unfit`` is ``refuse`` (exit 2), or
            :func:`check_fit` refused.
    """
    fit = check_fit(spec)
    if fit is None or fit.fits:
        return None
    assert spec.parallelism is not None and spec.parallelism.model is not None
    name = spec.parallelism.model.preset or "the model"
    if fit.fits_ckpt:
        return (f"parallelism: {fit.layout} of {name} fits a GPU of {fit.instance_type} only "
                f"with activation checkpointing ({fit.total_ckpt_gib:.1f} of "
                f"{fit.usable_gib:.1f} GiB usable; {fit.total_gib:.1f} GiB without)")
    text = f"parallelism: {fit.message(name)}"
    if spec.parallelism.model.if_unfit == "refuse":
        raise SpecError(f"{text}; or set parallelism.model.if_unfit: warn to submit anyway")
    return text
