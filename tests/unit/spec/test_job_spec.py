"""JobSpec: valid specs, one clear error per bad value, --set overrides, YAML literal scalars."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from hpcflow.errors import SpecError
from hpcflow.spec.job import (
    MIN_SIGNAL_LEAD_S,
    JobSpec,
    format_time_limit,
    load_job_spec,
    parse_time_limit,
)
from hpcflow.spec.loading import validate_model

MINIMAL: dict[str, Any] = {
    "name": "toy",
    "time_limit": "01:00:00",
    "run_dir": "/scratch/runs/toy",
    "program": {"module": "hpcflow.examples.train", "args": ["--steps", "100"]},
}


def spec(**changes: Any) -> JobSpec:
    return JobSpec.model_validate({**MINIMAL, **changes})


def problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as info:
        validate_model(JobSpec, data, "job.yaml")
    return info.value.problems


def write(tmp_path: Path, text: str, name: str = "job.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


# ---- time limits -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds", "normal"),
    [
        pytest.param("30", 1800, "00:30:00", id="minutes"),
        pytest.param(90, 5400, "01:30:00", id="int-minutes"),
        pytest.param("90:30", 5430, "01:30:30", id="minutes-seconds"),
        pytest.param("02:00:00", 7200, "02:00:00", id="hh-mm-ss"),
        pytest.param("48:00:00", 172800, "2-00:00:00", id="hours-over-a-day"),
        pytest.param("1-12", 129600, "1-12:00:00", id="days-hours"),
        pytest.param("1-02:03", 93780, "1-02:03:00", id="days-hours-minutes"),
        pytest.param("1-02:03:04", 93784, "1-02:03:04", id="days-hms"),
        pytest.param(" 10 ", 600, "00:10:00", id="spaces-trimmed"),
    ],
)
def test_time_limit_forms_parse_and_normalise(text: str | int, seconds: int, normal: str) -> None:
    assert parse_time_limit(text) == seconds
    assert format_time_limit(seconds) == normal
    job = spec(time_limit=text)
    assert job.time_limit == normal
    assert job.time_limit_s == seconds


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("0", id="zero-means-unlimited"),
        pytest.param("INFINITE", id="infinite"),
        pytest.param("UNLIMITED", id="unlimited"),
        pytest.param("1:60", id="seconds-60"),
        pytest.param("1:61:00", id="minutes-61"),
        pytest.param("1-24", id="hours-24-after-days"),
        pytest.param("1:2:3:4", id="four-fields"),
        pytest.param("-5", id="negative"),
        pytest.param("1h", id="unit-suffix"),
        pytest.param("", id="empty"),
        pytest.param(True, id="bool"),
    ],
)
def test_bad_time_limit_is_refused_naming_the_forms(text: Any) -> None:
    (line,) = problems({**MINIMAL, "time_limit": text})
    assert line.startswith("job.yaml: time_limit: ")
    assert repr(text) in line
    assert "HH:MM:SS" in line or "more than zero" in line


# ---- valid specs -------------------------------------------------------------------------------


def test_minimal_spec_has_documented_defaults() -> None:
    job = spec()
    assert (job.nodes, job.tasks_per_node, job.gpus_per_node, job.cpus_per_task) == (1, 1, 0, 1)
    assert job.launcher == "srun"
    assert job.preemption.signal_lead_s == 120
    assert job.preemption.max_requeues == 3
    assert job.checkpoint.keep == 3
    assert job.checkpoint.interval_steps == 0
    assert job.checkpoint_dir == Path("/scratch/runs/toy/checkpoints")
    assert job.container is None and job.partition is None and job.account is None


def test_full_spec_round_trips_through_model_dump() -> None:
    job = spec(
        nodes=2,
        tasks_per_node=8,
        gpus_per_node=8,
        cpus_per_task=12,
        partition="gpu,gpu-spot",
        account="proj-1",
        env={"NCCL_DEBUG": "INFO", "ODD": "a b\n$(c) `d` 'e' \"f\""},
        launcher="torchrun",
        container={"image": "nvcr.io#nvidia/pytorch:24.05-py3", "mounts": ["/fsx:/fsx:ro"]},
        preemption={"signal_lead_s": 300, "max_requeues": 0},
        checkpoint={"dir": "ckpt", "keep": 1, "interval_steps": 500},
    )
    assert job.ntasks == 16
    assert job.checkpoint_dir == Path("/scratch/runs/toy/ckpt")
    again = JobSpec.model_validate(job.model_dump())
    assert again == job
    assert JobSpec.model_validate(job.model_dump(mode="json")) == job


def test_argv_program_and_numbers_as_text() -> None:
    job = spec(program={"argv": ["/opt/train", "--lr", 1e-3, 10]}, env={"OMP_NUM_THREADS": 4})
    assert job.program.argv == ["/opt/train", "--lr", "0.001", "10"]
    assert job.env == {"OMP_NUM_THREADS": "4"}


def test_run_dir_with_shell_characters_is_allowed_and_normalised() -> None:
    job = spec(run_dir="/runs/it's $(me) `x`/./a/../b")
    assert job.run_dir == Path("/runs/it's $(me) `x`/b")


def test_model_is_frozen() -> None:
    job = spec()
    with pytest.raises(ValueError, match="frozen"):
        job.nodes = 3  # type: ignore[misc]


def test_every_field_has_a_description() -> None:
    from hpcflow.spec import job as job_module

    models = [JobSpec, job_module.ProgramSpec, job_module.ContainerSpec]
    models += [job_module.PreemptionSpec, job_module.CheckpointSpec]
    for model in models:
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no description"
            assert "\n" not in field.description.strip(), f"{model.__name__}.{name}: one line"


# ---- bad values: each names the field path, the value and what is allowed ----------------------


@pytest.mark.parametrize(
    ("changes", "path", "allowed"),
    [
        pytest.param({"name": "my job"}, "name", "[A-Za-z0-9._-]", id="name-space"),
        pytest.param({"name": "x" * 65}, "name", "1-64", id="name-too-long"),
        pytest.param({"name": ""}, "name", "1-64", id="name-empty"),
        pytest.param({"name": "a/b"}, "name", "[A-Za-z0-9._-]", id="name-slash"),
        pytest.param({"nodes": 0}, "nodes", "greater than or equal to 1", id="nodes-zero"),
        pytest.param({"nodes": "2"}, "nodes", "valid integer", id="nodes-string"),
        pytest.param({"nodes": True}, "nodes", "a whole number from 1 to 100,000 is expected, not true",
                     id="nodes-bool"),
        pytest.param({"tasks_per_node": 0}, "tasks_per_node", "greater than or equal to 1", id="tasks-zero"),
        pytest.param({"gpus_per_node": -1}, "gpus_per_node", "0", id="gpus-negative"),
        pytest.param({"cpus_per_task": 0}, "cpus_per_task", "1", id="cpus-zero"),
        pytest.param({"partition": "gpu q"}, "partition", "[A-Za-z0-9._-]", id="partition"),
        pytest.param({"account": "a,b"}, "account", "[A-Za-z0-9._-]", id="account-comma"),
        pytest.param({"run_dir": 'r"d'}, "run_dir", "double quote", id="run-dir-quote"),
        pytest.param({"run_dir": "/r/%j"}, "run_dir", "'%'", id="run-dir-percent"),
        pytest.param({"run_dir": "/r\\d"}, "run_dir", "backslash", id="run-dir-backslash"),
        pytest.param({"run_dir": "/r\nd"}, "run_dir", "newline", id="run-dir-newline"),
        pytest.param({"run_dir": "rel"}, "run_dir", "absolute", id="run-dir-relative"),
        pytest.param({"launcher": "mpirun"}, "launcher", "'srun' or 'torchrun'", id="launcher"),
        pytest.param({"env": {"1X": "v"}}, "env.1X", "[A-Za-z_][A-Za-z0-9_]*", id="env-digit"),
        pytest.param({"env": {"A-B": "v"}}, "env.A-B", "[A-Za-z_]", id="env-dash"),
        pytest.param({"env": {"HPCFLOW_RUN_DIR": "/x"}}, "env.HPCFLOW_RUN_DIR", "batch script's own",
                     id="env-reserved"),
        pytest.param({"env": {"X": True}}, "env.X", "quote it", id="env-bool"),
        pytest.param({"env": {"X": "a\x00b"}}, "env.X", "NUL", id="env-nul"),
        pytest.param({"env": ["X=1"]}, "env", "dictionary", id="env-list"),
        pytest.param({"program": {"module": "a-b"}}, "program.module", "dotted", id="module-name"),
        pytest.param({"program": {"module": "a", "argv": ["b"]}}, "program.module",
                     "exactly one", id="module-and-argv"),
        pytest.param({"program": {}}, "program.module", "exactly one", id="neither"),
        pytest.param({"program": {"argv": []}}, "program.argv", "non-empty", id="argv-empty"),
        pytest.param({"program": {"argv": ["--x"]}}, "program.argv", "first item", id="argv-dash"),
        pytest.param({"program": {"argv": ["x"], "args": ["y"]}}, "program.args", "with module",
                     id="args-with-argv"),
        pytest.param({"program": {"module": "m", "args": [None]}}, "program.args[0]",
                     "valid string", id="args-null"),
        pytest.param({"program": {"module": "m", "python": ""}}, "program.python", "non-empty",
                     id="python-empty"),
        pytest.param({"container": {"image": "a b"}}, "container.image", "without spaces",
                     id="image-space"),
        pytest.param({"container": {"image": "i", "mounts": ["/a"]}}, "container.mounts",
                     "SRC:DST", id="mount-no-dst"),
        pytest.param({"container": {"image": "i", "mounts": ["a:/b"]}}, "container.mounts",
                     "absolute", id="mount-relative"),
        pytest.param({"container": {"image": "i", "mounts": ["/a:/b:rx"]}}, "container.mounts",
                     "ro|rw", id="mount-flag"),
        pytest.param({"container": {"image": "i", "mounts": ["/a,/c:/b"]}}, "container.mounts",
                     "commas", id="mount-comma"),
        pytest.param({"preemption": {"signal_lead_s": 30}}, "preemption.signal_lead_s",
                     "60 s off its mark", id="lead-below-jitter"),
        pytest.param({"preemption": {"signal_lead_s": 70000}}, "preemption.signal_lead_s",
                     "65535", id="lead-over-slurm-max"),
        pytest.param({"preemption": {"signal_lead_s": 3600}}, "preemption.signal_lead_s",
                     "less than time_limit", id="lead-not-below-limit"),
        pytest.param({"preemption": {"max_requeues": -1}}, "preemption.max_requeues", "0",
                     id="requeues-negative"),
        pytest.param({"checkpoint": {"keep": 0}}, "checkpoint.keep", "1", id="keep-zero"),
        pytest.param({"checkpoint": {"interval_steps": -5}}, "checkpoint.interval_steps", "0",
                     id="interval-negative"),
        pytest.param({"checkpoint": {"dir": "a\nb"}}, "checkpoint.dir", "control", id="ckpt-nl"),
        pytest.param({"nodse": 2}, "nodse", "unknown field", id="unknown-key"),
        pytest.param({"preemption": {"lead": 1}}, "preemption.lead", "unknown field",
                     id="unknown-nested-key"),
        pytest.param({"checkpoint": 5}, "checkpoint: 5", "should be a block of fields",
                     id="block-not-a-mapping"),
        pytest.param({"program": "train.py"}, "program: 'train.py'",
                     "should be a block of fields", id="program-not-a-mapping"),
    ],
)
def test_bad_value_names_path_value_and_allowed(
    changes: dict[str, Any], path: str, allowed: str
) -> None:
    lines = problems({**MINIMAL, **changes})
    mine = [line for line in lines if line.startswith(f"job.yaml: {path}")]
    assert mine, f"no problem for {path} in {lines}"
    assert allowed in mine[0], mine[0]
    assert "Spec" not in mine[0], mine[0]  # never an internal class name
    assert len(lines) == 1, lines


def test_lead_error_explains_the_jitter() -> None:
    (line,) = problems({**MINIMAL, "time_limit": "2", "preemption": {"signal_lead_s": 120}})
    assert "job.yaml: preemption.signal_lead_s: 120:" in line
    assert "00:02:00 = 120 s" in line
    assert "60 s" in line
    assert MIN_SIGNAL_LEAD_S == 90


def test_missing_required_fields_are_all_listed() -> None:
    lines = problems({})
    for field in ("name", "time_limit", "run_dir", "program"):
        assert any(line.startswith(f"job.yaml: {field}: Field required") for line in lines), lines


def test_every_problem_is_reported_at_once() -> None:
    data = {**MINIMAL, "name": "a b", "nodes": 0, "env": {"1": "x"}, "launcher": "x"}
    error_lines = problems(data)
    assert len(error_lines) == 4
    with pytest.raises(SpecError, match=r"4 problem\(s\)"):
        validate_model(JobSpec, data, "job.yaml")


# ---- loading from files and --set ---------------------------------------------------------------

FILE = """\
    name: toy
    time_limit: 1:30:00
    run_dir: runs/toy
    program:
      module: hpcflow.examples.train
      args: [--steps, 0100, 1:30]
    env:
      MODE: 0755
      FLAG: yes
"""


def test_load_resolves_run_dir_against_the_spec_folder(tmp_path: Path) -> None:
    path = write(tmp_path, FILE)
    job = load_job_spec(path)
    assert job.run_dir == tmp_path / "runs" / "toy"
    assert job.checkpoint_dir == tmp_path / "runs" / "toy" / "checkpoints"
    assert not (tmp_path / "runs").exists()  # loading writes nothing


def test_load_keeps_the_text_yaml_would_turn_into_numbers(tmp_path: Path) -> None:
    job = load_job_spec(write(tmp_path, FILE))
    assert job.time_limit == "01:30:00"  # not the base-60 integer 5400 read as minutes
    assert job.program.args == ["--steps", "0100", "1:30"]
    assert job.env == {"MODE": "0755", "FLAG": "yes"}


@pytest.mark.parametrize(
    ("overrides", "check"),
    [
        pytest.param(["nodes=4"], lambda j: j.nodes == 4, id="int"),
        pytest.param(["time_limit=1:30:00"], lambda j: j.time_limit == "01:30:00", id="time-hms"),
        pytest.param(["time_limit=45"], lambda j: j.time_limit_s == 2700, id="time-minutes"),
        pytest.param(["launcher=torchrun"], lambda j: j.launcher == "torchrun", id="enum"),
        pytest.param(["program.args=[--steps, '10']"], lambda j: j.program.args == ["--steps", "10"],
                     id="flow-list"),
        pytest.param(["env.NEW=0755"], lambda j: j.env["NEW"] == "0755", id="env-text-kept"),
        pytest.param(["preemption.max_requeues=0"], lambda j: j.preemption.max_requeues == 0,
                     id="nested-int"),
        pytest.param(["checkpoint.dir=/ckpt"], lambda j: j.checkpoint_dir == Path("/ckpt"),
                     id="ckpt-abs"),
        pytest.param(["container.image=img"], lambda j: j.container.image == "img",
                     id="creates-mapping"),
        pytest.param(["partition=gpu", "partition=cpu"], lambda j: j.partition == "cpu",
                     id="last-wins"),
    ],
)
def test_set_overrides_apply_with_types(tmp_path: Path, overrides: list[str], check: Any) -> None:
    job = load_job_spec(write(tmp_path, FILE), overrides)
    assert check(job)


def test_set_run_dir_is_relative_to_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "specs").mkdir()
    path = write(tmp_path / "specs", FILE)
    monkeypatch.chdir(tmp_path)
    job = load_job_spec(path, ["run_dir=elsewhere"])
    assert job.run_dir == tmp_path / "elsewhere"


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        pytest.param(["nodes=zero"], "job.yaml: nodes: 'zero'", id="bad-type"),
        pytest.param(["nodes"], "expected KEY=VALUE", id="no-equals"),
        pytest.param(["name.x=1"], "name is not a mapping", id="into-scalar"),
        pytest.param(["preemption.signal_lead_s=10"], "preemption.signal_lead_s: 10", id="range"),
    ],
)
def test_bad_override_is_a_spec_error(tmp_path: Path, overrides: list[str], expected: str) -> None:
    with pytest.raises(SpecError) as info:
        load_job_spec(write(tmp_path, FILE), overrides)
    assert expected in str(info.value)


def test_missing_file_is_a_spec_error(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="no such file"):
        load_job_spec(tmp_path / "nope.yaml")


def test_error_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, FILE + "    nodes: -1\n")
    with pytest.raises(SpecError) as info:
        load_job_spec(path)
    assert info.value.problems == [f"{path}: nodes: -1: Input should be greater than or equal to 1"]
