"""hpcflow: preemption-safe 3D-parallel training on Slurm and AWS ParallelCluster."""

__version__ = "0.1.0"
