"""The example workload: a small MLP regressing a fixed random "teacher" on synthetic data.

Small enough to train on CPU with gloo in seconds, with dropout so a resume that forgets the RNG
state shows up as a different result. Shape legend: ``N`` samples, ``B`` micro-batch (samples per
rank per step), ``D`` input features, ``H`` hidden width.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: Seed of the synthetic data set; fixed so every rank and every run sees the same samples.
DATA_SEED = 1234


@dataclass(frozen=True)
class ToyConfig:
    """Sizes of the example workload.

    Attributes:
        num_samples: ``N``, samples in the synthetic data set.
        in_dim: ``D``, input features.
        hidden_dim: ``H``, hidden width (divisible by 4 so the weights shard evenly on 4 ranks).
        dropout: dropout probability after each hidden layer.
    """

    num_samples: int = 2048
    in_dim: int = 16
    hidden_dim: int = 64
    dropout: float = 0.1


def build_model(config: ToyConfig) -> Any:
    """A 3-layer MLP, ``x_BD -> y_B1``, initialised from torch's global RNG (seed it first)."""
    from torch import nn

    return nn.Sequential(
        nn.Linear(config.in_dim, config.hidden_dim),
        nn.GELU(),
        nn.Dropout(config.dropout),
        nn.Linear(config.hidden_dim, config.hidden_dim),
        nn.GELU(),
        nn.Dropout(config.dropout),
        nn.Linear(config.hidden_dim, 1),
    )


def build_dataset(config: ToyConfig) -> tuple[Any, Any]:
    """The synthetic data set, identical on every rank and every run (private generator).

    Returns:
        ``(x_ND, y_N1)``: standard-normal inputs and the teacher's targets, float32.
    """
    import torch

    gen = torch.Generator().manual_seed(DATA_SEED)
    x_ND = torch.randn(config.num_samples, config.in_dim, generator=gen)
    w_DH = torch.randn(config.in_dim, config.hidden_dim, generator=gen) / config.in_dim**0.5
    w_H1 = torch.randn(config.hidden_dim, 1, generator=gen) / config.hidden_dim**0.5
    y_N1 = torch.sin(x_ND @ w_DH) @ w_H1
    return x_ND, y_N1


def warmup_factor(step: int, warmup_steps: int = 5) -> float:
    """LR multiplier: linear warm-up over ``warmup_steps`` steps, then 1."""
    return min(1.0, (step + 1) / warmup_steps)
