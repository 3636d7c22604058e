"""``hpcflow plan layout``: every (dp, pp, tp) of a model on N nodes, memory per GPU split by
kind, whether it fits, ranked by a simple communication model (hpcflow/plan/layout.py)."""

from __future__ import annotations

import click

from hpcflow.cli.output import JsonCommand, emit_json, handles_errors, print_table
from hpcflow.cli.plan_args import MAX_NODES, gpu_instance, known_region, number

_SHAPE = (("params", "--params", "8030261248"), ("layers", "--layers", "32"),
          ("hidden", "--hidden", "4096"), ("heads", "--heads", "32"),
          ("seq_len", "--seq-len", "8192"), ("micro_batch", "--micro-batch", "1"))


@click.command("layout", cls=JsonCommand)
@click.option("--model", "preset", metavar="NAME",
              help="A preset with public shapes: llama-8b, llama-70b, llama-405b.")
@click.option("--params", metavar="N", help="Parameters (a model given by its shape).")
@click.option("--layers", metavar="N", help="Transformer layers.")
@click.option("--hidden", metavar="N", help="Hidden size.")
@click.option("--heads", metavar="N", help="Attention heads.")
@click.option("--seq-len", "seq_len", metavar="N", help="Tokens per sequence [preset: 8192].")
@click.option("--micro-batch", "micro_batch", metavar="N",
              help="Sequences per micro-batch [default: 1].")
@click.option("--instance", "instance_type", required=True, metavar="TYPE",
              help="EC2 instance type, e.g. p5.48xlarge (GPU count and memory from the catalog).")
@click.option("--nodes", "nodes_text", required=True, metavar="N", help="Nodes.")
@click.option("--sharding", type=click.Choice(["fsdp", "zero1", "ddp"]), default="fsdp",
              show_default=True,
              help="fsdp: parameters, gradients and optimizer sharded over dp (hpcflow's "
                   "runtime); zero1: the optimizer only (Megatron); ddp: nothing.")
@click.option("--headroom", "headroom_text", default="0.10", show_default=True, metavar="F",
              help="Fraction of GPU memory kept free (CUDA context, NCCL buffers, "
                   "fragmentation).")
@click.option("--store-attention-scores", is_flag=True,
              help="Count the attention score matrices in the activations (no FlashAttention).")
@click.option("--top", "top_text", default="10", show_default=True, metavar="N",
              help="Layouts to print (0: all); --json always has all.")
@click.option("--region", default="us-east-1", show_default=True,
              help="Region whose EC2 cache may add instance types.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@handles_errors
def layout(preset: str | None, instance_type: str, nodes_text: str, sharding: str,
           headroom_text: str, store_attention_scores: bool, top_text: str, region: str,
           as_json: bool, **shape: str | None) -> None:
    """Memory per GPU of every (dp, pp, tp) layout of a model on NODES x INSTANCE: parameters,
    gradients, optimizer state and activations (with and without activation checkpointing),
    whether it fits the GPU with the headroom kept, ranked by a modelled step time
    (docs/plan.md)."""
    from hpcflow.errors import SpecError
    from hpcflow.plan.layout import plan_layouts

    known_region("--region", region)
    model = _model(preset, shape)
    nodes = number("--nodes", nodes_text, low=1, high=MAX_NODES, integer=True, example="16")
    headroom = number("--headroom", headroom_text, low=0, high=0.9, example="0.10")
    top = number("--top", top_text, low=0, high=1_000_000, integer=True, example="10")
    gpus, gib = gpu_instance("--instance", instance_type, region)
    try:
        result = plan_layouts(model, nodes, gpus, gib, instance_type=instance_type,
                              sharding=sharding, headroom=headroom,
                              attention_scores=store_attention_scores)
    except ValueError as exc:
        raise SpecError(str(exc)) from None
    if as_json:
        emit_json({**result.to_dict(), "instance_type": instance_type})
        return
    shown = result.layouts[:top] if top else result.layouts
    m = result.model
    print_table(f"{m.name} ({m.params / 1e9:.2f}B params, seq {m.seq_len}, micro-batch "
                f"{m.micro_batch}) on {nodes} x {instance_type} ({gpus} x {gib:.0f} GiB; "
                f"{result.usable_gib:.1f} GiB usable, {100 * headroom:.0f}% headroom), "
                f"{sharding}",
                ["dp", "pp", "tp", "params", "grads", "optim", "gathered", "act", "act ckpt",
                 "total", "total ckpt", "fits", "comm s", "step s", "note"],
                [(x.dp, x.pp, x.tp, _gib(x.params_gib), _gib(x.grads_gib), _gib(x.optimizer_gib),
                  _gib(x.gathered_gib), _gib(x.activations_gib), _gib(x.activations_ckpt_gib),
                  _gib(x.total_gib), _gib(x.total_ckpt_gib),
                  "yes" if x.fits else ("with ckpt" if x.fits_ckpt else "no"),
                  f"{x.comm_s:.3f}", f"{x.step_s:.3f}", x.problem) for x in shown])
    fitting = sum(x.fits_ckpt for x in result.layouts)
    click.echo(f"{len(result.layouts)} layouts, {fitting} fit (with activation checkpointing "
               f"where needed); memory in GiB per GPU")
    if not fitting:
        click.echo("note: no layout fits; add nodes, use a larger-memory instance, or lower "
                   "--micro-batch or --seq-len")
    click.echo(f"links: {result.link_source}")


def _model(preset: str | None, shape: dict[str, str | None]):  # noqa: ANN202
    """The :class:`~hpcflow.plan.models.ModelShape` from a preset and/or shape options."""
    from dataclasses import replace

    from hpcflow.errors import SpecError
    from hpcflow.plan.models import PRESETS, ModelShape

    values = {}
    for key, option, example in _SHAPE:
        if shape.get(key) is not None:
            values[key] = number(option, shape[key], low=1, high=10**15, integer=True,
                                 example=example)
    if preset is not None:
        if preset not in PRESETS:
            raise SpecError(f"--model: {preset!r} is not a preset; allowed: "
                            f"{', '.join(PRESETS)} (or give --params, --layers, --hidden, "
                            "--heads and --seq-len)")
        model = replace(PRESETS[preset], **values)
    else:
        missing = [opt for key, opt, _ in _SHAPE[:5] if key not in values]
        if missing:
            raise SpecError(f"{', '.join(missing)}: missing; give --model PRESET "
                            f"({', '.join(PRESETS)}) or every one of --params, --layers, "
                            "--hidden, --heads and --seq-len")
        model = ModelShape("custom", **values)
    if problems := model.problems():
        raise SpecError("; ".join(problems), problems)
    return model


def _gib(value: float) -> str:
    return f"{value:.1f}"
