"""Step metrics: time, tokens per second and model FLOPs utilisation (MFU).

Model FLOPs per token, training (forward + backward), follow PaLM (Chowdhery et al. 2022,
"PaLM: Scaling Language Modeling with Pathways", Appendix B) as torchtitan computes them
(``get_num_flop_per_token``)::

    6 * N + 12 * n_layers * n_heads * head_dim * seq_len

``N`` counts the parameters without the token embedding (a lookup, no matmul); 6 = 2 FLOPs per
multiply-add x (1 forward + 2 backward matmuls). The attention term counts the two attention
matmuls (QK^T and AV) the same way, without discounting the causal mask, and without recomputation
(MFU counts model FLOPs, not hardware FLOPs; Korthikanti et al. 2022, "Reducing Activation
Recomputation in Large Transformer Models", §6).

MFU = achieved model FLOP/s over the world's peak dense bf16 FLOP/s (:data:`PEAK_BF16_TFLOPS`).
It is only reported on a GPU whose peak is known; on CPU it is ``None``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hpcflow.examples.lm import LMConfig, count_params

#: Peak dense (no 2:4 sparsity) bf16 tensor-core TFLOP/s per GPU, by a substring of
#: ``torch.cuda.get_device_name()``; matched in this order (the first hit wins), so the
#: specific variants come before the family name. Sources: NVIDIA datasheets, whose headline
#: numbers are "with sparsity" and twice these:
#: A100: nvidia.com/en-us/data-center/a100 (312); H100 SXM / PCIe / NVL: nvidia.com/en-us/
#: data-center/h100 (1979 / 1513 / 1671 sparse -> 989 / 756 / 835 dense, torchtitan's values);
#: H200: nvidia.com/en-us/data-center/h200 (1979 sparse -> 989, same chip clocks as H100 SXM);
#: B200: NVIDIA Blackwell datasheet, HGX B200 (4.5 PFLOPS sparse -> 2250 dense, torchtitan's
#: value); L40S: nvidia.com/en-us/data-center/l40s (733 sparse -> 362); A10G (AWS g5) has no
#: NVIDIA datasheet and is left out.
PEAK_BF16_TFLOPS: tuple[tuple[str, float], ...] = (
    ("H100 NVL", 835.0),
    ("H100 PCIe", 756.0),
    ("H100", 989.0),
    ("H200", 989.0),
    ("GH200", 989.0),
    ("B200", 2250.0),
    ("A100", 312.0),
    ("L40S", 362.0),
)


def peak_bf16_tflops(device_name: str | None) -> float | None:
    """Peak dense bf16 TFLOP/s of one GPU named ``device_name``, or ``None`` if unknown."""
    if not device_name:
        return None
    for key, tflops in PEAK_BF16_TFLOPS:
        if key in device_name:
            return tflops
    return None


def flops_per_token(config: LMConfig, seq_len: int) -> float:
    """Training FLOPs per token of the whole model (PaLM Appendix B; see the module docstring)."""
    n = count_params(config, embedding=False)
    attention = 12 * config.n_layers * config.n_heads * config.head_dim * seq_len
    return float(6 * n + attention)


def step_metrics(
    *,
    tokens: int,
    step_time_s: float,
    flops_per_token: float | None,
    world_size: int,
    peak_tflops: float | None,
) -> dict[str, Any]:
    """The numbers one step reports.

    Args:
        tokens: tokens the whole job trained on in the step (global batch x sequence length).
        step_time_s: wall time of the step, seconds.
        flops_per_token: model FLOPs per token, or ``None`` when not known (e.g. the toy model).
        world_size: ranks (GPUs) sharing the work.
        peak_tflops: peak TFLOP/s of one rank's device, or ``None`` (CPU, unknown GPU).

    Returns:
        ``{"tokens": ..., "tokens_per_s": ..., "tflops_per_rank": ..., "mfu": ...}``; the last
        two are ``None`` when their inputs are.
    """
    tokens_per_s = tokens / step_time_s if step_time_s > 0 else 0.0
    tflops = None
    mfu = None
    if flops_per_token is not None:
        tflops = flops_per_token * tokens_per_s / world_size / 1e12
        if peak_tflops:
            mfu = tflops / peak_tflops
    return {"tokens": tokens, "tokens_per_s": tokens_per_s, "tflops_per_rank": tflops, "mfu": mfu}


def device_peak_tflops() -> tuple[str, float | None]:
    """This process's device name and its peak bf16 TFLOP/s (``("cpu", None)`` without CUDA)."""
    import torch

    if not torch.cuda.is_available():
        return "cpu", None
    name = torch.cuda.get_device_name(torch.cuda.current_device())
    return name, peak_bf16_tflops(name)


class MetricsLog:
    """Appends one JSON object per step to ``<run_dir>/metrics.jsonl`` (rank 0 only).

    The file is opened in append mode, so the attempts of a requeued job add to one file; each
    line is flushed (a reader can follow it while the job runs). ``path=None`` disables it.
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._handle: Any = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._handle = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def write(self, record: dict[str, Any]) -> None:
        """Append ``record`` as one line."""
        if self._handle is not None:
            self._handle.write(json.dumps(record, sort_keys=True) + "\n")
            self._handle.flush()

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None
