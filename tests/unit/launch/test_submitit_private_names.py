"""The private submitit names hpcflow.launch overrides or calls are still there, with the
signatures it was written against, and submitit still calls the overridden ones.

hpcflow/launch/slurm.py, executor.py and task.py subclass submitit's executors and reach past
its public API. A submitit release may rename or re-sign any of these without notice; then
submissions would silently bypass hpcflow's batch script or its job records. This test fails
first, naming the name, what was expected and what the installed submitit has. The pin in
pyproject.toml (`submitit>=1.5.4,<1.6`) covers the versions checked here.
"""

from __future__ import annotations

import inspect
from importlib.metadata import version

import pytest
from submitit.core import core, utils
from submitit.slurm import slurm

WHERE = ("hpcflow.launch relies on it (hpcflow/launch/slurm.py, executor.py, task.py); adapt "
         "them and the submitit pin in pyproject.toml")


def _signature(owner: type, name: str) -> str:
    attr = inspect.getattr_static(owner, name, None)
    if attr is None:
        return "<missing>"
    if isinstance(attr, property):
        return "<property>"
    func = attr.__func__ if isinstance(attr, staticmethod | classmethod) else attr
    params = inspect.signature(func).parameters
    return "(" + ", ".join(p.name + ("=" if p.default is not p.empty else "") for p in params.values()) + ")"


@pytest.mark.parametrize(("owner", "name", "expected"), [
    pytest.param(slurm.SlurmExecutor, "_internal_process_submissions", "(self, delayed_submissions)",
                 id="SlurmExecutor._internal_process_submissions"),
    pytest.param(core.Executor, "_internal_process_submissions", "(self, delayed_submissions)",
                 id="Executor._internal_process_submissions"),
    pytest.param(slurm.SlurmExecutor, "_submit_command", "(self, command)",
                 id="SlurmExecutor._submit_command"),
    pytest.param(core.PicklingExecutor, "_submitit_command_str", "<property>",
                 id="PicklingExecutor._submitit_command_str"),
    pytest.param(slurm.SlurmExecutor, "_write_job_id", "(self, job_id, uid)",
                 id="SlurmExecutor._write_job_id"),
    pytest.param(slurm.SlurmExecutor, "_make_submission_file_text", "(self, command, uid)",
                 id="SlurmExecutor._make_submission_file_text"),
    pytest.param(core.Executor, "_internal_update_parameters", "(self, kwargs)",
                 id="Executor._internal_update_parameters"),
    pytest.param(utils.JobPaths, "get_first_id_independent_folder", "(folder)",
                 id="JobPaths.get_first_id_independent_folder"),
    pytest.param(utils.JobPaths, "move_temporary_file", "(self, tmp_path, name, keep_as_symlink=)",
                 id="JobPaths.move_temporary_file"),
    pytest.param(utils.DelayedSubmission, "set_timeout", "(self, timeout_min, max_num_timeout)",
                 id="DelayedSubmission.set_timeout"),
    pytest.param(utils.DelayedSubmission, "dump", "(self, filepath)", id="DelayedSubmission.dump"),
    pytest.param(core.Job, "_get_outcome_and_result", "(self)",
                 id="Job._get_outcome_and_result"),
])
def test_private_name_has_the_signature_hpcflow_uses(owner, name, expected):
    got = _signature(owner, name)
    assert got == expected, (
        f"submitit {version('submitit')}: {owner.__qualname__}.{name} is {got}, expected {expected}; "
        f"{WHERE}")


@pytest.mark.parametrize(("caller", "callee"), [
    pytest.param(slurm.SlurmExecutor._submit_command, "_make_submission_file_text",
                 id="submit-renders-hpcflow-script"),
    pytest.param(slurm.SlurmExecutor._submit_command, "_write_job_id", id="submit-records-job"),
    pytest.param(core.PicklingExecutor._internal_process_submissions, "_submit_command",
                 id="process-submissions-submits"),
    pytest.param(core.PicklingExecutor._internal_process_submissions, "_submitit_command_str",
                 id="process-submissions-command"),
    pytest.param(core.Job.results, "_get_outcome_and_result", id="results-reads-through-check"),
    pytest.param(core.Job.exception, "_get_outcome_and_result",
                 id="exception-reads-through-check"),
])
def test_submitit_still_calls_the_names_hpcflow_overrides(caller, callee):
    """An override that submitit no longer calls is dead code: the submission would go out
    with submitit's own batch script or without hpcflow's job record."""
    assert callee in caller.__code__.co_names, (
        f"submitit {version('submitit')}: {caller.__qualname__} no longer refers to {callee}; {WHERE}")


def test_the_installed_submitit_is_within_the_tested_pin():
    major, minor, patch = (int(x) for x in version("submitit").split(".")[:3])
    assert (1, 5, 4) <= (major, minor, patch) < (1, 6, 0), (
        f"submitit {version('submitit')} is outside the tested >=1.5.4,<1.6; {WHERE}")


def test_pyproject_pins_the_tested_versions():
    import tomllib
    from pathlib import Path

    pyproject = Path(__file__).resolve().parents[3] / "pyproject.toml"
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    assert "submitit>=1.5.4,<1.6" in deps, deps
