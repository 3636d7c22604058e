"""Apply tensor, data and pipeline parallelism to :mod:`hpcflow.examples.lm`, PyTorch-native.

- TP: ``parallelize_module`` with ``ColwiseParallel`` for ``wq``/``wk``/``wv`` and ``w1``/``w3``,
  ``RowwiseParallel`` for ``wo`` and ``w2`` (Megatron-LM's split, Shoeybi et al. 2019, §3: one
  all-reduce per attention and per MLP block in each direction). Embedding, norms and head stay
  replicated across the tp group.
- DP: FSDP2 ``fully_shard`` over the dp sub-mesh, per block and then per model part
  (torchtitan ``parallelize_llama``), or DDP-style replication (``replicate`` over the dp mesh;
  pure data parallelism only, see :func:`check_dp_mode`).
- PP: ``torch.distributed.pipelining``: the layers split evenly into stages, one stage per pp
  rank (two, looped, for the interleaved schedule), a ``PipelineStage`` per stage on the pp
  sub-mesh's group, and a schedule that runs ``n`` micro-batches per step.

Order: split for PP, then TP inside each part, then DP around it (FSDP2 over TP'd DTensors gives
2-D (dp, tp) parameters), as torchtitan does. What was seen working on gloo: docs/architecture.md,
"3D layout".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from hpcflow.examples.choices import DP_MODES, SCHEDULES
from hpcflow.examples.lm import LMConfig, Transformer, split_layers
from hpcflow.runtime.parallel_dims import ParallelDims


def check_tp(config: LMConfig, tp: int) -> None:
    """Raise ``ValueError`` unless heads and MLP width split evenly over ``tp`` ranks."""
    if config.n_heads % tp or config.ffn_dim % tp:
        raise ValueError(
            f"tp={tp} must divide the attention heads ({config.n_heads}) and the MLP width "
            f"({config.ffn_dim}) of the model; pick a tp among their common divisors"
        )


def check_dp_mode(mode: str, pp: int, tp: int = 1) -> None:
    """Raise ``ValueError`` for an unknown dp mode, or DDP combined with pp or tp.

    DDP (composable ``replicate``, torch 2.13) is kept for pure data parallelism. Seen here on
    gloo: with pp > 1 the schedules run several micro-batch forwards before their backwards and
    the dp replicas of the embedding differ after one step; with tp > 1 the losses drift from
    the same run under FSDP2 from the second step on (the DTensor gradients are not averaged
    over dp correctly). FSDP2 handles both, and ``torch.distributed.pipelining`` supports it.
    """
    if mode not in DP_MODES:
        raise ValueError(f"dp mode {mode!r} is not known; choose one of {DP_MODES}")
    if mode == "ddp" and (pp > 1 or tp > 1):
        raise ValueError(
            f"--dp-mode ddp is for pure data parallelism and does not work with pp={pp}, tp={tp} "
            "(gradients are not synchronised correctly across pipeline micro-batches or tensor-"
            "parallel shards); use --dp-mode fsdp, or pp=1 and tp=1"
        )


def check_microbatches(schedule: str, pp: int, microbatches: int, local_batch: int) -> None:
    """Validate the micro-batch count against the schedule and the per-dp-rank batch.

    Args:
        schedule: a key of :data:`SCHEDULES`.
        pp: pipeline degree.
        microbatches: micro-batches per step.
        local_batch: sequences per dp rank per step (global batch / dp).

    Raises:
        ValueError: unknown schedule; the count is below 1 or does not divide the batch; 1F1B
            with fewer micro-batches than stages; interleaved 1F1B with a count that is not a
            multiple of pp.
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule {schedule!r} is not known; choose one of {sorted(SCHEDULES)}")
    if microbatches < 1 or local_batch % microbatches:
        raise ValueError(
            f"{microbatches} micro-batches do not divide the batch of {local_batch} sequences per "
            f"dp rank; choose a divisor of {local_batch} (or change the batch size)"
        )
    if schedule == "1f1b" and pp > 1 and microbatches < pp:
        raise ValueError(
            f"schedule 1f1b needs at least as many micro-batches as pipeline stages: "
            f"{microbatches} < pp={pp}"
        )
    if schedule == "interleaved-1f1b" and pp > 1 and microbatches % pp:
        raise ValueError(
            f"schedule interleaved-1f1b needs a micro-batch count that is a multiple of "
            f"pp={pp}; got {microbatches}"
        )


def apply_tp(part: Transformer, tp_mesh: Any) -> None:
    """Shard every block of ``part`` over the tp sub-mesh (no-op when it has one rank)."""
    if tp_mesh.size() == 1:
        return
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    plan = {
        "attention.wq": ColwiseParallel(),
        "attention.wk": ColwiseParallel(),
        "attention.wv": ColwiseParallel(),
        "attention.wo": RowwiseParallel(),
        "feed_forward.w1": ColwiseParallel(),
        "feed_forward.w3": ColwiseParallel(),
        "feed_forward.w2": RowwiseParallel(),
    }
    for block in part.layers.values():
        parallelize_module(block, tp_mesh, plan)


def apply_dp(part: Transformer, dp_mesh: Any, mode: str, *, pp: int) -> None:
    """Wrap ``part`` for data parallelism over the dp sub-mesh.

    ``fsdp``: ``fully_shard`` each block, then the part. With pp > 1 the blocks keep their
    parameters gathered between forward and backward (``reshard_after_forward=False``, as
    torchtitan does under PP), so micro-batches do not all-gather them again.
    ``ddp``: replicate the part over the dp mesh; gradients are all-reduced in backward.

    Raises:
        ValueError: ``mode`` is not one of :data:`DP_MODES`.
    """
    if mode == "fsdp":
        from torch.distributed.fsdp import fully_shard

        for block in part.layers.values():
            fully_shard(block, mesh=dp_mesh, reshard_after_forward=pp == 1)
        fully_shard(part, mesh=dp_mesh, reshard_after_forward=pp == 1)
    elif mode == "ddp":
        if dp_mesh.size() > 1:
            from torch.distributed._composable.replicate import replicate

            replicate(part, device_mesh=dp_mesh)
    else:
        raise ValueError(f"dp mode {mode!r} is not known; choose one of {DP_MODES}")


@dataclass
class Parallelized:
    """The parallel model on this rank.

    Attributes:
        parts: the model parts this rank runs (one, or two under an interleaved schedule).
        model: one module holding every part's submodules under their global names, for state
            dicts and digests (the part itself when there is one).
        schedule: the pipeline schedule, or ``None`` when pp = 1.
        has_first: this rank runs the first stage (feeds token ids).
        has_last: this rank runs the last stage (computes the loss).
    """

    parts: list[Transformer]
    model: nn.Module
    schedule: Any
    has_first: bool
    has_last: bool


def build_parallel_model(
    config: LMConfig,
    dims: ParallelDims,
    rank: int,
    device: torch.device,
    *,
    seed: int,
    schedule: str = "gpipe",
    microbatches: int = 1,
    dp_mode: str = "fsdp",
    loss_fn: Any = None,
) -> Parallelized:
    """Build this rank's parts of the model, initialised identically for every layout.

    Collective: every rank calls it (TP and FSDP set-up and the pipeline stages communicate).
    Cost: builds only this rank's layers, on ``device``.

    Raises:
        ValueError: the layers do not split over the stages, tp does not divide the model, or
            the schedule or micro-batch count is not usable.
    """
    check_tp(config, dims.tp)
    check_dp_mode(dp_mode, dims.pp, dims.tp)
    _, per_rank = SCHEDULES[schedule] if dims.pp > 1 else ("", 1)
    num_stages = dims.pp * per_rank
    ranges = split_layers(config.n_layers, num_stages)
    pp_rank = dims.coordinates(rank)["pp"]
    stage_ids = [pp_rank + k * dims.pp for k in range(per_rank)]  # looped placement
    parts = []
    for stage in stage_ids:
        part = Transformer(config, ranges[stage], first=stage == 0, last=stage == num_stages - 1)
        part.init_weights(seed)
        part.to(device)
        apply_tp(part, dims.mesh("tp"))
        apply_dp(part, dims.mesh("dp"), dp_mode, pp=dims.pp)
        parts.append(part)
    schedule_obj = None
    if dims.pp > 1:
        schedule_obj = _make_schedule(
            parts, stage_ids, num_stages, dims, device, schedule, microbatches, loss_fn
        )
    return Parallelized(
        parts=parts,
        model=parts[0] if len(parts) == 1 else merge_parts(parts),
        schedule=schedule_obj,
        has_first=0 in stage_ids,
        has_last=num_stages - 1 in stage_ids,
    )


def _make_schedule(
    parts: list[Transformer],
    stage_ids: list[int],
    num_stages: int,
    dims: ParallelDims,
    device: torch.device,
    schedule: str,
    microbatches: int,
    loss_fn: Any,
) -> Any:
    from torch.distributed import pipelining

    group = dims.mesh("pp").get_group()
    stages = [
        pipelining.PipelineStage(part, stage, num_stages, device, group=group)
        for part, stage in zip(parts, stage_ids, strict=True)
    ]
    cls_name, per_rank = SCHEDULES[schedule]
    cls = getattr(pipelining, cls_name)
    if per_rank == 1:
        return cls(stages[0], n_microbatches=microbatches, loss_fn=loss_fn)
    return cls(stages, n_microbatches=microbatches, loss_fn=loss_fn)


def merge_parts(parts: list[Transformer]) -> nn.Module:
    """One module that holds the submodules of several parts under their global names
    (``tok_embeddings``, ``pos_embeddings``, ``layers.<i>``, ``norm``, ``output``), sharing the
    parameters: every parameter of every part appears once, under the name the whole model uses."""
    merged = nn.Module()
    merged.layers = nn.ModuleDict()
    for part in parts:
        for name, child in part.named_children():
            if name == "layers":
                for layer_id, block in child.items():
                    merged.layers[layer_id] = block
            else:  # embeddings, norm, head: whichever this part holds
                setattr(merged, name, child)
    return merged
