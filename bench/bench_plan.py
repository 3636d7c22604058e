"""Benchmark: the planner (hpcflow plan) against real shards, published rules and the scale of a
frontier run. It prints figures; it never fails on figures (a crash is a bug).

1. Memory model against real shards. Small models on CPU, gloo, one process per rank: FSDP2
   (``fully_shard``) over dp = 2, tensor parallel (``ColwiseParallel`` / ``RowwiseParallel``)
   with tp = 2, and both on a 2 x 2 mesh. After one AdamW step each rank sums the bytes of its
   local parameter, gradient and optimizer-state shards (``DTensor.to_local()``; Adam's
   ``step`` counter, a scalar, is left out) and the benchmark prints them beside
   :func:`hpcflow.plan.layout.memory_layout` for the same (dp, pp, tp) with fp32 states
   (``sharding="fsdp"``: 4 bytes of parameters, 4 of gradients and 8 of optimizer state per
   parameter of the rank's share). The linear layers have no bias and dimensions the degrees
   divide, so every shard is the same size.
2. Published rule. ``plan layout`` for Llama 3 70B on p4d.24xlarge (8 x 40 GiB A100) and
   p5.48xlarge (8 x 80 GiB H100), with ZeRO-3's 16 bytes per parameter of model states over
   all GPUs (Rajbhandari et al. 2020, "ZeRO", arXiv:1910.02054, section 5) as the check: the
   node count at which the states alone fit the GPUs' usable memory.
3. At scale, on paper. :func:`hpcflow.plan.goodput.predict` for 1,024 and 16,384 GPUs (nodes of
   8) with Llama 3's interruption rate (466 interruptions in 54 days on 16,384 GPUs, 419 of them
   unexpected; Dubey et al. 2024, arXiv:2407.21783, section 3.3.4), for a grid of save and
   restart costs, beside the "higher than 90% effective training time" Meta reports for that
   run (same section).

Usage: python bench/bench_plan.py [--skip-shards]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from machine import header, versions  # noqa: E402

from hpcflow.plan.goodput import GoodputInputs, predict  # noqa: E402
from hpcflow.plan.layout import DEFAULT_HEADROOM, memory_layout, plan_layouts  # noqa: E402
from hpcflow.plan.models import PRESETS, ModelShape  # noqa: E402

IN_DIM, HIDDEN = 64, 128  # both divisible by every degree used below
LAYOUTS = [(2, 1, 1), (1, 1, 2), (2, 1, 2)]  # (dp, pp, tp)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _rank(rank: int, world: int, dp: int, tp: int, port: int, out: str) -> None:
    """One rank: build the model on its mesh, train one step, write its local shard bytes."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")
    import warnings

    warnings.filterwarnings("ignore", message="FSDP2-wrapped module")  # the output is not mutated
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(IN_DIM, HIDDEN, bias=False), torch.nn.ReLU(),
                                torch.nn.Linear(HIDDEN, IN_DIM, bias=False))
    params = sum(p.numel() for p in model.parameters())
    mesh = init_device_mesh("cpu", (dp, tp), mesh_dim_names=("dp", "tp"))
    if tp > 1:
        parallelize_module(model, mesh["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
    if dp > 1:
        for layer in (model[0], model[2]):
            fully_shard(layer, mesh=mesh["dp"])
        fully_shard(model, mesh=mesh["dp"])
    optim = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(8, IN_DIM)).sum().backward()
    optim.step()

    def local_bytes(t: torch.Tensor) -> int:
        local = t.to_local() if isinstance(t, DTensor) else t
        return local.numel() * local.element_size()

    grads = sum(local_bytes(p.grad) for p in model.parameters() if p.grad is not None)
    states = sum(local_bytes(v) for s in optim.state.values() for k, v in s.items()
                 if k != "step" and isinstance(v, torch.Tensor))
    Path(out, f"{rank}.json").write_text(json.dumps({
        "params": sum(local_bytes(p) for p in model.parameters()), "grads": grads,
        "optimizer": states, "total_params": params}))
    dist.barrier()
    dist.destroy_process_group()


def shards() -> list[str]:
    """Part 1: predicted against measured bytes per rank, one line per layout and kind."""
    import torch.multiprocessing as mp

    lines = [f"{'dp pp tp':<10}{'kind':<11}{'predicted B':>13}{'measured B (per rank)':>26}"
             f"{'equal':>7}"]
    for dp, pp, tp in LAYOUTS:
        world = dp * pp * tp
        with tempfile.TemporaryDirectory(prefix="bench-plan-") as out:
            mp.spawn(_rank, args=(world, dp, tp, _free_port(), out), nprocs=world, join=True)
            ranks = [json.loads(Path(out, f"{r}.json").read_text()) for r in range(world)]
        total = ranks[0]["total_params"]
        shape = ModelShape("bench", params=total, layers=2, hidden=HIDDEN, heads=1, seq_len=1)
        want = memory_layout(shape, dp, pp, tp, sharding="fsdp")
        for kind in ("params", "grads", "optimizer"):
            got = sorted({r[kind] for r in ranks})
            same = got == [round(want[kind])]
            lines.append(f"{dp} {pp} {tp:<6}{kind:<11}{want[kind]:>13.0f}"
                         f"{', '.join(map(str, got)):>26}{str(same):>7}")
    return lines


def published() -> list[str]:
    """Part 2: the fewest nodes at which plan layout finds a layout of Llama 3 70B that fits,
    beside the fewest at which ZeRO-3's 16 bytes per parameter fit the usable memory."""
    model = PRESETS["llama-70b"]
    lines = []
    for instance, gpu_gib in (("p4d.24xlarge", 40.0), ("p5.48xlarge", 80.0)):
        usable = gpu_gib * (1 - DEFAULT_HEADROOM) * 2**30
        rule = next(n for n in range(1, 1000) if 16 * model.params / (8 * n) <= usable)
        planned = next(n for n in range(1, 65)
                       if any(x.fits_ckpt for x in plan_layouts(model, n, 8, gpu_gib,
                                                                instance_type=instance).layouts))
        lines.append(f"llama-70b on {instance}: ZeRO-3 rule (16 B/param over 8 x {gpu_gib:.0f} "
                     f"GiB per node, {DEFAULT_HEADROOM:.0%} headroom): {rule} nodes; plan layout "
                     f"(states + activations with checkpointing): {planned} nodes")
    return lines


def at_scale() -> list[str]:
    """Part 3: expected goodput for a grid of costs at 1,024 and 16,384 GPUs."""
    per_node_hour = {"466 (all)": 466 / (2048 * 54 * 24), "419 (unexpected)": 419 / (2048 * 54 * 24)}
    lines = [f"{'GPUs':>6} {'interruptions':<17}{'save s':>7}{'restart s':>10}{'MTBF h':>8}"
             f"{'interval s':>11}{'goodput':>9}"]
    for gpus in (1024, 16384):
        for label, rate in per_node_hour.items():
            for save_s, restart_s in ((5, 60), (30, 300), (60, 900)):
                p = predict(GoodputInputs(nodes=gpus // 8, gpus_per_node=8, hours=24 * 54,
                                          failures_per_node_hour=rate, save_s=save_s,
                                          restart_s=restart_s, startup_s=restart_s))
                lines.append(f"{gpus:>6} {label:<17}{save_s:>7}{restart_s:>10}"
                             f"{p.mtbf_s / 3600:>8.2f}{p.interval_s:>11.0f}{p.goodput:>9.3f}")
    lines.append("Meta reports higher than 90% effective training time for the 16,384-GPU run "
                 "(arXiv:2407.21783, section 3.3.4)")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--skip-shards", action="store_true",
                        help="leave out part 1 (it starts up to 4 torch processes)")
    args = parser.parse_args()
    for line in header("bench_plan: the planner against real shards, a published rule and scale"):
        print(line)
    print(f"# {versions(('torch', 'hpcflow'))}")
    if not args.skip_shards:
        print("\n1. memory per rank, bytes: plan's model against real FSDP2/TP shards "
              f"(Linear {IN_DIM}-{HIDDEN}-{IN_DIM}, no bias, fp32, AdamW, gloo)")
        for line in shards():
            print(line)
    print("\n2. a published rule")
    for line in published():
        print(line)
    print("\n3. at scale, on paper (54 days; startup = restart)")
    for line in at_scale():
        print(line)


if __name__ == "__main__":
    main()
