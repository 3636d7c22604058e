"""The two workloads of the example program, behind one small interface.

- ``toy-mlp``: the MLP of :mod:`hpcflow.examples.toy`, FSDP2 over the whole world (dp only).
- ``lm``: the byte-level transformer of :mod:`hpcflow.examples.lm` on real text, laid out as
  pp x dp x tp (:mod:`hpcflow.examples.parallelize`).

A :class:`Task` owns the model, optimizer, LR scheduler and sampler; :meth:`Task.step` runs one
training step and returns the loss averaged over the samples of the whole job (the same value
on every rank). Shape legend: ``B`` sequences per dp rank, ``L`` sequence length, ``V`` vocabulary.
"""

from __future__ import annotations

import contextlib
import math
import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from hpcflow.runtime import dist as hdist
from hpcflow.runtime.parallel_dims import ParallelDims
from hpcflow.runtime.sampler import ResumableSampler


@dataclass
class Task:
    """One workload, ready to train.

    Attributes:
        model: the module whose state dict is checkpointed and digested (global names).
        optimizer: its optimizer.
        scheduler: its LR scheduler.
        sampler: the data position.
        dims: the parallel layout.
        tokens_per_step: tokens (or samples, for the toy model) the whole job trains on per step.
        flops_per_token: model FLOPs per token for MFU, or ``None``.
        step_fn: runs one step, returns the job-wide mean loss.
        describe: facts for the start line (model size, data source, ...).
    """

    model: Any
    optimizer: Any
    scheduler: Any
    sampler: ResumableSampler
    dims: ParallelDims
    tokens_per_step: int
    flops_per_token: float | None
    step_fn: Any
    describe: dict[str, Any] = field(default_factory=dict)

    def step(self) -> float:
        """One forward/backward/update (collective)."""
        return float(self.step_fn())


def seed_rank_streams(seed: int, rank: int, step: int = 0) -> None:
    """Seed this rank's torch, Python and numpy generators from ``(seed, step, rank)``.

    Each rank gets its own stream (dropout masks differ per rank). ``step`` > 0 is used after a
    resume on another layout, where the saved per-rank streams do not apply.
    """
    rank_seed = (seed * 100_003 + rank + 1) + step * 1_000_000_007
    torch.manual_seed(rank_seed)
    random.seed(rank_seed)
    np.random.seed(rank_seed % 2**32)


def lr_lambda(warmup_steps: int, total_steps: int) -> Any:
    """Linear warm-up over ``warmup_steps``, then cosine decay to 10 % at ``total_steps``."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
        return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress))

    return factor


def mean_over_job(loss_sum: float, count: int) -> float:
    """All-reduce ``(loss_sum, count)`` over the world; returns ``sum / count``."""
    box = torch.tensor([loss_sum, float(count)], dtype=torch.float64, device=hdist.collective_device())
    if hdist.is_distributed():
        dist.all_reduce(box, op=dist.ReduceOp.SUM)
    return float(box[0] / box[1]) if box[1] > 0 else float("nan")


def build_toy(args: Any, rank: int, world_size: int, local_world_size: int, device: Any) -> Task:
    """The MLP workload: FSDP2 over the world; ``--pp`` and ``--tp`` must be 1.

    Raises:
        ValueError: pp or tp is not 1, or dp does not cover the world.
    """
    from torch.distributed.fsdp import fully_shard

    from hpcflow.examples import toy

    dims = ParallelDims(args.dp, args.pp, args.tp, world_size, local_world_size)
    if dims.pp != 1 or dims.tp != 1:
        raise ValueError(f"--model toy-mlp is data-parallel only; got {dims.degrees}, use --model lm")
    config = toy.ToyConfig()
    torch.manual_seed(args.seed)  # same initial weights on every rank
    model = toy.build_model(config).to(device)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, toy.warmup_factor)
    seed_rank_streams(args.seed, rank)
    x_ND, y_N1 = (t.to(device) for t in toy.build_dataset(config))
    sampler = ResumableSampler(len(x_ND), args.batch_size, rank, world_size, args.seed)

    def step() -> float:
        indices = sampler.next_indices()
        loss = torch.nn.functional.mse_loss(model(x_ND[indices]), y_N1[indices])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        scheduler.step()
        return mean_over_job(float(loss.detach()), 1)

    return Task(model, optimizer, scheduler, sampler, dims, args.batch_size * world_size, None, step,
                {"model": "toy-mlp"})


def build_lm(args: Any, rank: int, world_size: int, local_world_size: int, device: Any) -> Task:
    """The transformer workload on the ``pp x dp x tp`` mesh.

    Collective (mesh, TP, FSDP and pipeline set-up). Every rank reads the data (up to
    ``--data-max-bytes``).

    Raises:
        ValueError: the layout, batch, micro-batch count, sequence length or data do not fit;
            the message names the flag to change.
    """
    from hpcflow.examples import data as hdata
    from hpcflow.examples import lm, metrics, parallelize

    dims = ParallelDims(args.dp, args.pp, args.tp, world_size, local_world_size)
    config = lm.preset(args.model_size, dropout=args.dropout)
    if args.seq_len > config.max_seq_len:
        raise ValueError(f"--seq-len {args.seq_len} exceeds the model's {config.max_seq_len}")
    global_batch = args.global_batch_size or args.batch_size * dims.dp
    if global_batch % dims.dp:
        raise ValueError(f"--global-batch-size {global_batch} is not divisible by dp={dims.dp}")
    local_batch = global_batch // dims.dp
    microbatches = args.microbatches or (dims.pp if dims.pp > 1 else 1)
    parallelize.check_microbatches(args.schedule, dims.pp, microbatches, local_batch)
    parallelize.check_tp(config, dims.tp)
    parallelize.check_dp_mode(args.dp_mode, dims.pp, dims.tp)
    tokens = hdata.load_tokens(args.data, args.seq_len, args.data_max_bytes)
    dims.build_mesh(device.type)
    coords = dims.coordinates(rank)
    sampler = ResumableSampler(tokens.num_samples, local_batch, coords["dp"], dims.dp, args.seed)

    def loss_fn(logits_BLV: torch.Tensor, targets_BL: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(logits_BLV.flatten(0, 1).float(), targets_BL.flatten())

    par = parallelize.build_parallel_model(
        config, dims, rank, device, seed=args.seed, schedule=args.schedule,
        microbatches=microbatches, dp_mode=args.dp_mode, loss_fn=loss_fn,
    )
    params = [p for part in par.parts for p in part.parameters()]
    optimizer = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(args.warmup_steps, args.steps))
    seed_rank_streams(args.seed, rank)
    autocast = (
        (lambda: torch.autocast(device.type, dtype=torch.bfloat16))
        if args.bf16 else contextlib.nullcontext
    )

    def step() -> float:
        inputs_BL, targets_BL = tokens.batch(sampler.next_indices(), config.vocab_size)
        inputs_BL, targets_BL = inputs_BL.to(device), targets_BL.to(device)
        loss_sum, count = 0.0, 0
        with autocast():
            if par.schedule is None:  # pp = 1: gradient accumulation over the micro-batches
                for x_BL, y_BL in zip(inputs_BL.chunk(microbatches), targets_BL.chunk(microbatches),
                                      strict=True):
                    loss = loss_fn(par.parts[0](x_BL), y_BL)
                    (loss / microbatches).backward()
                    loss_sum, count = loss_sum + float(loss.detach()), count + 1
            else:
                losses: list[torch.Tensor] = []
                par.schedule.step(
                    *([inputs_BL] if par.has_first else []),
                    target=targets_BL if par.has_last else None,
                    losses=losses if par.has_last else None,
                )
                loss_sum, count = float(sum(x.detach().float() for x in losses)), len(losses)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        scheduler.step()
        return mean_over_job(loss_sum, count)

    return Task(
        par.model, optimizer, scheduler, sampler, dims,
        tokens_per_step=global_batch * args.seq_len,
        flops_per_token=metrics.flops_per_token(config, args.seq_len),
        step_fn=step,
        describe={
            "model": "lm", "model_size": args.model_size, "params": lm.count_params(config),
            "layout": dims.degrees, "schedule": args.schedule if dims.pp > 1 else None,
            "microbatches": microbatches, "global_batch": global_batch, "seq_len": args.seq_len,
            "data": tokens.source, "data_files": tokens.num_files, "data_tokens": len(tokens.tokens),
        },
    )


def build_task(args: Any, env: Any, device: Any) -> Task:
    """The task ``args.model`` names, for this rank (``env`` is a ``DistEnv``)."""
    builder = build_lm if args.model == "lm" else build_toy
    return builder(args, env.rank, env.world_size, env.local_world_size, device)
