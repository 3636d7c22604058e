"""Slurm hostlist expressions: :mod:`hpcflow.hostlist` (the core module), named here too for
the callers that talk to Slurm from outside a job."""

from hpcflow.hostlist import collect_hostlist, expand_hostlist, first_host

__all__ = ["collect_hostlist", "expand_hostlist", "first_host"]
