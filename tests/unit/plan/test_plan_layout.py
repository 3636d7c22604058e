"""The memory planner against published rules and hand-worked cases."""

from __future__ import annotations

import pytest

from hpcflow.plan.layout import GIB, memory_layout, plan_layouts
from hpcflow.plan.models import PRESETS, ModelShape
from hpcflow.runtime.parallel_dims import ParallelDims

LLAMA_70B = PRESETS["llama-70b"]


@pytest.mark.parametrize(("name", "billions"), [
    # Published sizes: Llama 3.1 model cards (8.03B, 70.6B, 405.9B parameters).
    pytest.param("llama-8b", 8.03, id="8b"),
    pytest.param("llama-70b", 70.55, id="70b"),
    pytest.param("llama-405b", 405.85, id="405b"),
])
def test_the_presets_have_the_published_parameter_counts(name, billions):
    assert PRESETS[name].params / 1e9 == pytest.approx(billions, abs=0.01)


@pytest.mark.parametrize(("nodes", "gpus"), [pytest.param(8, 8, id="p4d-8-nodes"),
                                             pytest.param(4, 8, id="p5-4-nodes")])
def test_fsdp_model_states_follow_zero3s_16_bytes_per_parameter_over_the_gpus(nodes, gpus):
    # ZeRO (Rajbhandari et al., SC20), figure 1: mixed-precision Adam holds (2 + 2 + K) Psi
    # bytes with K = 12, and ZeRO stage 3 divides all of it by N_d: 16 Psi / N_d per GPU.
    world = nodes * gpus
    mem = memory_layout(LLAMA_70B, world, 1, 1, sharding="fsdp")
    assert mem["params"] + mem["grads"] + mem["optimizer"] == pytest.approx(
        16 * LLAMA_70B.params / world)


@pytest.mark.parametrize("dp", [pytest.param(1, id="dp1"), pytest.param(8, id="dp8"),
                                pytest.param(64, id="dp64")])
def test_zero1_follows_megatrons_6_plus_12_over_d_bytes(dp):
    # Megatron Core docs, "Distributed Optimizer": bf16 params, fp32 grads: 6 + 12/d bytes per
    # parameter (18 without the distributed optimizer).
    mem = memory_layout(LLAMA_70B, dp, 1, 1, sharding="zero1")
    per_param = (mem["params"] + mem["grads"] + mem["optimizer"]) / LLAMA_70B.params
    assert per_param == pytest.approx(6 + 12 / dp)
    ddp = memory_layout(LLAMA_70B, dp, 1, 1, sharding="ddp")
    assert (ddp["params"] + ddp["grads"] + ddp["optimizer"]) / LLAMA_70B.params == 18


@pytest.mark.parametrize(("instance", "gpu_gib", "too_few", "enough"), [
    # ZeRO-3's 16 Psi / N bytes for 70.55B parameters: 1,129 GB. A100 40 GB (p4d, 36 GiB usable
    # with 10% headroom): 16 GPUs hold 65.7 GiB each, too much; 32 GPUs hold 32.9 GiB, which
    # leaves room for checkpointed activations with tp = 8. H100 80 GB (p5, 72 GiB usable):
    # 8 GPUs hold 131 GiB each; 16 hold 65.7 GiB.
    pytest.param("p4d.24xlarge", 40.0, 2, 4, id="p4d"),
    pytest.param("p5.48xlarge", 80.0, 1, 2, id="p5"),
])
def test_70b_fits_p4d_and_p5_where_the_zero_rule_says_it_does(instance, gpu_gib, too_few,
                                                              enough):
    small = plan_layouts(LLAMA_70B, too_few, 8, gpu_gib, instance_type=instance)
    assert not any(x.fits_ckpt for x in small.layouts)
    big = plan_layouts(LLAMA_70B, enough, 8, gpu_gib, instance_type=instance)
    best = big.layouts[0]
    assert best.fits_ckpt
    assert best.params_gib + best.grads_gib + best.optimizer_gib == pytest.approx(
        16 * LLAMA_70B.params / (enough * 8) / GIB, rel=0.01)


def test_activations_follow_korthikanti_with_and_without_checkpointing():
    # Korthikanti et al. 2022, sec. 4: s*b*h*34/t bytes per layer (attention scores not kept),
    # plus 5*a*s^2*b/t with them; full recomputation keeps 2*s*b*h/t per layer.
    # llama-8b, s = 8192, b = 1, h = 4096, 32 layers, tp = 2:
    #   no recomputation: 32 * 8192 * 4096 * 34 / 2 = 18,253,611,008 bytes = 17 GiB
    #   full recomputation: 32 * 2 * 8192 * 4096 / 2 = 2^30 bytes = 1 GiB
    mem = memory_layout(PRESETS["llama-8b"], 4, 1, 2)
    assert mem["activations"] == 18_253_611_008
    assert mem["activations_ckpt"] == GIB
    scores = memory_layout(PRESETS["llama-8b"], 4, 1, 2, attention_scores=True)
    assert scores["activations"] - mem["activations"] == 32 * 5 * 32 * 8192 * 8192 / 2


def test_every_layout_is_one_paralleldims_accepts_and_model_misfits_are_marked():
    tiny = ModelShape("tiny", params=10_000_000, layers=2, hidden=256, heads=4, seq_len=128)
    result = plan_layouts(tiny, 2, 8, 24.0)
    assert len(result.layouts) == len({(x.dp, x.pp, x.tp) for x in result.layouts})
    for x in result.layouts:
        ParallelDims(dp=x.dp, pp=x.pp, tp=x.tp, world_size=16, ranks_per_node=8)
    marked = {(x.pp, x.tp): x.problem for x in result.layouts if x.problem}
    assert marked[(4, 1)] == "pp=4 is more than the 2 layers"
    assert marked[(1, 8)] == "tp=8 does not divide the 4 attention heads"
    assert not any(x.fits or x.fits_ckpt for x in result.layouts if x.problem)


def test_layouts_that_fit_come_first_and_the_ranking_prefers_tp_inside_fast_links():
    result = plan_layouts(LLAMA_70B, 16, 8, 80.0, instance_type="p5.48xlarge")
    fits = [x.fits_ckpt for x in result.layouts]
    assert fits == sorted(fits, reverse=True)
    steps = [x.step_s for x in result.layouts if x.fits_ckpt]
    assert steps == sorted(steps)
    # the same layout with a slower network between nodes costs more communication
    slow = plan_layouts(LLAMA_70B, 16, 8, 40.0, instance_type="p4d.24xlarge")
    by_degrees = {(x.dp, x.pp, x.tp): x.comm_s for x in slow.layouts}
    for x in result.layouts:
        if x.dp > 1:
            assert by_degrees[(x.dp, x.pp, x.tp)] > x.comm_s
