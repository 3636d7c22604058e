"""Digests of the full model parameters and optimizer state that do not depend on the layout.

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
    return {name: _value_digest(name, param) for name, param in model.named_parameters()}


def params_sha256(model: Any) -> str:
    """sha256 over the full parameters of the whole model, across every rank (collective).

    Cost: one all-gather per sharded parameter and one ``all_gather_object`` of the name table.

    Raises:
        RuntimeError: two ranks hold different values under one parameter name (replicas that
            diverged: a parallelism bug).
    """
    return merged_sha256(param_digests(model))


def optimizer_sha256(model: Any, optimizer: Any) -> str:
    """sha256 over the full optimizer state (Adam moments, step counts, param-group settings),
    keyed by parameter name as in the checkpoint, across every rank (collective).

    Raises:
        RuntimeError: two ranks hold different values under one key.
    """
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    state = get_optimizer_state_dict(
        model, optimizer, options=StateDictOptions(flatten_optimizer_state_dict=True)
    )
    return merged_sha256({key: _value_digest(key, state[key]) for key in sorted(state)})


def merged_sha256(local: dict[str, str]) -> str:
    """Merge every rank's ``{name: digest}`` table and hash it in name order (collective).

    Raises:
        RuntimeError: two ranks report different digests for one name.
    """
    import torch.distributed as dist

    tables = [local]
    if dist.is_available() and dist.is_initialized():
        tables = [{} for _ in range(dist.get_world_size())]
        dist.all_gather_object(tables, local)
    merged: dict[str, str] = {}
    for rank, table in enumerate(tables):
        for name, value in table.items():
            if merged.setdefault(name, value) != value:
                raise RuntimeError(f"{name!r} differs between replicas (rank {rank})")
    total = hashlib.sha256()
    for name in sorted(merged):
        total.update(f"{name}={merged[name]}\n".encode())
    return total.hexdigest()


def _value_digest(name: str, value: Any) -> str:
    import torch
    from torch.distributed.tensor import DTensor

    if not isinstance(value, torch.Tensor):
        return hashlib.sha256(f"{name}|{value!r}".encode()).hexdigest()
    full = value.full_tensor() if isinstance(value, DTensor) else value
    full = full.detach().cpu().contiguous()
    digest = hashlib.sha256(f"{name}|{full.dtype}|{tuple(full.shape)}|".encode())
    digest.update(full.reshape(-1).view(dtype=_bytes_dtype()).numpy().tobytes())
    return digest.hexdigest()


def _bytes_dtype() -> Any:
    import torch

    return torch.uint8
