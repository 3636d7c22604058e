"""Values a job spec refuses because they would break the batch script's protocol or run
something other than what the user meant; each message names the field and says why."""

from __future__ import annotations

from typing import Any

import pytest

from hpcflow.errors import SpecError
from hpcflow.spec.job import JobSpec
from hpcflow.spec.loading import validate_model

MINIMAL: dict[str, Any] = {
    "name": "toy",
    "time_limit": "01:00:00",
    "run_dir": "/scratch/runs/toy",
    "program": {"argv": ["/bin/true"]},
}


def problems(**changes: Any) -> list[str]:
    with pytest.raises(SpecError) as info:
        validate_model(JobSpec, {**MINIMAL, **changes}, "job.yaml")
    return info.value.problems


# ---- environment names that hijack the protocol -----------------------------------------------


@pytest.mark.parametrize(
    ("name", "why"),
    [
        pytest.param("SLURM_JOB_ID", "set by Slurm", id="job-id-requeues-another-job"),
        pytest.param("SLURM_RESTART_COUNT", "set by Slurm", id="restart-count-defeats-bound"),
        pytest.param("SLURM_ARRAY_TASK_ID", "set by Slurm", id="array-task"),
        pytest.param("SLURM_ARRAY_JOB_ID", "set by Slurm", id="array-job"),
        pytest.param("SLURM_JOB_NODELIST", "set by Slurm", id="nodelist"),
        pytest.param("SLURM_NNODES", "set by Slurm", id="nnodes"),
        pytest.param("SLURM_JOB_SOMETHING_NEW", "set by Slurm", id="job-family"),
        pytest.param("SBATCH_MEM_BIND", "set by Slurm", id="sbatch-family"),
        pytest.param("SLURMD_NODENAME", "set by Slurm", id="slurmd"),
        pytest.param("SHELLOPTS", "read-only bash variable", id="shellopts"),
        pytest.param("UID", "read-only bash variable", id="uid"),
        pytest.param("BASHOPTS", "read-only bash variable", id="bashopts"),
        pytest.param("IFS", "bash special variable", id="ifs"),
        pytest.param("POSIXLY_CORRECT", "bash special variable", id="posix-mode"),
        pytest.param("HPCFLOW_MAX_REQUEUES", "batch script's own", id="hpcflow-upper"),
        pytest.param("hpcflow_job_id", "batch script's own", id="hpcflow-lower"),
        pytest.param("Hpcflow_Step_Pid", "batch script's own", id="hpcflow-mixed-case"),
    ],
)
def test_env_names_of_slurm_bash_and_the_script_are_refused(name: str, why: str) -> None:
    (line,) = problems(env={name: "1"})
    assert line.startswith(f"job.yaml: env.{name}: ")
    assert why in line


@pytest.mark.parametrize("name", ["SLURM_MPI_TYPE", "SLURM_CPU_BIND", "NCCL_DEBUG", "PATH",
                                  "OMP_NUM_THREADS", "HPCFLOWX"])
def test_other_env_names_are_allowed(name: str) -> None:
    job = JobSpec.model_validate({**MINIMAL, "env": {name: "x"}})
    assert job.env == {name: "x"}


# ---- program.python and argv[0] --------------------------------------------------------------


@pytest.mark.parametrize(
    ("program", "field", "why"),
    [
        pytest.param({"module": "m", "python": "--help"}, "program.python", "start with '-'",
                     id="python-option"),
        pytest.param({"module": "m", "python": "-c"}, "program.python", "start with '-'",
                     id="python-short-option"),
        pytest.param({"module": "m", "python": "venv/bin/python"}, "program.python",
                     "absolute path or a command name", id="python-relative"),
        pytest.param({"module": "m", "python": "./python"}, "program.python",
                     "absolute path or a command name", id="python-dot-relative"),
        pytest.param({"argv": ["--help"]}, "program.argv", "start with '-'", id="argv-option"),
        pytest.param({"argv": ["bin/train", "x"]}, "program.argv", "absolute path",
                     id="argv-relative"),
        pytest.param({"argv": ["../train"]}, "program.argv", "absolute path", id="argv-dotdot"),
    ],
)
def test_program_must_be_an_absolute_path_or_a_command_name(program: dict[str, Any], field: str,
                                                           why: str) -> None:
    (line,) = problems(program=program)
    assert line.startswith(f"job.yaml: {field}: ") and why in line


@pytest.mark.parametrize("program", [
    {"module": "m", "python": "python3"},
    {"module": "m", "python": "/opt/venv/bin/python"},
    {"argv": ["torchrun-like", "--x"]},
    {"argv": ["/opt/bin/train", "-v"]},
])
def test_absolute_paths_and_command_names_are_accepted(program: dict[str, Any]) -> None:
    assert JobSpec.model_validate({**MINIMAL, "program": program}).program.model_dump(
        exclude_none=True, exclude_defaults=True) == program


@pytest.mark.parametrize("program", [
    {"argv": ["./train.sh", "--x"], "workdir": "/work/proj"},
    {"module": "m", "python": ".venv/bin/python", "workdir": "/work/proj"},
])
def test_a_relative_program_path_is_allowed_where_workdir_says_where_it_is(
        program: dict[str, Any]) -> None:
    job = JobSpec.model_validate({**MINIMAL, "program": program})
    assert str(job.program.workdir) == "/work/proj"
    without = {k: v for k, v in program.items() if k != "workdir"}
    (line,) = problems(program=without)
    assert "set program.workdir" in line
