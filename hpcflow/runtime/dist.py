"""Start and stop ``torch.distributed`` from a :class:`~hpcflow.runtime.env.DistEnv`.

Backend: NCCL when CUDA is available, gloo otherwise (docs/architecture.md, "3D layout").
Rendezvous is ``env://``: ``MASTER_ADDR`` and ``MASTER_PORT`` are exported from the
:class:`DistEnv` before ``init_process_group`` reads them (torch.distributed docs, "Environment
variable initialization"); a single process uses an in-memory store instead.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from hpcflow.runtime.env import DistEnv

#: Collective timeout: a rank that waits longer for its peers fails instead of hanging the job.
DEFAULT_TIMEOUT_S = 600.0


def init_distributed(env: DistEnv, timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
    """Join the job's process group (collective: every rank must call it).

    On a GPU node the CUDA device is set to ``env.local_rank`` first, so NCCL binds each rank to
    its own GPU. Costs one TCP rendezvous with rank 0's store; a single process (world size 1)
    uses an in-memory store (``torch.distributed.HashStore``) and binds no port.

    Args:
        env: this process's place in the job.
        timeout_s: seconds a collective (and the rendezvous) may wait for the other ranks.

    Returns:
        The backend name, ``"nccl"`` or ``"gloo"``.

    Raises:
        RuntimeError: the local rank has no GPU, or the rendezvous failed or timed out (torch's
            message, prefixed with the address tried).
    """
    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        return str(dist.get_backend())
    backend = "gloo"
    extra: dict[str, Any] = {}
    if torch.cuda.is_available():
        count = torch.cuda.device_count()
        if env.local_rank >= count:
            raise RuntimeError(
                f"local rank {env.local_rank} has no GPU: this node shows {count} "
                f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r})"
            )
        torch.cuda.set_device(env.local_rank)
        backend = "nccl"
        # Binds the communicator to this GPU at once, so barriers need not guess the device
        # (torch.distributed.init_process_group, ``device_id``, torch >= 2.3).
        extra["device_id"] = torch.device("cuda", env.local_rank)
    os.environ["MASTER_ADDR"] = env.master_addr
    os.environ["MASTER_PORT"] = str(env.master_port)
    if env.world_size == 1:
        # A single process has no one to meet: an in-memory store instead of a TCP one, so no
        # port is bound and none can be taken by another process between picking and binding.
        extra["store"] = dist.HashStore()
    else:
        extra["init_method"] = "env://"
    try:
        dist.init_process_group(
            backend=backend,
            rank=env.rank,
            world_size=env.world_size,
            timeout=timedelta(seconds=timeout_s),
            **extra,
        )
    except Exception as exc:  # torch raises several types (DistStoreError, RuntimeError)
        raise RuntimeError(
            f"rank {env.rank}/{env.world_size}: joining the process group at "
            f"{env.master_addr}:{env.master_port} ({backend}) failed: {exc}"
        ) from exc
    return backend


def default_backend() -> str:
    """``"nccl"`` where CUDA is available, else ``"gloo"``: the backend :func:`init_distributed`
    would choose, for a framework that makes its own process group (Lightning)."""
    import torch

    return "nccl" if torch.cuda.is_available() else "gloo"


def shutdown() -> None:
    """Leave the process group if one is active (safe to call twice)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def is_distributed() -> bool:
    """True when a default process group is active."""
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized()


def get_rank() -> int:
    """Global rank, or 0 without a process group."""
    import torch.distributed as dist

    return dist.get_rank() if is_distributed() else 0


def get_world_size() -> int:
    """World size, or 1 without a process group."""
    import torch.distributed as dist

    return dist.get_world_size() if is_distributed() else 1


def barrier() -> None:
    """Wait for every rank (no-op without a process group)."""
    import torch.distributed as dist

    if is_distributed():
        dist.barrier()


def broadcast_object(obj: Any, src: int = 0) -> Any:
    """Rank ``src``'s ``obj`` on every rank (collective; pickles, so keep it small)."""
    import torch.distributed as dist

    if not is_distributed():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=src)
    return box[0]


def collective_device() -> Any:
    """Device for small collective tensors: the current GPU under NCCL, else the CPU."""
    import torch
    import torch.distributed as dist

    if is_distributed() and dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")
