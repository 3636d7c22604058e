"""The example training program: every rank runs ``python -m hpcflow.examples.train``.

It follows docs/protocol.md: clean partial checkpoints, resume from the latest committed one,
train, agree on a stop request at each step boundary, save + commit, exit 75 when preempted, 0 when
done. Two workloads (:mod:`hpcflow.examples.tasks`): ``--model toy-mlp`` (default), an MLP with
FSDP2 over the whole world; ``--model lm``, a byte-level transformer on real text laid out as
pp x dp x tp (``--pp``, ``--dp``, ``--tp``; docs/training.md). gloo on CPU, NCCL on GPU.

Rank 0 prints one machine-readable JSON line per event on stdout (flushed):

- ``hpcflow-start {"world_size": W, "launcher": L, "backend": B, "job_id": J, "restart_count": R}``
- ``hpcflow-layout {"model": ..., "layout": {"pp", "dp", "tp"}, "device": ..., ...}``  what trains
- ``hpcflow-restore {"step": N, "layout", "saved_layout", "rng_restored"}``  what was loaded;
  ``rng_restored`` is false after a layout change (docs/training.md)
- ``hpcflow-resume {"step": N}``  resumed from committed step N (next step is N+1)
- ``hpcflow-step {"step": N, "loss": L, "step_time_s": T, "lr", "tokens", "tokens_per_s",
  "tflops_per_rank", "mfu"}``  after each step; ``loss`` is the mean over the job's samples;
  ``mfu`` is null without a known GPU. The same record goes to ``<run_dir>/metrics.jsonl``.
- ``hpcflow-checkpoint {"step": N, "reason": "interval"|"preempt"|"final", "save_s": T, "async"}``
  after a commit; ``save_s`` is the time training was blocked (with ``--async-checkpoint``, an
  interval save is reported when its background write has committed, with ``total_s``)
- ``hpcflow-preempted {"step": N}``  the preemption checkpoint is committed; exiting 75
- ``hpcflow-done {"step": N, "params_sha256": H, "optim_sha256": O}``  finished; H digests the full
  (gathered) model parameters and does not depend on the layout, O the full optimizer state
  (:mod:`hpcflow.runtime.digest`)

Exit codes: 0 done, 75 preempted after a committed checkpoint, 2 bad arguments or environment,
5 checkpoint failure, 1 any other failure (a stop request without a checkpoint directory too).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from collections.abc import Sequence
from typing import Any

from hpcflow.errors import HpcflowError
from hpcflow.runtime import dist as hdist
from hpcflow.runtime.lines import emit, log
from hpcflow.runtime.run import Run
from hpcflow.runtime.runconfig import RunConfig

EXIT_FAILED = 1
EXIT_USAGE = 2


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The program's command line (see the module docstring)."""
    from hpcflow.examples.choices import (
        DEFAULT_MAX_BYTES,
        DP_MODES,
        MODEL_SIZES,
        MODELS,
        SCHEDULES,
        STDLIB,
    )

    parser = argparse.ArgumentParser(
        prog="python -m hpcflow.examples.train",
        description="Example preemption-safe training run, one process per rank: a data-parallel "
        "MLP (toy-mlp) or a pp x dp x tp byte-level transformer on real text (lm).",
    )
    add = parser.add_argument
    add("--steps", type=int, default=20, help="total training steps")
    add("--step-time-s", type=float, default=0.0, help="extra seconds each step sleeps")
    add("--batch-size", type=int, default=16, help="micro-batch: samples (sequences) per dp rank")
    add("--global-batch-size", type=int, default=0,
        help="lm: sequences per step over all dp ranks (overrides --batch-size; keep it fixed "
        "when resuming on another dp degree)")
    add("--lr", type=float, default=1e-2, help="peak AdamW learning rate")
    add("--warmup-steps", type=int, default=5, help="lm: linear LR warm-up steps, then cosine")
    add("--seed", type=int, default=0, help="seed of model init, data order, RNG")
    add("--dist-timeout-s", type=float, default=600.0, help="collective timeout in seconds")
    add("--model", choices=MODELS, default="toy-mlp", help="workload")
    add("--dp", type=int, default=None,
        help="data-parallel degree; -1 = the remaining ranks (default: the job spec's "
        "parallelism, HPCFLOW_PARALLELISM, else -1)")
    add("--pp", type=int, default=None,
        help="pipeline-parallel degree (stages across ranks; default: the job spec's, else 1)")
    add("--tp", type=int, default=None,
        help="tensor-parallel degree (divides the ranks per node; default: the job spec's, else 1)")
    add("--dp-mode", choices=DP_MODES, default="fsdp", help="lm: FSDP2 sharding or DDP")
    add("--schedule", choices=sorted(SCHEDULES), default="gpipe", help="lm: pipeline schedule")
    add("--microbatches", type=int, default=0,
        help="lm: micro-batches per step (default: pp); must divide the per-dp-rank batch")
    add("--model-size", choices=sorted(MODEL_SIZES), default="tiny", help="lm: model preset")
    add("--dropout", type=float, default=0.1, help="lm: dropout probability")
    add("--seq-len", type=int, default=64, help="lm: tokens per sequence")
    add("--data", default=STDLIB,
        help="lm: 'stdlib' (the Python standard library's .py files), comma-separated text "
        "files/globs, or a uint16 .bin of token ids")
    add("--data-max-bytes", type=int, default=DEFAULT_MAX_BYTES, help="lm: text bytes to read")
    add("--bf16", action="store_true", help="lm: bf16 autocast (GPU; also runs on CPU)")
    add("--async-checkpoint", action="store_true",
        help="interval checkpoints are written in the background while training goes on")
    add("--overlap-staging", action="store_true",
        help="with --async-checkpoint: copy the state for it during the next step too (the "
        "optimizer's step waits for the copy)")
    args = parser.parse_args(argv)
    for name in ("steps", "batch_size", "seq_len", "data_max_bytes", "warmup_steps"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.global_batch_size < 0 or args.microbatches < 0 or not 0 <= args.dropout < 1:
        parser.error("--global-batch-size and --microbatches must be >= 0, --dropout in [0, 1)")
    if args.step_time_s < 0 or args.lr <= 0 or args.dist_timeout_s <= 0:
        parser.error("--step-time-s must be >= 0, --lr and --dist-timeout-s > 0")
    return args


def run(args: argparse.Namespace, hrun: Run) -> int:
    """Resume, train and checkpoint through the public :class:`~hpcflow.runtime.run.Run` API;
    returns the exit code (collective on every rank). A preemption raises ``Preempted``."""
    from hpcflow.examples.metrics import MetricsLog, device_peak_tflops, step_metrics
    from hpcflow.examples.tasks import build_task, seed_rank_streams
    from hpcflow.examples.trainstate import TrainState
    from hpcflow.runtime.digest import optimizer_sha256, params_sha256

    env, config = hrun.env, hrun.config
    try:
        task = build_task(args, env, hdist.collective_device())
    except ValueError as exc:  # a layout, batch or data that does not fit: same on every rank
        log(env, f"bad configuration: {exc}")
        return EXIT_USAGE
    layout = task.dims.degrees
    state = TrainState(
        task.model, task.optimizer, task.scheduler, task.sampler, env.rank, layout=layout,
        reseed=lambda step: seed_rank_streams(args.seed, env.rank, step),
    )
    app = {"app": state}
    device_name, peak = device_peak_tflops()
    emit(env, "hpcflow-layout", {**task.describe, "device": device_name, "peak_tflops": peak})
    if hrun.ckpt is not None:
        hrun.ckpt.extra_record.update(mesh=task.dims.describe(), model=task.describe.get("model"))

    def before_load(step: int) -> None:  # the RNG streams come back only on the same layout
        saved_layout = read_saved_layout(hrun, step)
        exact = state.prepare_load(saved_layout)
        emit(env, "hpcflow-restore", {
            "step": step, "layout": layout,
            "saved_layout": json.loads(saved_layout) if saved_layout else None,
            "rng_restored": exact,
        })

    hrun.restore(app, before_load=before_load)
    metrics_log = MetricsLog(
        config.run_dir / "metrics.jsonl" if env.is_rank0 and config.run_dir else None
    )
    try:
        while state.step < args.steps:
            started = time.monotonic()
            lr = task.scheduler.get_last_lr()[0]  # the rate this step uses
            loss = task.step()
            compute_s = time.monotonic() - started  # throughput excludes the rehearsal sleep
            if args.step_time_s:
                time.sleep(args.step_time_s)
            state.step += 1
            record = {
                "loss": loss, "step_time_s": time.monotonic() - started, "lr": lr,
                **step_metrics(
                    tokens=task.tokens_per_step, step_time_s=compute_s,
                    flops_per_token=task.flops_per_token, world_size=env.world_size,
                    peak_tflops=peak,
                ),
            }
            metrics_log.write({"step": state.step, **record, "time": time.time(),
                               "restart_count": env.restart_count})
            hrun.step_done(state.step, app, record)
    finally:
        metrics_log.close()
    hrun.finish(app)
    emit(env, "hpcflow-done", {
        "step": state.step, "params_sha256": params_sha256(task.model),
        "optim_sha256": optimizer_sha256(task.model, task.optimizer),
    })
    return 0


def read_saved_layout(hrun: Run, step: int) -> str | None:
    """The ``layout`` entry of committed checkpoint ``step`` (JSON text), or ``None`` when the
    checkpoint predates it (collective: a small DCP load)."""
    probe: dict[str, Any] = {"app": {"app": {"layout": ""}}}
    try:
        hrun.ckpt.load(step, probe)
    except HpcflowError:
        return None
    return str(probe["app"]["app"]["layout"]) or None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code (argparse exits 2 on a bad command line). A
    preemption ends the process with 75 inside (``Run`` leaves every rank together)."""
    args = parse_args(argv)
    code = EXIT_FAILED
    try:
        config = RunConfig.from_environ(os.environ)
    except ValueError as exc:
        print(f"hpcflow-runtime: bad environment: {exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    for name, default in (("dp", -1), ("pp", 1), ("tp", 1)):  # a flag wins over the job spec
        if getattr(args, name) is None:
            setattr(args, name, (config.parallelism or {}).get(name, default))
    try:
        # The RNG streams are the TrainState's own (kept per layout), not the Run's.
        hrun = Run.from_env(async_save=args.async_checkpoint, overlap=args.overlap_staging,
                            timeout_s=args.dist_timeout_s, rng=False)
    except ValueError as exc:  # the Slurm / torchrun variables
        print(f"hpcflow-runtime: bad environment: {exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    except RuntimeError as exc:  # the process group could not be joined
        print(f"hpcflow-runtime: {exc}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    try:
        with hrun:
            code = run(args, hrun)
    except HpcflowError as exc:
        log(hrun.env, f"error: {exc}")
        code = exc.exit_code
    except Exception:  # any other failure: full evidence, non-zero, never 75
        log(hrun.env, "failed:\n" + traceback.format_exc())
        code = EXIT_FAILED
    return code


if __name__ == "__main__":
    sys.exit(main())
