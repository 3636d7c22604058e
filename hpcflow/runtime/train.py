"""The example training program: every rank runs ``python -m hpcflow.runtime.train``.

It follows docs/protocol.md: clean partial checkpoints, resume from the latest committed one,
train, agree on a stop request at each step boundary, save + commit, exit 75 when preempted, 0 when
done. Data parallelism is FSDP2 ``fully_shard`` over the whole world (gloo on CPU, NCCL on GPU).

Rank 0 prints one machine-readable JSON line per event on stdout (flushed):

- ``hpcflow-start {"world_size": W, "launcher": L, "backend": B, "job_id": J, "restart_count": R}``
- ``hpcflow-resume {"step": N}``  resumed from committed step N (next step is N+1)
- ``hpcflow-step {"step": N, "loss": L, "step_time_s": T}``  after each step; ``loss`` is the mean
  over ranks
- ``hpcflow-checkpoint {"step": N, "reason": "interval"|"preempt"|"final", "save_s": T}``
- ``hpcflow-preempted {"step": N}``  the preemption checkpoint is committed; exiting 75
- ``hpcflow-done {"step": N, "params_sha256": H}``  finished; H digests all model parameters

Exit codes: 0 done, 75 preempted after a committed checkpoint, 2 bad arguments or environment,
5 checkpoint failure, 1 any other failure (a stop request without a checkpoint directory too).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
import traceback
from collections.abc import Sequence
from typing import Any

from hpcflow.errors import HpcflowError
from hpcflow.runtime import dist as hdist
from hpcflow.runtime.checkpoint import CheckpointManager
from hpcflow.runtime.commit import write_json_durably
from hpcflow.runtime.env import DistEnv, dist_env_from
from hpcflow.runtime.preemption import PreemptionMonitor
from hpcflow.runtime.runconfig import EXIT_PREEMPTED, RunConfig

EXIT_FAILED = 1
EXIT_USAGE = 2


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The program's command line (see the module docstring)."""
    parser = argparse.ArgumentParser(
        prog="python -m hpcflow.runtime.train",
        description="Example preemption-safe data-parallel training run (one process per rank).",
    )
    parser.add_argument("--steps", type=int, default=20, help="total training steps")
    parser.add_argument(
        "--step-time-s", type=float, default=0.0, help="extra seconds each step sleeps"
    )
    parser.add_argument("--batch-size", type=int, default=16, help="micro-batch: samples per rank")
    parser.add_argument("--lr", type=float, default=1e-2, help="peak AdamW learning rate")
    parser.add_argument("--seed", type=int, default=0, help="seed of model init, data order, RNG")
    parser.add_argument(
        "--dist-timeout-s", type=float, default=600.0, help="collective timeout in seconds"
    )
    args = parser.parse_args(argv)
    for name in ("steps", "batch_size"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.step_time_s < 0 or args.lr <= 0 or args.dist_timeout_s <= 0:
        parser.error("--step-time-s must be >= 0, --lr and --dist-timeout-s > 0")
    return args


def emit(env: DistEnv, tag: str, payload: dict[str, Any]) -> None:
    """Print ``<tag> <json>`` on rank 0's stdout and flush (the log is read while it runs)."""
    if env.is_rank0:
        print(f"{tag} {json.dumps(payload, sort_keys=True)}", flush=True)


def log(env: DistEnv, message: str) -> None:
    """A human-readable line on stderr, tagged with the rank."""
    prefix = f"hpcflow-runtime rank {env.rank}/{env.world_size}"
    print(f"{prefix}: {message}", file=sys.stderr, flush=True)


def params_sha256(model: Any) -> str:
    """sha256 over every parameter's name, dtype, shape and full value (collective: sharded
    parameters are gathered with ``full_tensor()`` on every rank)."""
    from torch.distributed.tensor import DTensor

    digest = hashlib.sha256()
    for name, param in model.named_parameters():
        full = param.full_tensor() if isinstance(param, DTensor) else param
        full = full.detach().cpu().contiguous()
        digest.update(f"{name}|{full.dtype}|{tuple(full.shape)}|".encode())
        digest.update(full.numpy().tobytes())
    return digest.hexdigest()


def build(args: argparse.Namespace, env: DistEnv) -> tuple[Any, Any, Any]:
    """Model (FSDP2 over the world), optimizer + LR scheduler, and (x_ND, y_N1) data."""
    import random

    import numpy as np
    import torch
    from torch.distributed.fsdp import fully_shard

    from hpcflow.runtime import toy

    config = toy.ToyConfig()
    device = hdist.collective_device()  # the local GPU under NCCL, else the CPU
    torch.manual_seed(args.seed)  # same initial weights on every rank
    model = toy.build_model(config).to(device)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, toy.warmup_factor)
    # Per-rank streams (dropout masks differ per rank); the checkpoint restores them exactly.
    rank_seed = args.seed * 100_003 + env.rank + 1
    torch.manual_seed(rank_seed)
    random.seed(rank_seed)
    np.random.seed(rank_seed % 2**32)
    x_ND, y_N1 = toy.build_dataset(config)
    return model, (optimizer, scheduler), (x_ND.to(device), y_N1.to(device))


def train_step(model: Any, optimizer: Any, scheduler: Any, x_BD: Any, y_B1: Any) -> float:
    """One forward/backward/update; returns the loss averaged over ranks."""
    import torch
    import torch.distributed as dist

    loss = torch.nn.functional.mse_loss(model(x_BD), y_B1)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    scheduler.step()
    total = loss.detach().clone().to(hdist.collective_device())
    if hdist.is_distributed():
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
    return float(total.item()) / hdist.get_world_size()


def run(
    args: argparse.Namespace, config: RunConfig, env: DistEnv, monitor: PreemptionMonitor
) -> int:
    """Resume, train and checkpoint; returns the exit code (collective on every rank)."""
    from hpcflow.runtime.sampler import ResumableSampler
    from hpcflow.runtime.trainstate import TrainState

    model, (optimizer, scheduler), (x_ND, y_N1) = build(args, env)
    sampler = ResumableSampler(len(x_ND), args.batch_size, env.rank, env.world_size, args.seed)
    state = TrainState(model, optimizer, scheduler, sampler, env.rank)
    app = {"app": state}
    ckpt = None
    last_saved = None  # decided the same way on every rank, never from a local directory read
    if config.checkpoint_dir is not None:
        ckpt = CheckpointManager(
            config.checkpoint_dir,
            keep=config.checkpoint_keep,
            interval_steps=config.checkpoint_interval,
            extra_record={
                "job_id": env.job_id,
                "restart_count": env.restart_count,
                "mesh": {"dp": env.world_size},
            },
        )
        for path in ckpt.clean_partial():
            log(env, f"removed partial checkpoint {path}")
        latest = hdist.broadcast_object(ckpt.latest_committed())
        if latest is not None:
            ckpt.load(latest, app)
            last_saved = latest
            emit(env, "hpcflow-resume", {"step": state.step})
    while state.step < args.steps:
        started = time.monotonic()
        indices = sampler.next_indices()
        loss = train_step(model, optimizer, scheduler, x_ND[indices], y_N1[indices])
        if args.step_time_s:
            time.sleep(args.step_time_s)
        state.step += 1
        emit(env, "hpcflow-step", {
            "step": state.step, "loss": loss, "step_time_s": time.monotonic() - started,
        })
        stop = monitor.should_stop() and state.step < args.steps
        if stop and ckpt is None:
            log(env, "preemption requested but no checkpoint directory is set; stopping")
            return EXIT_FAILED
        if stop or (ckpt is not None and ckpt.due(state.step)):
            save(env, ckpt, state.step, app, "preempt" if stop else "interval")
            last_saved = state.step
        if stop:
            return preempted(env, config, state.step)
    if ckpt is not None and last_saved != state.step:
        save(env, ckpt, state.step, app, "final")
    emit(env, "hpcflow-done", {"step": state.step, "params_sha256": params_sha256(model)})
    return 0


def save(env: DistEnv, ckpt: Any, step: int, app: dict[str, Any], reason: str) -> None:
    """Save + commit the checkpoint of ``step`` and report how long it took."""
    started = time.monotonic()
    ckpt.save(step, app)
    ckpt.wait()
    emit(env, "hpcflow-checkpoint", {
        "step": step, "reason": reason, "save_s": time.monotonic() - started,
    })


def preempted(env: DistEnv, config: RunConfig, step: int) -> int:
    """After the preemption checkpoint is committed: rank 0 writes ``HPCFLOW_PREEMPT_COMMITTED``,
    then every rank waits for it (srun ``--kill-on-bad-exit`` would otherwise kill rank 0 while
    it writes) and returns 75. Nothing collective may follow: the ranks leave together."""
    if env.is_rank0 and config.preempt_committed is not None:
        config.preempt_committed.parent.mkdir(parents=True, exist_ok=True)
        write_json_durably(config.preempt_committed, {"step": step, "time": time.time()})
    emit(env, "hpcflow-preempted", {"step": step})
    hdist.barrier()
    return EXIT_PREEMPTED


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    args = parse_args(argv)
    try:
        env = dist_env_from(os.environ)
        config = RunConfig.from_environ(os.environ)
    except ValueError as exc:
        print(f"hpcflow-runtime: bad environment: {exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    code = EXIT_FAILED
    # First, before torch is imported: USR1's default action would kill the process. Never
    # closed: a late USR1 during teardown must not kill a rank that finished (srun would then
    # report 128+10).
    monitor = PreemptionMonitor(config.preempt_flag)
    try:
        backend = hdist.init_distributed(env, timeout_s=args.dist_timeout_s)
        emit(env, "hpcflow-start", {
            "world_size": env.world_size, "launcher": env.launcher, "backend": backend,
            "job_id": env.job_id, "restart_count": env.restart_count,
        })
        code = run(args, config, env, monitor)
    except HpcflowError as exc:
        log(env, f"error: {exc}")
        code = exc.exit_code
    except Exception:  # any other failure: full evidence, non-zero, never 75
        log(env, "failed:\n" + traceback.format_exc())
        code = EXIT_FAILED
    finally:
        if code != EXIT_PREEMPTED:  # preempted: leave at once, see exit_now()
            hdist.shutdown()
    return code


def exit_now(code: int) -> None:
    """Exit the process with ``code``; after a preemption without interpreter teardown.

    Under ``srun --kill-on-bad-exit=1`` the first rank to exit 75 makes srun SIGKILL the others,
    and srun then reports 128+9 rather than 75 (srun(1), "RETURN VALUE"). Leaving right after the
    last barrier, without tearing down the process group and the interpreter, keeps the ranks'
    exits milliseconds apart.
    """
    if code == EXIT_PREEMPTED:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    exit_now(main())
