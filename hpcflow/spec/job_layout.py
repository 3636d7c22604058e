"""The blocks of a job spec that say where and how the program is laid out: ``parallelism``
(the dp x pp x tp degrees and ``parallelism.model``, the model's shape for the memory check of
``submit``: hpcflow.jobs.fit, docs/plan.md) and ``network`` (the nodes' instance type, for the
NCCL/EFA preset)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from hpcflow.plan.layout import DEFAULT_HEADROOM as LAYOUT_HEADROOM
from hpcflow.plan.models import PRESETS as MODEL_PRESETS
from hpcflow.plan.models import ModelShape
from hpcflow.spec.job_fields import (
    INSTANCE_TYPE_RE,
    VERSION_RE,
    SpecModel,
    StrictInt,
    raise_problems,
)
from hpcflow.spec.numbers import bounded_float


def _instance_type(value: str) -> str:
    """``value`` when it has the shape of an EC2 instance type (``p5.48xlarge``).

    Raises:
        ValueError: it does not.
    """
    if not INSTANCE_TYPE_RE.fullmatch(value):
        raise ValueError("must be an EC2 instance type such as 'p5.48xlarge'")
    return value


class ModelShapeSpec(SpecModel):
    """The model's shape, for the memory check of ``submit`` (the model of ``hpcflow plan
    layout``, docs/plan.md): a preset with public shapes, or every one of params, layers,
    hidden, heads and seq_len (a preset's may be overridden)."""

    preset: str | None = Field(
        default=None, json_schema_extra={"limits": ", ".join(MODEL_PRESETS)},
        description="A model with public shapes (Llama 3, arXiv:2407.21783, table 3).",
    )
    params: StrictInt | None = Field(default=None, ge=1, le=10**15, description="Parameters.")
    layers: StrictInt | None = Field(default=None, ge=1, le=100_000, description="Layers.")
    hidden: StrictInt | None = Field(default=None, ge=1, le=10**7, description="Hidden size.")
    heads: StrictInt | None = Field(default=None, ge=1, le=100_000,
                                    description="Attention heads.")
    seq_len: StrictInt | None = Field(default=None, ge=1, le=10**8,
                                      description="Tokens per sequence.")
    micro_batch: StrictInt | None = Field(default=None, ge=1, le=1_000_000,
                                          description="Sequences per micro-batch; default 1.")
    sharding: Literal["fsdp", "zero1", "ddp"] = Field(
        default="fsdp",
        description="fsdp: parameters, gradients and optimizer sharded over dp; zero1: the "
                    "optimizer only; ddp: nothing.",
    )
    headroom: bounded_float(0, 0.9) = Field(  # type: ignore[valid-type]
        default=LAYOUT_HEADROOM, description="Fraction of GPU memory kept free.")
    instance_type: str | None = Field(
        default=None,
        description="EC2 instance type whose GPU memory the layout must fit; default "
                    "network.instance_type.",
    )
    if_unfit: Literal["refuse", "warn"] = Field(
        default="refuse",
        description="A layout that fits no GPU even with activation checkpointing: refuse "
                    "the submission, or warn and submit.",
    )

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, value: str | None) -> str | None:
        if value is not None and value not in MODEL_PRESETS:
            raise ValueError(f"{value!r} is not a preset; allowed: {', '.join(MODEL_PRESETS)}")
        return value

    @field_validator("instance_type")
    @classmethod
    def _instance(cls, value: str | None) -> str | None:
        return None if value is None else _instance_type(value)

    @model_validator(mode="after")
    def _whole_shape(self) -> ModelShapeSpec:
        if self.preset is None:
            missing = [n for n in _SHAPE_FIELDS[:5] if getattr(self, n) is None]
            if missing:
                raise_problems([(name, None, "missing: give preset "
                                  f"({', '.join(MODEL_PRESETS)}) or every one of params, layers, "
                                  "hidden, heads and seq_len") for name in missing])
        problems = self.shape().problems()
        if problems:
            raise_problems([(line.split(":", 1)[0], getattr(self, line.split(":", 1)[0], None),
                              line.split(": ", 1)[1]) for line in problems])
        return self

    def shape(self) -> ModelShape:
        """The planner's :class:`~hpcflow.plan.models.ModelShape` of this block."""
        given = {n: getattr(self, n) for n in _SHAPE_FIELDS if getattr(self, n) is not None}
        if self.preset is not None:
            return replace(MODEL_PRESETS[self.preset], **given)
        return ModelShape("custom", **given)


_SHAPE_FIELDS = ("params", "layers", "hidden", "heads", "seq_len", "micro_batch")


class ParallelismSpec(SpecModel):
    """The parallel layout the program is asked to use: world size = dp x pp x tp."""

    dp: StrictInt = Field(default=-1, description="Data-parallel degree; -1 = the remaining ranks.")
    pp: StrictInt = Field(default=1, ge=1, description="Pipeline-parallel degree (stages).")
    tp: StrictInt = Field(
        default=1, ge=1, description="Tensor-parallel degree; must divide tasks_per_node.",
    )
    model: ModelShapeSpec | None = Field(
        default=None,
        description="The model's shape: submit and --dry-run refuse a layout whose memory per "
                    "GPU fits no GPU of the instance (docs/plan.md).",
    )


class NetworkSpec(SpecModel):
    """The nodes' network, for the NCCL/EFA environment preset (hpcflow.nccl.presets)."""

    instance_type: str = Field(
        description="EC2 instance type of the nodes, e.g. p5.48xlarge; picks the preset.",
    )
    ofi_nccl_version: str | None = Field(
        default=None,
        description=(
            "Installed aws-ofi-nccl version, e.g. 1.7.4; legacy values are set only for "
            "versions that need them."
        ),
    )
    preset: bool = Field(
        default=True,
        description="Export the preset's variables (a value set in env always wins).",
    )
    require_efa: bool | None = Field(
        default=None,
        description=(
            "Stop the job in its first minute when NCCL falls back to TCP sockets; default: "
            "true on an instance type with EFA (a value set here always wins)."
        ),
    )

    @field_validator("instance_type")
    @classmethod
    def _instance_type(cls, value: str) -> str:
        return _instance_type(value)

    @field_validator("ofi_nccl_version")
    @classmethod
    def _version(cls, value: str | None) -> str | None:
        if value is not None and not VERSION_RE.fullmatch(value):
            raise ValueError("must be a version such as '1.7.4' or '1.7.4-aws'")
        return value


def layout_problems(layout: ParallelismSpec, nodes: int,
                    tasks_per_node: int) -> list[tuple[str, Any, str]]:
    """``(field, value, message)`` for dp x pp x tp degrees that break the rules
    :class:`hpcflow.runtime.parallel_dims.ParallelDims` applies in the job (their product is the
    world size, nodes x tasks_per_node; a tp group stays on one node), checked before the job
    waits in the queue; empty when they fit."""
    from hpcflow.runtime.parallel_dims import ParallelDims

    try:
        ParallelDims(dp=layout.dp, pp=layout.pp, tp=layout.tp, world_size=nodes * tasks_per_node,
                     ranks_per_node=tasks_per_node)
    except ValueError as exc:
        degrees = {"dp": layout.dp, "pp": layout.pp, "tp": layout.tp}
        return [("parallelism", degrees, f"{exc} (nodes x tasks_per_node = "
                 f"{nodes} x {tasks_per_node})")]
    return []
