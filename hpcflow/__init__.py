"""hpcflow: preemption-safe 3D-parallel training on Slurm and AWS ParallelCluster."""

from typing import Any

__version__ = "0.1.0"

#: Names re-exported from hpcflow.launch, loaded on first use (submitit is not imported by
#: ``import hpcflow`` or the CLI).
_LAUNCH_NAMES = ("Executor", "AutoExecutor")


def __getattr__(name: str) -> Any:
    if name in _LAUNCH_NAMES:
        import hpcflow.launch

        return getattr(hpcflow.launch, name)
    raise AttributeError(f"module 'hpcflow' has no attribute {name!r}")
