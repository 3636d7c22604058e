"""A digest of the full model parameters that does not depend on the parallel layout.

Each rank gathers the full value of every parameter it holds (``DTensor.full_tensor()``: an
all-gather over the tensor's own mesh, so the ranks of one pipeline stage, which hold the same
parameters in the same order, call it together) and hashes each one on its own. The per-name
digests of all ranks are then exchanged and merged; a parameter held by several ranks (tp or dp
replicas, the same pipeline stage) has the same digest everywhere. The final digest hashes the
sorted ``name -> digest`` table, so any layout of the same weights gives the same value.
"""

from __future__ import annotations

import hashlib
from typing import Any


def param_digests(model: Any) -> dict[str, str]:
    """``{name: sha256(name | dtype | shape | bytes)}`` of the full value of every parameter of
    ``model`` (collective within each parameter's mesh)."""
    from torch.distributed.tensor import DTensor

    digests = {}
    for name, param in model.named_parameters():
        full = param.full_tensor() if isinstance(param, DTensor) else param
        full = full.detach().cpu().contiguous()
        digest = hashlib.sha256(f"{name}|{full.dtype}|{tuple(full.shape)}|".encode())
        digest.update(full.view(-1).view(dtype=_bytes_dtype()).numpy().tobytes())
        digests[name] = digest.hexdigest()
    return digests


def params_sha256(model: Any) -> str:
    """sha256 over the full parameters of the whole model, across every rank (collective).

    Cost: one all-gather per sharded parameter and one ``all_gather_object`` of the name table.

    Raises:
        RuntimeError: two ranks hold different values under one parameter name (replicas that
            diverged: a parallelism bug).
    """
    import torch.distributed as dist

    local = param_digests(model)
    tables = [local]
    if dist.is_available() and dist.is_initialized():
        tables = [{} for _ in range(dist.get_world_size())]
        dist.all_gather_object(tables, local)
    merged: dict[str, str] = {}
    for rank, table in enumerate(tables):
        for name, value in table.items():
            if merged.setdefault(name, value) != value:
                raise RuntimeError(f"parameter {name!r} differs between replicas (rank {rank})")
    total = hashlib.sha256()
    for name in sorted(merged):
        total.update(f"{name}={merged[name]}\n".encode())
    return total.hexdigest()


def _bytes_dtype() -> Any:
    import torch

    return torch.uint8
