"""Memory per GPU of every (dp, pp, tp) layout of a model, whether it fits, and a ranking by a
simple communication model. Pure (no torch).

Memory (bytes per GPU, ``P`` parameters, ``L`` layers; a pipeline stage holds ``ceil(L/pp)``
layers and its share ``P * ceil(L/pp) / L`` of the parameters, the embeddings spread like a
layer's; tp splits a stage's parameters evenly):

- model states, by ``sharding`` (bytes per parameter of the stage's tp shard):

  ==========  =======  =======  ==========  =========================================
  sharding    params   grads    optimizer   source
  ==========  =======  =======  ==========  =========================================
  ``fsdp``    4 / dp   4 / dp   8 / dp      hpcflow's runtime: FSDP2 ``fully_shard`` over
                                            dp, fp32 parameters under bf16 autocast, Adam;
                                            16 / dp in all = ZeRO-3's (2 + 2 + 12) / N_d
                                            (Rajbhandari et al. 2020, ZeRO, SC20, fig. 1)
  ``zero1``   2        4        12 / dp     Megatron-LM's distributed optimizer,
                                            "6 + 12/d" bytes (Megatron Core docs,
                                            Distributed Optimizer, bf16 params, fp32 grads)
  ``ddp``     2        4        12          the same without sharding: 18 bytes
  ==========  =======  =======  ==========  =========================================

  ``fsdp`` also holds gathered parameters while a layer computes: two layers (the current one
  and the prefetched next one) in fp32, unsharded, when dp > 1 (FSDP2's default prefetch).
- activations (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
  Transformer Models", arXiv:2205.05198, section 4, with sequence parallelism beside tp):
  per layer and micro-batch ``s*b*h*(34 + 5*a*s/h) / tp`` bytes without recomputation; the
  ``5*a*s/h`` term (the attention score matrices) is left out when ``attention_scores`` is
  False (FlashAttention, or the paper's selective recomputation, does not keep them); with full
  activation checkpointing only each layer's input stays, ``2*s*b*h / tp``. Under a 1F1B
  schedule the first stage keeps ``pp`` micro-batches of its ``L/pp`` layers: ``L`` layers'
  worth whatever pp (section 4.2.3). The formula is the paper's for a GPT block (4h MLP,
  multi-head attention); Llama's SwiGLU MLP and grouped-query attention change it by tens of
  percent, and the logits of the last stage are not counted.

Communication (bytes one GPU sends per step, over a step that trains ``world * b`` sequences
whatever the layout, so each replica runs ``pp * tp`` micro-batches):

- tp: per layer and micro-batch four all-reduce-sized collectives of ``2*s*b*h`` bytes (two
  forward, two backward; Megatron-LM), ring cost ``2 (tp-1)/tp`` each; over NVLink.
- pp: per micro-batch one activation forward and one gradient backward of ``2*s*b*h / tp``
  bytes; over the network when a stage fills at least a node.
- dp: ``fsdp``: two all-gathers of fp32 parameters and one reduce-scatter of fp32 gradients,
  ``(dp-1)/dp`` of the rank's parameter bytes each; ``zero1``: a reduce-scatter of fp32
  gradients and an all-gather of bf16 parameters; ``ddp``: an all-reduce of fp32 gradients.
  Over the network when the dp group spans nodes.

Seconds = bytes / bandwidth (:data:`LINKS`), none of it overlapped with compute. The step's
compute is ``6 * P * s * b`` FLOPs per GPU at the GPU's dense bf16 peak (the same for every
layout), stretched by the pipeline bubble ``(pp-1) / (m + pp - 1)`` with ``m = pp * tp``
micro-batches, and by :data:`RECOMPUTE_FACTOR` for a layout that fits only with activation
checkpointing. Layouts that fit come first, then the shortest modelled step. Latency, overlap
and achieved FLOPS are not modelled: the ranking compares layouts, it does not predict a step
time.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from hpcflow.plan.models import ModelShape
from hpcflow.runtime.parallel_dims import ParallelDims, valid_layouts

GIB = 1024**3
#: Bytes per parameter (params, grads, optimizer) and whether each is divided by dp.
SHARDING: dict[str, tuple[tuple[float, bool], tuple[float, bool], tuple[float, bool]]] = {
    "fsdp": ((4, True), (4, True), (8, True)),
    "zero1": ((2, False), (4, False), (12, True)),
    "ddp": ((2, False), (4, False), (12, False)),
}
DEFAULT_HEADROOM = 0.10  # CUDA context, NCCL buffers, allocator fragmentation

#: instance type -> (GPU-to-GPU GB/s inside a node, network Gbit/s per node, dense bf16
#: TFLOPS per GPU, source). TFLOPS: NVIDIA A100 datasheet (312, bf16 Tensor Core, dense) and
#: H100 SXM datasheet (989, dense; H200 has the same compute).
LINKS: dict[str, tuple[float, float, float, str]] = {
    "p4d.24xlarge": (600, 400, 312, "https://aws.amazon.com/ec2/instance-types/p4/ (600 GB/s "
                                    "NVSwitch, 400 Gbps EFA); A100 datasheet"),
    "p4de.24xlarge": (600, 400, 312, "https://aws.amazon.com/ec2/instance-types/p4/; A100 "
                                     "datasheet"),
    "p5.48xlarge": (900, 3200, 989, "https://aws.amazon.com/ec2/instance-types/p5/ (900 GB/s "
                                    "NVSwitch, 3,200 Gbps EFA); H100 SXM datasheet"),
    "p5e.48xlarge": (900, 3200, 989, "https://aws.amazon.com/ec2/instance-types/p5/; H200 "
                                     "datasheet"),
    "p5en.48xlarge": (900, 3200, 989, "https://aws.amazon.com/ec2/instance-types/p5/; H200 "
                                      "datasheet"),
}
#: Assumed for other types: PCIe 4.0 x16 (32 GB/s) inside, 100 Gbit/s between nodes, 100 TFLOPS.
FALLBACK_LINK = (32.0, 100.0, 100.0, "assumed: no figure in hpcflow for this type (PCIe 4.0 "
                                     "x16 inside a node, 100 Gbit/s between nodes, 100 TFLOPS)")
#: Full activation checkpointing runs the forward pass twice: about 4/3 of the compute
#: (Korthikanti et al. 2022, section 5: "33% compute overhead").
RECOMPUTE_FACTOR = 4 / 3


@dataclass(frozen=True)
class Layout:
    """One (dp, pp, tp) layout and what it costs.

    Attributes:
        dp, pp, tp: the degrees.
        params_gib, grads_gib, optimizer_gib, gathered_gib: model states per GPU, GiB.
        activations_gib: activations per GPU without activation checkpointing, GiB.
        activations_ckpt_gib: the same with full activation checkpointing, GiB.
        total_gib, total_ckpt_gib: the sums without and with activation checkpointing.
        fits, fits_ckpt: whether each total fits the usable memory.
        comm_s: modelled communication seconds per step (see the module docstring).
        bubble: the pipeline bubble fraction.
        step_s: modelled step seconds: compute over (1 - bubble), times the recompute factor
            when only activation checkpointing fits, plus ``comm_s``.
        problem: why the model cannot take this layout ("" when it can).
    """

    dp: int
    pp: int
    tp: int
    params_gib: float
    grads_gib: float
    optimizer_gib: float
    gathered_gib: float
    activations_gib: float
    activations_ckpt_gib: float
    total_gib: float
    total_ckpt_gib: float
    fits: bool
    fits_ckpt: bool
    comm_s: float
    bubble: float
    step_s: float
    problem: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


@dataclass(frozen=True)
class LayoutPlan:
    """Every layout of a model on ``nodes`` nodes, ranked.

    Attributes:
        model: the model.
        nodes, gpus_per_node: the allocation.
        gpu_gib: memory of one GPU, GiB.
        headroom: fraction of it kept free; ``usable_gib`` is what is left.
        sharding: a key of :data:`SHARDING`.
        link_source: where the bandwidth figures come from.
        layouts: best first.
    """

    model: ModelShape
    nodes: int
    gpus_per_node: int
    gpu_gib: float
    headroom: float
    usable_gib: float
    sharding: str
    link_source: str
    layouts: list[Layout]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        out = asdict(self)
        out["layouts"] = [x.to_dict() for x in self.layouts]
        return out


def memory_layout(model: ModelShape, dp: int, pp: int, tp: int, *, sharding: str = "fsdp",
                  attention_scores: bool = False) -> dict[str, float]:
    """Bytes per GPU of one layout: ``params``, ``grads``, ``optimizer``, ``gathered``,
    ``activations`` and ``activations_ckpt`` (see the module docstring).

    Raises:
        KeyError: ``sharding`` is not a key of :data:`SHARDING`.
    """
    (pb, pd), (gb, gd), (ob, od) = SHARDING[sharding]
    stage_layers = math.ceil(model.layers / pp)
    rank_params = model.params * stage_layers / model.layers / tp
    s, b, h, a = model.seq_len, model.micro_batch, model.hidden, model.heads
    per_layer = s * b * h * (34 + (5 * a * s / h if attention_scores else 0)) / tp
    layer_params = model.params / model.layers / tp
    return {
        "params": rank_params * pb / (dp if pd else 1),
        "grads": rank_params * gb / (dp if gd else 1),
        "optimizer": rank_params * ob / (dp if od else 1),
        "gathered": 2 * 4 * layer_params if sharding == "fsdp" and dp > 1 else 0.0,
        "activations": model.layers * per_layer,
        "activations_ckpt": model.layers * 2 * s * b * h / tp,
    }


def comm_seconds(model: ModelShape, dp: int, pp: int, tp: int, gpus_per_node: int,
                 link: tuple[float, float, float, str], sharding: str = "fsdp") -> float:
    """Modelled communication seconds per step of one layout (see the module docstring)."""
    intra_bps = link[0] * 1e9
    inter_bps = link[1] * 1e9 / 8 / gpus_per_node  # a node's network, shared by its GPUs
    s, b, h = model.seq_len, model.micro_batch, model.hidden
    m = pp * tp  # micro-batches per replica per step
    act = 2 * s * b * h
    tp_bytes = m * math.ceil(model.layers / pp) * 4 * 2 * (tp - 1) / tp * act
    pp_bytes = m * 2 * act / tp if pp > 1 else 0.0
    rank_params = model.params * math.ceil(model.layers / pp) / model.layers / tp
    share = (dp - 1) / dp
    dp_bytes = {"fsdp": 3 * 4 * rank_params * share, "zero1": (4 + 2) * rank_params * share,
                "ddp": 2 * 4 * rank_params * share}[sharding]
    pp_bw = inter_bps if dp * tp >= gpus_per_node else intra_bps
    dp_bw = inter_bps if dp * tp > gpus_per_node else intra_bps
    return tp_bytes / intra_bps + pp_bytes / pp_bw + dp_bytes / dp_bw


def plan_layouts(model: ModelShape, nodes: int, gpus_per_node: int, gpu_gib: float, *,
                 instance_type: str = "", sharding: str = "fsdp",
                 headroom: float = DEFAULT_HEADROOM,
                 attention_scores: bool = False) -> LayoutPlan:
    """Every (dp, pp, tp) that :class:`~hpcflow.runtime.parallel_dims.ParallelDims` accepts for
    ``nodes x gpus_per_node`` ranks, with memory, fit and communication, best first.

    A layout ParallelDims accepts may still not suit the model: more stages than layers, or a
    tp degree that does not divide the attention heads (Megatron-LM's rule); it is listed with
    its ``problem`` and never fits.

    Raises:
        ValueError: an invalid model, allocation, headroom (0 <= headroom < 1) or sharding.
    """
    if problems := model.problems():
        raise ValueError("; ".join(problems))
    if nodes < 1 or gpus_per_node < 1 or not gpu_gib > 0:
        raise ValueError("nodes, gpus_per_node and gpu_gib must be above 0")
    if not 0 <= headroom < 1:
        raise ValueError(f"headroom={headroom!r} must be at least 0 and below 1")
    if sharding not in SHARDING:
        raise ValueError(f"sharding={sharding!r} is not one of {', '.join(SHARDING)}")
    link = LINKS.get(instance_type, FALLBACK_LINK)
    usable = gpu_gib * (1 - headroom)
    world = nodes * gpus_per_node
    # 6 P FLOPs per token trained (forward 2, backward 4), s * b tokens per GPU per step
    compute_s = 6 * model.params * model.seq_len * model.micro_batch / (link[2] * 1e12)
    out = []
    for dp, pp, tp in valid_layouts(world, gpus_per_node):
        ParallelDims(dp=dp, pp=pp, tp=tp, world_size=world, ranks_per_node=gpus_per_node)
        problem = ""
        if pp > model.layers:
            problem = f"pp={pp} is more than the {model.layers} layers"
        elif model.heads % tp:
            problem = f"tp={tp} does not divide the {model.heads} attention heads"
        mem = {k: v / GIB for k, v in memory_layout(model, dp, pp, tp, sharding=sharding,
                                                    attention_scores=attention_scores).items()}
        states = mem["params"] + mem["grads"] + mem["optimizer"] + mem["gathered"]
        total, total_ckpt = states + mem["activations"], states + mem["activations_ckpt"]
        fits, fits_ckpt = not problem and total <= usable, not problem and total_ckpt <= usable
        comm = comm_seconds(model, dp, pp, tp, gpus_per_node, link, sharding)
        bubble = (pp - 1) / (pp * tp + pp - 1)
        step = compute_s * (1 if fits or not fits_ckpt else RECOMPUTE_FACTOR) / (1 - bubble)
        out.append(Layout(dp, pp, tp, mem["params"], mem["grads"], mem["optimizer"],
                          mem["gathered"], mem["activations"], mem["activations_ckpt"], total,
                          total_ckpt, fits, fits_ckpt, comm, bubble, step + comm, problem))
    out.sort(key=lambda x: (not x.fits_ckpt, x.step_s, x.pp, x.tp))
    return LayoutPlan(model, nodes, gpus_per_node, gpu_gib, headroom, usable, sharding,
                      link[3], out)
