"""Executor parameters -> job spec: the spec's names, submitit's names, and refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcflow.errors import SpecError
from hpcflow.launch.params import build_spec, default_name, fields_of_spec, normalize
from hpcflow.spec.job import JobSpec


@pytest.mark.parametrize(("given", "expected"), [
    pytest.param({"timeout_min": 90}, {"time_limit": "01:30:00"}, id="timeout_min"),
    pytest.param({"slurm_partition": "debug", "slurm_account": "a1"},
                 {"partition": "debug", "account": "a1"}, id="slurm-prefixed"),
    pytest.param({"nodes": 2, "tasks_per_node": 4, "preemption": {"signal": "USR2"}},
                 {"nodes": 2, "tasks_per_node": 4, "preemption": {"signal": "USR2"}},
                 id="spec-names"),
    pytest.param({"name": None}, {}, id="none-is-unset"),
])
def test_submitit_and_spec_names_map_to_spec_fields(given, expected):
    assert normalize(given) == (expected, None)


def test_array_parallelism_is_kept_apart():
    assert normalize({"slurm_array_parallelism": 2}) == ({}, 2)
    with pytest.raises(SpecError, match="slurm_array_parallelism: 0 is not allowed"):
        normalize({"slurm_array_parallelism": 0})


def test_unknown_parameter_is_refused_with_the_allowed_names():
    with pytest.raises(SpecError) as info:
        normalize({"mem_gb": 4, "nodes": 1})
    assert "'mem_gb' not allowed" in str(info.value)
    assert "tasks_per_node" in str(info.value) and "timeout_min" in str(info.value)


def test_spec_carries_the_payload_runner_and_its_environment(tmp_path):
    spec = build_spec({"name": "f", "nodes": 2, "env": {"A": "user"}}, run_dir=tmp_path / "r",
                      argv=["py", "-m", "submitit.core._submit", "/x"],
                      env={"SUBMITIT_EXECUTOR": "slurm", "A": "ours"})
    assert spec.program.argv == ["py", "-m", "submitit.core._submit", "/x"]
    assert spec.env == {"SUBMITIT_EXECUTOR": "slurm", "A": "user"}
    assert spec.checkpoint.dir == tmp_path / "r" / "checkpoints"
    assert spec.time_limit == "00:05:00" and spec.preemption.requeue


def test_bad_value_names_the_field(tmp_path):
    with pytest.raises(SpecError, match="tasks_per_node"):
        build_spec({"name": "f", "tasks_per_node": 0}, run_dir=tmp_path, argv=["x"], env={})


@pytest.mark.parametrize(("limit", "lead"), [
    pytest.param("00:01:00", 0, id="1-min-runs-without-a-warning"),
    pytest.param("00:02:00", 0, id="2-min-runs-without-a-warning"),
    pytest.param("00:10:00", 120, id="default-fits"),
])
def test_short_time_limit_runs_without_a_warning(tmp_path, limit, lead):
    spec = build_spec({"name": "f", "time_limit": limit}, run_dir=tmp_path, argv=["x"], env={})
    assert spec.preemption.signal_lead_s == lead


def test_explicit_lead_is_never_changed(tmp_path):
    with pytest.raises(SpecError, match="preemption.signal_lead_s: 120: must be less than"):
        build_spec({"name": "f", "time_limit": "00:02:00", "preemption": {"signal_lead_s": 120}},
                   run_dir=tmp_path, argv=["x"], env={})


def test_fields_of_a_loaded_spec_drop_program_and_keep_checkpoints_relative():
    spec = JobSpec.model_validate({"name": "j", "time_limit": "10", "run_dir": "/r",
                                   "program": {"module": "m"}, "nodes": 2})
    fields = fields_of_spec(spec)
    assert "program" not in fields and "run_dir" not in fields
    assert fields["checkpoint"]["dir"] == "checkpoints" and fields["nodes"] == 2
    again = build_spec(fields, run_dir=Path("/other"), argv=["x"], env={})
    assert again.checkpoint.dir == Path("/other/checkpoints")


@pytest.mark.parametrize(("fn", "name"), [
    pytest.param(len, "len", id="builtin"),
    pytest.param(lambda: 0, "lambda", id="lambda"),
    pytest.param(object(), "object", id="instance"),
])
def test_default_name_is_a_valid_job_name(fn, name):
    assert default_name(fn) == name
