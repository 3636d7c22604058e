"""Submit Python functions to Slurm with submitit's API and hpcflow's preemption protocol.

One protocol, two front doors. A Python submission runs the same batch script as ``hpcflow
submit``: :class:`Executor` subclasses submitit's own Slurm executor and replaces only the text
of its batch script, which is rendered from hpcflow's template (``sbatch_templates/
train.sbatch.j2``) with submitit's payload runner (``python -u -m submitit.core._submit
<folder>``) as the program of every rank. Why this way rather than rendering hpcflow's template
around submitit's script by hand: submitit keeps what it does well (pickling the call,
``sbatch``, job ids, arrays, result pickles, ``Job``), while the trap, the flag file, the commit
check and the requeue exist in one place only, the template; nothing of the protocol is
rewritten in Python. Inside the task, :class:`~hpcflow.launch.task.TaskCall` replaces the signal
handlers submitit installs (rank 0 checkpointing and requeueing from a signal handler), so the
batch shell alone decides to requeue: a function that uses :class:`hpcflow.runtime.Run` saves
on every rank and is requeued after the commit; one that does not is never killed by the
warning signal and is stopped and requeued shortly before its deadline, like any program.

Used like submitit (``import hpcflow.launch as submitit`` runs submitit's README examples)::

    from hpcflow.launch import Executor

    executor = Executor(folder="runs/py", nodes=2, tasks_per_node=2, time_limit="00:20:00")
    job = executor.submit(train, cfg)     # def train(cfg) -> result, using hpcflow.runtime.Run
    print(job.job_id, job.state)
    result = job.result()                 # rank 0's return value, after any requeues

Public names are loaded lazily: ``import hpcflow.launch`` imports neither submitit nor torch;
``dir(hpcflow.launch)`` (tab completion, ``help()``) lists them all the same.
"""

from __future__ import annotations

from typing import Any

__all__ = ["AutoExecutor", "Executor", "HpcflowJob", "Job", "JobEnvironment", "helpers"]


def __getattr__(name: str) -> Any:
    if name in ("Executor", "AutoExecutor"):
        from hpcflow.launch.executor import Executor

        return Executor
    if name in ("HpcflowJob", "Job"):
        from hpcflow.launch.slurm import HpcflowJob

        return HpcflowJob
    if name == "helpers":
        import submitit.helpers

        return submitit.helpers
    if name == "JobEnvironment":
        from submitit import JobEnvironment

        return JobEnvironment
    raise AttributeError(f"module 'hpcflow.launch' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The module's names with the lazy public ones (PEP 562), without importing them."""
    return sorted({*globals(), *__all__})
