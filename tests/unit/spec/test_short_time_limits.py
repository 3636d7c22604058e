"""A time limit too short for the default warning lead: a spec that leaves the lead out runs
without a warning (signal_lead_s 0: no --signal, one line in the job log); a lead given
explicitly that does not fit is refused, naming the field, the value and what is allowed. One
rule for both (hpcflow.spec.job_lead): the warning, which Slurm may send 60 s early, must leave
60 s of run before it, so time_limit - signal_lead_s >= 120 s, and the default lead of 120 s
needs a time limit of 240 s. The same rule for a YAML spec, a --set override and a Python
submission (all go through JobSpec)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from hpcflow.errors import SpecError
from hpcflow.launch.params import build_spec
from hpcflow.slurm.render import render_sbatch
from hpcflow.spec.job import JobSpec, load_job_spec
from hpcflow.spec.loading import validate_model

MINIMAL: dict[str, Any] = {
    "name": "toy",
    "run_dir": "/scratch/runs/toy",
    "program": {"argv": ["/bin/true"]},
}
NO_WARNING_LINE = "preemption.signal_lead_s is 0): at the limit Slurm ends the job"


def spec(time_limit: str, **preemption: Any) -> JobSpec:
    data = {**MINIMAL, "time_limit": time_limit}
    if preemption:
        data["preemption"] = preemption
    return validate_model(JobSpec, data, "job.yaml")


def problems(time_limit: str, **preemption: Any) -> list[str]:
    with pytest.raises(SpecError) as info:
        spec(time_limit, **preemption)
    return info.value.problems


@pytest.mark.parametrize(("limit", "preemption", "lead"), [
    pytest.param("1", {}, 0, id="1-min-no-warning"),
    pytest.param("00:01:30", {}, 0, id="90-s-no-warning"),
    pytest.param("00:02:00", {}, 0, id="2-min-is-not-above-the-default"),
    # 1 s (or 60 s) above the default lead: the warning could come at the start of each attempt.
    pytest.param("00:02:01", {}, 0, id="just-above-the-default-lead-leaves-no-run"),
    pytest.param("00:03:00", {}, 0, id="3-min-leaves-no-run-after-the-jitter"),
    pytest.param("00:03:59", {}, 0, id="1-s-short-of-the-default"),
    pytest.param("00:04:00", {}, 120, id="4-min-gets-the-default"),
    pytest.param("00:05:00", {}, 120, id="5-min-default"),
    pytest.param("1", {"max_requeues": 1, "signal": "USR2"}, 0, id="other-fields-kept"),
    pytest.param("00:10:00", {"signal_lead_s": 0}, 0, id="explicit-0-on-a-long-job"),
    pytest.param("00:03:30", {"signal_lead_s": 90}, 90, id="explicit-that-fits"),
    pytest.param("01:00:00", {"signal_lead_s": 3480}, 3480, id="explicit-longest-that-fits"),
])
def test_lead_left_out_fits_the_time_limit(limit: str, preemption: dict, lead: int) -> None:
    job = spec(limit, **preemption)
    assert job.preemption.signal_lead_s == lead
    for key, value in preemption.items():
        assert getattr(job.preemption, key) == value


def test_no_warning_survives_a_round_trip_through_the_written_spec() -> None:
    job = spec("1")
    again = JobSpec.model_validate(job.model_dump(mode="json"))
    assert again.preemption.signal_lead_s == 0 and again == job


def test_explicit_lead_longer_than_the_limit_names_field_value_and_the_way_out() -> None:
    (line,) = problems("1", signal_lead_s=120)
    assert line.startswith("job.yaml: preemption.signal_lead_s: 120:"), line
    assert "less than time_limit (00:01:00 = 60 s)" in line
    assert "or 0 (or left out) for a job without a warning" in line


@pytest.mark.parametrize("lead", [1, 45, 89])
def test_explicit_lead_inside_the_jitter_is_refused(lead: int) -> None:
    (line,) = problems("01:00:00", signal_lead_s=lead)
    assert line.startswith(f"job.yaml: preemption.signal_lead_s: {lead}:"), line
    assert "must be 0 (no warning) or at least 90 s" in line


@pytest.mark.parametrize(("limit", "lead", "left", "most"), [
    pytest.param("00:02:00", 90, 30, None, id="2-min-fits-no-lead"),
    pytest.param("00:03:29", 90, 119, None, id="1-s-short-of-the-least-lead"),
    pytest.param("00:03:00", 150, 30, None, id="3-min-150-s"),
    pytest.param("00:05:00", 181, 119, 180, id="5-min-1-s-too-long"),
    pytest.param("01:00:00", 3599, 1, 3480, id="1-s-below-the-limit"),
])
def test_explicit_lead_that_leaves_no_run_before_the_warning_is_refused(
        limit: str, lead: int, left: int, most: int | None) -> None:
    (line,) = problems(limit, signal_lead_s=lead)
    assert line.startswith(f"job.yaml: preemption.signal_lead_s: {lead}: must leave at least "
                           "120 s of time_limit ("), line
    assert f"with {left} s left it may come {max(0, left - 60)} s after the job starts" in line
    assert "Slurm may send it 60 s early" in line and "or 0 (or left out)" in line
    if most is None:
        assert "which no lead does with a time_limit under 210 s" in line
    else:
        assert f"so at most {most} s:" in line
        assert spec(limit, signal_lead_s=most).preemption.signal_lead_s == most


def test_requeue_margin_is_not_held_against_a_lead_of_0() -> None:
    assert spec("1", requeue_margin_s=30).preemption.requeue_margin_s == 30
    (line,) = problems("00:10:00", signal_lead_s=120, requeue_margin_s=120)
    assert line.startswith("job.yaml: preemption.requeue_margin_s: 120:")


def test_yaml_spec_and_set_override_follow_the_same_rule(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("name: toy\nrun_dir: run\ntime_limit: 1\nprogram: {argv: [/bin/true]}\n")
    assert load_job_spec(path).preemption.signal_lead_s == 0
    assert load_job_spec(path, ["time_limit=00:30:00"]).preemption.signal_lead_s == 120
    with pytest.raises(SpecError, match=r"preemption\.signal_lead_s: 120: must be less than "
                                        r"time_limit \(00:01:00 = 60 s\)"):
        load_job_spec(path, ["preemption.signal_lead_s=120"])


def test_python_submission_follows_the_same_rule(tmp_path: Path) -> None:
    short = build_spec({"name": "f", "time_limit": "00:01:00"}, run_dir=tmp_path, argv=["x"],
                       env={})
    assert short.preemption.signal_lead_s == 0
    with pytest.raises(SpecError, match=r"preemption\.signal_lead_s: 100: must be less than"):
        build_spec({"name": "f", "time_limit": "00:01:00", "preemption": {"signal_lead_s": 100}},
                   run_dir=tmp_path, argv=["x"], env={})


def test_script_without_warning_has_no_signal_option_and_says_so(tmp_path: Path) -> None:
    quiet = render_sbatch(spec("1"), python="/usr/bin/python3")
    warned = render_sbatch(spec("00:10:00"), python="/usr/bin/python3")
    assert "#SBATCH --signal" not in quiet and NO_WARNING_LINE in quiet
    assert quiet.count(NO_WARNING_LINE) == 1
    assert "#SBATCH --signal=B:USR1@120\n" in warned and NO_WARNING_LINE not in warned
    # Only the warning arms the stop before the deadline: the header says what happens instead.
    quiet_head = quiet.partition("\nset -uo pipefail\n")[0]
    warned_head = warned.partition("\nset -uo pipefail\n")[0]
    assert "Slurm ends the job at its time limit." in quiet_head
    assert "before the deadline" not in quiet_head
    assert "30 s before the deadline, gets TERM" in warned_head
    script = tmp_path / "job.sbatch"
    script.write_text(quiet)
    check = subprocess.run([shutil.which("shellcheck") or "shellcheck", "--severity=style",
                            "--shell=bash", str(script)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout
