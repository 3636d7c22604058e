"""Values a job spec used to take and should not, each refused naming the field, the value and
what is allowed: EFA required where there is none and more GPUs per node than the instance has
(the instance catalog), a boolean or a quoted number where a number is due, an S3 prefix longer
than an S3 key can hold, a warning lead that leaves no time to train, ``-m`` followed by an
option in a warm-standby program, and a run directory that is ``/``, a system folder or a
shared sticky folder such as ``/tmp``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from hpcflow.errors import SpecError, SubmitError
from hpcflow.jobs.run_dir import check_run_dir
from hpcflow.jobs.script import job_script
from hpcflow.spec.job import JobSpec
from hpcflow.spec.loading import validate_model

MINIMAL: dict[str, Any] = {
    "name": "toy", "run_dir": "/scratch/runs/toy", "time_limit": "01:00:00",
    "program": {"argv": ["/bin/true"]},
}


def spec(**changes: Any) -> JobSpec:
    return validate_model(JobSpec, {**MINIMAL, **changes}, "job.yaml")


def problems(**changes: Any) -> list[str]:
    with pytest.raises(SpecError) as info:
        spec(**changes)
    return info.value.problems


@pytest.mark.parametrize("changes, field", [
    pytest.param({"resilience": {"timeouts": {"step_factor": True}}},
                 "resilience.timeouts.step_factor", id="step-factor-true"),
    pytest.param({"resilience": {"timeouts": {"step_factor": "3"}}},
                 "resilience.timeouts.step_factor", id="step-factor-quoted"),
    pytest.param({"checkpoint": {"failures_per_node_hour": True}},
                 "checkpoint.failures_per_node_hour", id="failure-rate-true"),
    pytest.param({"checkpoint": {"failures_per_node_hour": float("inf")}},
                 "checkpoint.failures_per_node_hour", id="failure-rate-infinite"),
])
def test_a_boolean_or_text_is_never_taken_for_a_number(changes, field):
    (line,) = problems(**changes)
    assert line.startswith(f"job.yaml: {field}: "), line


@pytest.mark.parametrize("changes, expected", [
    pytest.param({"resilience": {"timeouts": {"step_factor": True}}},
                 "resilience.timeouts.step_factor: True: a number from 1 to 100 is expected, "
                 "not true", id="step-factor-true"),
    pytest.param({"checkpoint": {"failures_per_node_hour": False}},
                 "checkpoint.failures_per_node_hour: False: a number from 0 to 1,000 is "
                 "expected, not false", id="failure-rate-false"),
    pytest.param({"checkpoint": {"failures_per_node_hour": "1e-4"}},
                 "checkpoint.failures_per_node_hour: '1e-4': a number from 0 to 1,000 is "
                 "expected, not text: write the number without quotes, and an exponent with a "
                 "dot and a sign (1.0e-4, not 1e-4", id="failure-rate-yaml-text"),
    pytest.param({"checkpoint": {"failures_per_node_hour": float("nan")}},
                 "checkpoint.failures_per_node_hour: nan: a number from 0 to 1,000 is expected, "
                 "not nan", id="failure-rate-nan"),
    pytest.param({"parallelism": {"dp": 1, "model": {"preset": "llama-8b", "headroom": True}}},
                 "parallelism.model.headroom: True: a number from 0 to 0.9 is expected, not "
                 "true",
                 id="headroom-true"),
])
def test_a_number_field_says_its_range_when_refused(changes, expected):
    assert any(p.startswith(f"job.yaml: {expected}") for p in problems(**changes)), \
        problems(**changes)


def test_numbers_stay_numbers():
    job = spec(resilience={"timeouts": {"step_factor": 2}},
               checkpoint={"failures_per_node_hour": 1e-4})
    assert job.resilience.timeouts.step_factor == 2.0
    assert job.checkpoint.failures_per_node_hour == 1e-4


def test_an_s3_prefix_longer_than_a_key_can_hold_is_refused():
    (line,) = problems(checkpoint={"s3_uri": "s3://my-bucket/" + "p" * 1100})
    assert line.startswith("job.yaml: checkpoint.s3_uri: "), line
    assert "prefix of 1,100 bytes is too long: at most 768 bytes" in line
    assert "an S3 key has at most 1,024" in line
    assert spec(checkpoint={"s3_uri": "s3://my-bucket/" + "p" * 700}).checkpoint.s3_uri


@pytest.mark.parametrize("lead", [3599, 3590, 3571, 3481])
def test_a_lead_that_leaves_no_time_to_train_is_refused(lead):
    # Slurm may send the warning 60 s early; the job needs 60 s of run before that.
    (line,) = problems(preemption={"signal_lead_s": lead})
    assert line.startswith(f"job.yaml: preemption.signal_lead_s: {lead}: must leave at least "
                           "120 s of time_limit (01:00:00 = 3600 s)"), line
    assert "so at most 3480 s" in line and "saves and requeues without training" in line
    assert spec(preemption={"signal_lead_s": 3480}).preemption.signal_lead_s == 3480


@pytest.mark.parametrize("argv", [
    pytest.param(["python", "-m", "--help"], id="option-after-m"),
    pytest.param(["python", "-m", "-c"], id="dash-c-after-m"),
])
def test_warm_standby_needs_a_module_name_after_dash_m(argv):
    (line,) = problems(program={"argv": argv}, resilience={"warm_standby": True})
    assert line.startswith("job.yaml: resilience.warm_standby: True: needs a Python program")
    assert "a module name after -m, not an option" in line
    assert spec(program={"argv": ["python", "-m", "train.main", "--lr", "1"]},
                resilience={"warm_standby": True}).resilience.warm_standby


@pytest.mark.parametrize("network, gpus, expected", [
    pytest.param({"instance_type": "g5.xlarge", "require_efa": True}, 1,
                 "network.require_efa: true, but g5.xlarge has no EFA", id="efa-on-g5"),
    pytest.param({"instance_type": "c5n.18xlarge", "require_efa": True}, 0,
                 "c5n.18xlarge has EFA but no NVIDIA GPUs", id="efa-without-gpus"),
    pytest.param({"instance_type": "p5.48xlarge"}, 16,
                 "gpus_per_node: 16 is more than the 8 GPUs of p5.48xlarge", id="16-gpus-on-p5"),
])
def test_the_network_block_is_checked_against_the_instance_catalog(network, gpus, expected):
    job = spec(network=network, gpus_per_node=gpus)
    with pytest.raises(SpecError) as info:
        job_script(job, python="/usr/bin/python3")
    assert any(expected in p and "instance catalog" in p for p in info.value.problems), \
        info.value.problems


def test_what_the_instance_has_is_accepted():
    script = job_script(spec(network={"instance_type": "p5.48xlarge", "require_efa": True},
                             gpus_per_node=8), python="/usr/bin/python3")
    assert "HPCFLOW_REQUIRE_EFA" in script
    # A type the catalog does not know is not judged.
    assert job_script(spec(network={"instance_type": "zz9.48xlarge", "require_efa": True},
                           gpus_per_node=64), python="/usr/bin/python3")


@pytest.mark.parametrize("run_dir", ["/", "/tmp", "/usr", "/home", "/tmp/../tmp"])
def test_a_system_folder_is_not_a_run_directory(run_dir):
    with pytest.raises(SubmitError) as info:
        check_run_dir(Path(run_dir))
    assert str(info.value).startswith(f"run_dir: {run_dir!r}: is ")
    assert "a run directory is the job's own folder" in str(info.value)


def test_a_world_writable_sticky_folder_itself_is_refused_but_a_folder_below_it_is_fine(tmp_path):
    shared = tmp_path / "scratch"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    with pytest.raises(SubmitError, match="every user may write"):
        check_run_dir(shared)
    check_run_dir(shared / "runs" / "job")
    assert os.stat(shared).st_mode & 0o7777 == 0o1777
