"""The byte-level model, its data, its FLOPs and the checks on schedules and tensor parallelism."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from hpcflow.examples import data, lm, metrics, parallelize
from hpcflow.runtime.sampler import ResumableSampler


def test_count_params_matches_the_built_model():
    for name in ("tiny", "small"):
        config = lm.PRESETS[name]
        model = lm.Transformer(config)
        assert lm.count_params(config) == sum(p.numel() for p in model.parameters())


def test_presets_span_a_few_mb_to_a_billion_parameters():
    assert lm.count_params(lm.PRESETS["tiny"]) * 4 < 2 * 2**20
    assert 1.0e9 < lm.count_params(lm.PRESETS["1b"]) < 1.5e9


def test_a_stage_starts_with_the_same_weights_as_the_whole_model():
    config = lm.preset("tiny", dropout=0.0)
    whole = lm.Transformer(config)
    whole.init_weights(seed=7)
    tail = lm.Transformer(config, range(2, 4), first=False, last=True)
    tail.init_weights(seed=7)
    whole_params = dict(whole.named_parameters())
    names = [name for name, _ in tail.named_parameters()]
    assert names and all(name.startswith(("layers.2.", "layers.3.", "norm.", "output.")) for name in names)
    for name, param in tail.named_parameters():
        assert torch.equal(param, whole_params[name]), name


def test_stages_chained_compute_the_whole_model():
    config = lm.preset("tiny", dropout=0.0)
    whole = lm.Transformer(config).eval()
    whole.init_weights(seed=1)
    head = lm.Transformer(config, range(0, 2), first=True, last=False).eval()
    tail = lm.Transformer(config, range(2, 4), first=False, last=True).eval()
    head.init_weights(seed=1)
    tail.init_weights(seed=1)
    tokens_BL = torch.randint(0, 256, (2, 16))
    logits_BLV = whole(tokens_BL)
    assert logits_BLV.shape == (2, 16, 256)
    torch.testing.assert_close(tail(head(tokens_BL)), logits_BLV)


def test_merged_parts_hold_every_parameter_under_its_whole_model_name():
    """What checkpoints of an interleaved schedule (two parts per rank) rely on."""
    config = lm.preset("tiny")
    first = lm.Transformer(config, [0], first=True, last=False)
    third = lm.Transformer(config, [2], first=False, last=False)
    last = lm.Transformer(config, [3], first=False, last=True)
    merged = parallelize.merge_parts([first, third, last])
    whole = {name for name, _ in lm.Transformer(config).named_parameters()}
    names = [name for name, _ in merged.named_parameters()]
    assert len(names) == len(set(names))
    assert set(names) == {n for n in whole if not n.startswith("layers.1.")}
    params = {id(p) for part in (first, third, last) for p in part.parameters()}
    assert {id(p) for p in merged.parameters()} == params


@pytest.mark.parametrize(
    ("layers", "stages", "sizes"),
    [
        pytest.param(4, 2, [2, 2], id="even"),
        pytest.param(5, 2, [3, 2], id="extra-goes-first"),
        pytest.param(24, 8, [3] * 8, id="1b-pp8"),
        pytest.param(4, 4, [1, 1, 1, 1], id="one-each"),
    ],
)
def test_split_layers_is_contiguous_and_even(layers, stages, sizes):
    ranges = lm.split_layers(layers, stages)
    assert [len(r) for r in ranges] == sizes
    assert [i for r in ranges for i in r] == list(range(layers))


def test_split_layers_refuses_empty_stages():
    with pytest.raises(ValueError, match="4 layers cannot be split over 8 pipeline stages"):
        lm.split_layers(4, 8)


@pytest.mark.parametrize(
    ("schedule", "pp", "micro", "batch", "message"),
    [
        pytest.param("gpipe", 2, 3, 4, "3 micro-batches do not divide the batch of 4", id="not-divisor"),
        pytest.param("gpipe", 2, 0, 4, "0 micro-batches", id="zero"),
        pytest.param("1f1b", 4, 2, 4, r"at least as many micro-batches as pipeline stages: 2 < pp=4",
                     id="1f1b-too-few"),
        pytest.param("interleaved-1f1b", 2, 1, 4, "multiple of pp=2", id="interleaved-not-multiple"),
        pytest.param("zero-bubble", 2, 2, 4, "schedule 'zero-bubble' is not known", id="unknown"),
    ],
)
def test_microbatch_count_is_checked_against_schedule_and_batch(schedule, pp, micro, batch, message):
    with pytest.raises(ValueError, match=message):
        parallelize.check_microbatches(schedule, pp, micro, batch)


@pytest.mark.parametrize(
    ("schedule", "pp", "micro", "batch"),
    [
        pytest.param("gpipe", 2, 2, 4, id="gpipe"),
        pytest.param("1f1b", 2, 4, 8, id="1f1b"),
        pytest.param("interleaved-1f1b", 2, 4, 4, id="interleaved"),
        pytest.param("gpipe", 1, 4, 8, id="pp1-accumulation"),
    ],
)
def test_usable_microbatch_counts_are_accepted(schedule, pp, micro, batch):
    # check_microbatches raises ValueError for a count it refuses and returns None otherwise.
    assert parallelize.check_microbatches(schedule, pp, micro, batch) is None


def test_tp_must_divide_heads_and_mlp():
    parallelize.check_tp(lm.PRESETS["tiny"], 4)
    with pytest.raises(ValueError, match=r"tp=3 must divide the attention heads \(4\)"):
        parallelize.check_tp(lm.PRESETS["tiny"], 3)


@pytest.mark.parametrize(("pp", "tp"), [pytest.param(2, 1, id="pp2"), pytest.param(1, 2, id="tp2")])
def test_ddp_with_pipeline_or_tensor_parallel_is_refused_with_the_reason(pp, tp):
    parallelize.check_dp_mode("ddp", 1, 1)
    with pytest.raises(ValueError, match=f"--dp-mode ddp is for pure data parallelism .* pp={pp}, tp={tp}"):
        parallelize.check_dp_mode("ddp", pp, tp)


def test_flops_per_token_follows_palm_appendix_b():
    config = lm.PRESETS["tiny"]
    n = lm.count_params(config, embedding=False)
    expected = 6 * n + 12 * config.n_layers * config.n_heads * config.head_dim * 64
    assert metrics.flops_per_token(config, 64) == expected


@pytest.mark.parametrize(
    ("name", "tflops"),
    [
        pytest.param("NVIDIA A100-SXM4-80GB", 312.0, id="a100"),
        pytest.param("NVIDIA H100 80GB HBM3", 989.0, id="h100-sxm"),
        pytest.param("NVIDIA H100 PCIe", 756.0, id="h100-pcie"),
        pytest.param("NVIDIA H100 NVL", 835.0, id="h100-nvl"),
        pytest.param("NVIDIA H200", 989.0, id="h200"),
        pytest.param("NVIDIA B200", 2250.0, id="b200"),
        pytest.param("NVIDIA A10G", None, id="unknown"),
        pytest.param(None, None, id="cpu"),
    ],
)
def test_peak_table(name, tflops):
    assert metrics.peak_bf16_tflops(name) == tflops


def test_step_metrics_mfu_is_achieved_over_peak():
    got = metrics.step_metrics(tokens=1000, step_time_s=0.5, flops_per_token=3e9, world_size=2,
                               peak_tflops=1.0)
    assert got["tokens_per_s"] == 2000
    assert got["tflops_per_rank"] == pytest.approx(3e9 * 2000 / 2 / 1e12)
    assert got["mfu"] == pytest.approx(got["tflops_per_rank"] / 1.0)
    cpu = metrics.step_metrics(tokens=1000, step_time_s=0.5, flops_per_token=3e9, world_size=2,
                               peak_tflops=None)
    assert cpu["mfu"] is None


def test_stdlib_corpus_is_real_python_text_in_sorted_order():
    files = data.stdlib_files()
    assert files == sorted(files) and len(files) > 100
    assert not any("site-packages" in f.parts for f in files)
    tokens = data.load_tokens("stdlib", seq_len=32, max_bytes=50_000)
    text = bytes(tokens.tokens[:50_000]).decode("utf-8", errors="replace")
    assert "def " in text and "import " in text
    again = data.load_tokens("stdlib", seq_len=32, max_bytes=50_000)
    assert np.array_equal(tokens.tokens, again.tokens)


def test_batches_are_shifted_windows(tmp_path):
    (tmp_path / "a.txt").write_bytes(bytes(range(40)))
    (tmp_path / "b.txt").write_bytes(bytes(range(100, 140)))
    tokens = data.load_tokens(str(tmp_path / "*.txt"), seq_len=8)
    assert tokens.num_samples == (80 - 1) // 8 and tokens.num_files == 2
    inputs_BL, targets_BL = tokens.batch([0, 5], vocab_size=256)
    assert inputs_BL[0].tolist() == list(range(8)) and targets_BL[0].tolist() == list(range(1, 9))
    assert inputs_BL[1].tolist() == list(range(100, 108))  # sample 5 starts at token 40 = file b


def test_bin_tokens_are_memory_mapped_uint16_and_checked_against_the_vocabulary(tmp_path):
    path = tmp_path / "train.bin"
    np.arange(1000, dtype="<u2").tofile(path)
    tokens = data.load_tokens(str(path), seq_len=10)
    assert isinstance(tokens.tokens, np.memmap) and tokens.num_samples == 99
    inputs_BL, _ = tokens.batch([30], vocab_size=1024)
    assert inputs_BL[0, 0].item() == 300
    with pytest.raises(ValueError, match="token id 310 is not below the vocabulary size 256"):
        tokens.batch([30], vocab_size=256)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param("/nonexistent/*.txt", "matches no file", id="no-match"),
        pytest.param("/nonexistent/x.bin", "no such file", id="no-bin"),
    ],
)
def test_bad_data_specs_are_named(spec, message):
    with pytest.raises(ValueError, match=message):
        data.load_tokens(spec, seq_len=8)


def test_too_little_data_for_one_sample(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"short")
    with pytest.raises(ValueError, match="fewer than one sample"):
        data.load_tokens(str(tmp_path / "a.txt"), seq_len=8)


def test_global_sampler_position_is_the_same_for_any_dp_degree():
    """What a dp=2 -> dp=1 reshard relies on: the same global batch gives the same samples."""
    dp2 = [ResumableSampler(100, 4, rank, 2, seed=3) for rank in range(2)]
    dp1 = ResumableSampler(100, 8, 0, 1, seed=3)
    for _ in range(5):
        assert sorted(dp2[0].next_indices().tolist() + dp2[1].next_indices().tolist()) == sorted(
            dp1.next_indices().tolist())
    dp1_resumed = ResumableSampler(100, 8, 0, 1, seed=3)
    dp1_resumed.load_state_dict(dp2[0].state_dict())
    assert dp1_resumed.state_dict() == dp1.state_dict()
    assert not math.isnan(float(dp1.epoch))
