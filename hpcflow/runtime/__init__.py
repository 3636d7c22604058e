"""Code that runs inside a Slurm job on every rank (docs/architecture.md, docs/protocol.md).

The public API for your own training loop is :class:`~hpcflow.runtime.run.Run`
(docs/your-training-loop.md): ``with Run.from_env() as run: step = run.restore(state); ...;
run.step_done(step, state, metrics)``.

Modules, one job each:

- :mod:`~hpcflow.runtime.run`: ``Run``, the public API: join, restore, step boundary, leave
- :mod:`~hpcflow.runtime.appstate`: a loop's mapping of objects as one DCP ``Stateful``
- :mod:`~hpcflow.runtime.hf`, :mod:`~hpcflow.runtime.lightning`: thin adapters for the Hugging
  Face Trainer and Lightning (optional extras ``hf``, ``lightning``)
- :mod:`~hpcflow.runtime.env`: ``DistEnv`` from Slurm / torchrun variables (pure, no torch)
- :mod:`~hpcflow.runtime.runconfig`: the ``HPCFLOW_*`` settings (names in :mod:`hpcflow.protocol`)
- :mod:`~hpcflow.runtime.dist`: join and leave the process group
- :mod:`~hpcflow.runtime.preemption`: the warning signal + flag file, agreed across ranks
- :mod:`~hpcflow.runtime.commit`: checkpoint directory layout and commit records (no torch)
- :mod:`~hpcflow.runtime.checkpoint`: ``CheckpointManager``: DCP save, commit, prune, load
- :mod:`~hpcflow.runtime.rng`, :mod:`~hpcflow.runtime.sampler`: what an exact resume needs
- :mod:`~hpcflow.runtime.parallel_dims`: ``ParallelDims``: pp x dp x tp checked, the mesh built once
- :mod:`~hpcflow.runtime.digest`: a layout-independent digest of parameters and optimizer state
- :mod:`~hpcflow.runtime.lines`: the tagged lines rank 0 prints
- :mod:`~hpcflow.runtime.standby`: a warm standby rank (``resilience.warm_standby``): imports
  ahead, then runs the program when the supervisor hands it an in-job restart

The example workloads that use this library live apart, in :mod:`hpcflow.examples`.

The names below are imported on first use, so ``import hpcflow.runtime`` never imports torch.
This package never imports ``hpcflow.cli``, ``hpcflow.slurm`` or ``hpcflow.jobs``.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Run": "hpcflow.runtime.run",
    "Preempted": "hpcflow.runtime.run",
    "PerRank": "hpcflow.runtime.appstate",
    "params_sha256": "hpcflow.runtime.digest",
    "optimizer_sha256": "hpcflow.runtime.digest",
    "DistEnv": "hpcflow.runtime.env",
    "dist_env_from": "hpcflow.runtime.env",
    "init_distributed": "hpcflow.runtime.dist",
    "shutdown": "hpcflow.runtime.dist",
    "PreemptionMonitor": "hpcflow.runtime.preemption",
    "CheckpointManager": "hpcflow.runtime.checkpoint",
    "ResumableSampler": "hpcflow.runtime.sampler",
    "ParallelDims": "hpcflow.runtime.parallel_dims",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'hpcflow.runtime' has no attribute {name!r}")
