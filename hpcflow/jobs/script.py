"""The batch script of a job spec, as ``hpcflow submit`` and ``hpcflow.launch`` submit it: the
core's renderer (:func:`hpcflow.slurm.render.render_sbatch`) with the ``network`` block's
exports, which only a service can compute (:func:`hpcflow.nccl.exports.network_exports`)."""

from __future__ import annotations

from hpcflow.errors import SpecError
from hpcflow.nccl.exports import network_exports, network_problems
from hpcflow.slurm.render import render_sbatch
from hpcflow.spec.job import JobSpec


def job_script(spec: JobSpec, *, python: str | None = None, array: str | None = None,
               allow_shared_dir: bool = False) -> str:
    """The batch script text for ``spec`` (arguments as :func:`render_sbatch`'s).

    Raises:
        SpecError: the ``network`` block asks what its instance type cannot give
            (:func:`hpcflow.nccl.exports.network_problems`: EFA required where there is none,
            more GPUs per node than the type has).
        jinja2.UndefinedError, FileNotFoundError: as :func:`render_sbatch`.
    """
    if problems := network_problems(spec):
        raise SpecError("; ".join(problems), problems)
    return render_sbatch(spec, python=python, array=array, network=network_exports(spec),
                         allow_shared_dir=allow_shared_dir)
