"""Model shapes for the memory planner, and presets with public shapes. Pure.

Llama 3 shapes: Dubey et al., "The Llama 3 Herd of Models" (arXiv:2407.21783), table 3 (layers,
model dimension, FFN dimension, attention and key/value heads; vocabulary 128K, whose exact size
128,256 is ``vocab_size`` in the released ``config.json`` files) and section 3.4 (pre-training
sequence length 8,192). The parameter counts below follow from those shapes (untied input and
output embeddings, SwiGLU MLP, grouped-query attention, two RMSNorms per layer) and match the
published sizes: 8.03B, 70.6B and 405.9B.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelShape:
    """What memory depends on.

    Attributes:
        name: a label.
        params: total parameters.
        layers: transformer layers (blocks).
        hidden: hidden size ``h``.
        heads: attention heads ``a``.
        seq_len: tokens per sequence ``s``.
        micro_batch: sequences per micro-batch ``b``.
        source: where the shape comes from (empty for a model given by hand).
    """

    name: str
    params: int
    layers: int
    hidden: int
    heads: int
    seq_len: int
    micro_batch: int = 1
    source: str = ""

    def problems(self) -> list[str]:
        """One line per invalid field (empty when all are valid)."""
        out = []
        for name in ("params", "layers", "hidden", "heads", "seq_len", "micro_batch"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                out.append(f"{name}: {value!r} is not allowed; give a whole number >= 1")
        if not out and self.hidden % self.heads:
            out.append(f"heads: {self.heads} does not divide hidden={self.hidden}; the head size "
                       "hidden / heads must be a whole number")
        return out


def llama_params(layers: int, hidden: int, ffn: int, heads: int, kv_heads: int,
                 vocab: int) -> int:
    """Parameters of a Llama-style decoder: embeddings and output head untied, per layer
    ``q, o: h x h``, ``k, v: h x (kv_heads * h / heads)``, SwiGLU ``3 x h x ffn``, two norms."""
    kv = kv_heads * hidden // heads
    per_layer = 2 * hidden * hidden + 2 * hidden * kv + 3 * hidden * ffn + 2 * hidden
    return 2 * vocab * hidden + layers * per_layer + hidden


_LLAMA3 = "Llama 3 (arXiv:2407.21783, table 3; vocabulary 128,256; sequence 8,192)"
#: name -> shape. Shapes: layers, hidden, FFN, heads, key/value heads from table 3.
PRESETS: dict[str, ModelShape] = {
    "llama-8b": ModelShape("llama-8b", llama_params(32, 4096, 14336, 32, 8, 128256), 32, 4096,
                           32, 8192, 1, _LLAMA3),
    "llama-70b": ModelShape("llama-70b", llama_params(80, 8192, 28672, 64, 8, 128256), 80, 8192,
                            64, 8192, 1, _LLAMA3),
    "llama-405b": ModelShape("llama-405b", llama_params(126, 16384, 53248, 128, 8, 128256), 126,
                             16384, 128, 8192, 1, _LLAMA3),
}
