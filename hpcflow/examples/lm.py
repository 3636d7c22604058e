"""A small byte-level decoder-only transformer whose size is a config.

Byte-level: the vocabulary is the 256 byte values, so no tokenizer is downloaded; a pre-tokenized
``.bin`` may use a larger vocabulary (``LMConfig.vocab_size``). Pre-norm blocks with RMSNorm,
causal scaled-dot-product attention and a SwiGLU MLP, in the module layout torchtitan's Llama
uses (``tok_embeddings``, ``layers.<i>``, ``norm``, ``output``) so the tensor-parallel plan and
the pipeline split address modules by name.

A model is built for a *stage*: a contiguous range of layer ids, with the embedding only on the
first stage and the norm and output head only on the last. Layers keep their global ids
(``layers.5`` is layer 5 whatever the pipeline degree), so parameter names, and with them the
checkpoint's keys, do not depend on the layout. Each layer is initialised from its own generator
seeded by ``(seed, layer id)``: every layout starts from the same weights.

Shape legend: ``B`` batch (sequences), ``L`` sequence length, ``D`` model width, ``H`` local
attention heads (all heads divided by the tp degree under tensor parallelism), ``K`` head width,
``F`` local MLP hidden width, ``V`` vocabulary.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class LMConfig:
    """Sizes of the model.

    Attributes:
        dim: ``D``, model width.
        n_layers: transformer blocks.
        n_heads: attention heads (divides ``dim``; divisible by the tp degree).
        ffn_dim: MLP hidden width (divisible by the tp degree).
        vocab_size: ``V``; 256 for bytes.
        max_seq_len: longest sequence the model accepts.
        dropout: dropout probability on the attention weights and the MLP hidden activations
            (both sharded under tensor parallelism, so each tp rank draws its own mask legally).
        norm_eps: RMSNorm epsilon.
    """

    dim: int = 64
    n_layers: int = 4
    n_heads: int = 4
    ffn_dim: int = 192
    vocab_size: int = 256
    max_seq_len: int = 256
    dropout: float = 0.1
    norm_eps: float = 1e-5

    @property
    def head_dim(self) -> int:
        """``K``: width of one attention head."""
        return self.dim // self.n_heads


#: Named sizes. Parameter counts (:func:`count_params`): tiny 0.26 M (1 MB in fp32; CPU tests),
#: small 3.7 M, base 93 M, 1b 1.24 B (GPU; about 18 bytes per parameter with Adam and mixed
#: precision before sharding, docs/architecture.md, "3D layout").
PRESETS: dict[str, LMConfig] = {
    "tiny": LMConfig(dim=64, n_layers=4, n_heads=4, ffn_dim=192, max_seq_len=256),
    "small": LMConfig(dim=256, n_layers=4, n_heads=8, ffn_dim=768, max_seq_len=512),
    "base": LMConfig(dim=768, n_layers=12, n_heads=12, ffn_dim=2304, max_seq_len=1024),
    "1b": LMConfig(dim=2048, n_layers=24, n_heads=16, ffn_dim=5632, max_seq_len=2048),
}


def preset(name: str, **overrides: Any) -> LMConfig:
    """The named preset with fields replaced.

    Raises:
        ValueError: the name is not one of :data:`PRESETS`.
    """
    if name not in PRESETS:
        raise ValueError(f"model size {name!r} is not known; choose one of {sorted(PRESETS)}")
    return replace(PRESETS[name], **overrides)


class Attention(nn.Module):
    """Causal multi-head self-attention; ``wq``/``wk``/``wv`` column-, ``wo`` row-parallel."""

    def __init__(self, config: LMConfig) -> None:
        super().__init__()
        self.head_dim = config.head_dim
        self.dropout = config.dropout
        self.wq = nn.Linear(config.dim, config.dim, bias=False)
        self.wk = nn.Linear(config.dim, config.dim, bias=False)
        self.wv = nn.Linear(config.dim, config.dim, bias=False)
        self.wo = nn.Linear(config.dim, config.dim, bias=False)

    def forward(self, x_BLD: torch.Tensor) -> torch.Tensor:
        B, L, _ = x_BLD.shape
        # -1 = the heads this rank holds: all of them, or n_heads / tp under tensor parallelism.
        q_BHLK = self.wq(x_BLD).view(B, L, -1, self.head_dim).transpose(1, 2)
        k_BHLK = self.wk(x_BLD).view(B, L, -1, self.head_dim).transpose(1, 2)
        v_BHLK = self.wv(x_BLD).view(B, L, -1, self.head_dim).transpose(1, 2)
        p = self.dropout if self.training else 0.0
        o_BHLK = F.scaled_dot_product_attention(q_BHLK, k_BHLK, v_BHLK, dropout_p=p, is_causal=True)
        return self.wo(o_BHLK.transpose(1, 2).reshape(B, L, -1))


class FeedForward(nn.Module):
    """SwiGLU MLP: ``w2(silu(w1 x) * w3 x)``; ``w1``/``w3`` column-, ``w2`` row-parallel."""

    def __init__(self, config: LMConfig) -> None:
        super().__init__()
        self.w1 = nn.Linear(config.dim, config.ffn_dim, bias=False)
        self.w3 = nn.Linear(config.dim, config.ffn_dim, bias=False)
        self.w2 = nn.Linear(config.ffn_dim, config.dim, bias=False)
        self.drop = nn.Dropout(config.dropout)

    def forward(self, x_BLD: torch.Tensor) -> torch.Tensor:
        h_BLF = self.drop(F.silu(self.w1(x_BLD)) * self.w3(x_BLD))
        return self.w2(h_BLF)


class Block(nn.Module):
    """Pre-norm transformer block: ``x + attn(norm(x))``, then ``x + mlp(norm(x))``."""

    def __init__(self, config: LMConfig) -> None:
        super().__init__()
        self.attention_norm = nn.RMSNorm(config.dim, eps=config.norm_eps)
        self.attention = Attention(config)
        self.ffn_norm = nn.RMSNorm(config.dim, eps=config.norm_eps)
        self.feed_forward = FeedForward(config)

    def forward(self, x_BLD: torch.Tensor) -> torch.Tensor:
        h_BLD = x_BLD + self.attention(self.attention_norm(x_BLD))
        return h_BLD + self.feed_forward(self.ffn_norm(h_BLD))


class Transformer(nn.Module):
    """The layers ``layer_ids`` of the model, plus the embedding and/or head if they belong here.

    ``forward`` takes token ids ``tokens_BL`` (int64) on the first stage and hidden states
    ``x_BLD`` elsewhere; it returns logits ``logits_BLV`` on the last stage and hidden states
    otherwise, which is what ``torch.distributed.pipelining`` passes between stages.

    Args:
        config: sizes.
        layer_ids: global ids of the blocks this part holds (default: all).
        first: holds the token embedding.
        last: holds the final norm and the output head.
    """

    def __init__(
        self,
        config: LMConfig,
        layer_ids: Iterable[int] | None = None,
        *,
        first: bool = True,
        last: bool = True,
    ) -> None:
        super().__init__()
        self.config = config
        ids = list(range(config.n_layers) if layer_ids is None else layer_ids)
        self.tok_embeddings = nn.Embedding(config.vocab_size, config.dim) if first else None
        # Learned absolute positions (GPT-2): simple, and no state outside the parameters.
        self.pos_embeddings = nn.Embedding(config.max_seq_len, config.dim) if first else None
        self.layers = nn.ModuleDict({str(i): Block(config) for i in ids})
        self.norm = nn.RMSNorm(config.dim, eps=config.norm_eps) if last else None
        self.output = nn.Linear(config.dim, config.vocab_size, bias=False) if last else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.tok_embeddings is not None:
            positions_L = torch.arange(x.shape[1], device=x.device)
            h = self.tok_embeddings(x) + self.pos_embeddings(positions_L)
        else:
            h = x
        for layer in self.layers.values():
            h = layer(h)
        if self.norm is not None:
            h = self.norm(h)
        return self.output(h) if self.output is not None else h

    @torch.no_grad()
    def init_weights(self, seed: int) -> None:
        """Initialise every parameter from generators keyed by ``(seed, part)``: the same values
        whatever layers this part holds. Linear and embedding weights ~ N(0, 0.02) (GPT-2), output
        projections of each block scaled by ``1/sqrt(2 * n_layers)`` (GPT-2 paper, section 2.3),
        norms to 1. Call before any parallelism is applied (the tensors must be plain)."""
        std = 0.02
        if self.tok_embeddings is not None:
            self.tok_embeddings.weight.normal_(0.0, std, generator=_generator(seed, "embed"))
            self.pos_embeddings.weight.normal_(0.0, std / 2, generator=_generator(seed, "pos"))
        for layer_id, block in self.layers.items():
            gen = _generator(seed, f"layer{layer_id}")
            for name, param in block.named_parameters():
                if name.endswith("norm.weight"):
                    param.fill_(1.0)
                elif name.endswith(("wo.weight", "w2.weight")):
                    param.normal_(0.0, std / (2 * self.config.n_layers) ** 0.5, generator=gen)
                else:
                    param.normal_(0.0, std, generator=gen)
        if self.norm is not None:
            self.norm.weight.fill_(1.0)
        if self.output is not None:
            self.output.weight.normal_(0.0, std, generator=_generator(seed, "output"))


def _generator(seed: int, part: str) -> torch.Generator:
    import zlib

    return torch.Generator().manual_seed(seed * 1_000_003 + zlib.crc32(part.encode()))


def count_params(config: LMConfig, *, embedding: bool = True) -> int:
    """Parameters of the whole model (pure arithmetic, nothing built).

    Args:
        config: sizes.
        embedding: include the token and position embedding tables (``(V + max_seq_len) x D``).
    """
    d, f, v = config.dim, config.ffn_dim, config.vocab_size
    per_block = 4 * d * d + 3 * d * f + 2 * d
    total = config.n_layers * per_block + d + v * d  # blocks, final norm, output head
    return total + ((v + config.max_seq_len) * d if embedding else 0)


def split_layers(n_layers: int, num_stages: int) -> list[range]:
    """Contiguous layer ranges, one per pipeline stage, as even as possible (earlier stages get
    the extra layer: the last stage also carries the output head).

    Raises:
        ValueError: fewer layers than stages (a stage would be empty).
    """
    if num_stages < 1 or n_layers < num_stages:
        raise ValueError(
            f"{n_layers} layers cannot be split over {num_stages} pipeline stages (each stage "
            f"needs at least one layer); lower pp or the schedule's stages per rank, or use a "
            f"model with more layers"
        )
    base, extra = divmod(n_layers, num_stages)
    ranges, start = [], 0
    for stage in range(num_stages):
        size = base + (1 if stage < extra else 0)
        ranges.append(range(start, start + size))
        start += size
    return ranges
