"""One rank per GPU: tasks_per_node follows gpus_per_node, and a mismatch is refused for srun
and torchrun alike."""

from __future__ import annotations

from typing import Any

import pytest
from batch_script import step_command

from hpcflow.errors import SpecError
from hpcflow.slurm.render import render_sbatch, srun_options
from hpcflow.spec.job import JobSpec
from hpcflow.spec.loading import validate_model

MINIMAL: dict[str, Any] = {
    "name": "toy",
    "time_limit": "01:00:00",
    "run_dir": "/scratch/runs/toy",
    "program": {"module": "pkg.train"},
}


@pytest.mark.parametrize("launcher", ["srun", "torchrun"])
def test_tasks_per_node_defaults_to_the_gpu_count(launcher: str) -> None:
    job = JobSpec.model_validate({**MINIMAL, "gpus_per_node": 8, "nodes": 2, "launcher": launcher})
    assert job.tasks_per_node == 8 and job.ntasks == 16
    script = render_sbatch(job, python="/usr/bin/python3")
    assert "#SBATCH --ntasks-per-node=8\n" in script and "#SBATCH --gpus-per-node=8\n" in script
    if launcher == "srun":
        assert "--ntasks=16" in srun_options(job)
    else:
        assert "--ntasks=2" in srun_options(job)
        assert "--nproc-per-node=8" in step_command(script)


def test_without_gpus_the_default_stays_one_rank_per_node() -> None:
    assert JobSpec.model_validate(MINIMAL).tasks_per_node == 1


@pytest.mark.parametrize("launcher", ["srun", "torchrun"])
@pytest.mark.parametrize("tasks", [1, 4, 16])
def test_a_rank_count_that_does_not_match_the_gpus_is_refused(launcher: str, tasks: int) -> None:
    data = {**MINIMAL, "gpus_per_node": 8, "tasks_per_node": tasks, "launcher": launcher}
    with pytest.raises(SpecError) as info:
        validate_model(JobSpec, data, "job.yaml")
    (line,) = info.value.problems
    assert line.startswith(f"job.yaml: tasks_per_node: {tasks}: must equal gpus_per_node (8)")
    assert ("--nproc-per-node" in line) == (launcher == "torchrun")


def test_an_explicit_matching_count_is_accepted() -> None:
    job = JobSpec.model_validate({**MINIMAL, "gpus_per_node": 4, "tasks_per_node": 4})
    assert job.tasks_per_node == 4


def test_a_bad_gpu_count_is_reported_on_gpus_per_node_only() -> None:
    with pytest.raises(SpecError) as info:
        validate_model(JobSpec, {**MINIMAL, "gpus_per_node": "8"}, "job.yaml")
    assert [line.split(": ")[1] for line in info.value.problems] == ["gpus_per_node"]
