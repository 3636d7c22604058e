"""MaxWaitTimeInSeconds in the CreateTrainingJob request: derived from the time limit and the
planner's expected spot interruptions unless the spec gives sagemaker.max_wait (or
expected_interruptions); always >= MaxRuntimeInSeconds and accepted by botocore."""

from __future__ import annotations

import pytest
from test_sagemaker_request import SM, problems, spec

from hpcflow.aws.requests import request_problems
from hpcflow.plan.spot_wait import spot_max_wait
from hpcflow.sagemaker.request import build_request
from hpcflow.spec.job import load_job_spec


def _stop(**changes):
    req = build_request(spec(**changes), job_name="n")
    assert request_problems("sagemaker", "CreateTrainingJob", req) == []
    return req["StoppingCondition"]


@pytest.mark.parametrize(("nodes", "time_limit", "wait_s"), [
    pytest.param(2, "10:00:00", 2 * 36000, id="small-one-interruption"),
    pytest.param(64, "10-00:00:00", 9 * 864000, id="64-nodes-10-days-eight"),
    pytest.param(128, "28-00:00:00", 33 * 2419200, id="128-nodes-28-days-32"),
])
def test_the_wait_is_the_planners_by_default(nodes, time_limit, wait_s):
    stop = _stop(nodes=nodes, time_limit=time_limit)
    assert stop["MaxWaitTimeInSeconds"] == wait_s >= stop["MaxRuntimeInSeconds"]
    run_s = stop["MaxRuntimeInSeconds"]
    assert wait_s == spot_max_wait(run_s, nodes).max_wait_s


def test_an_explicit_max_wait_overrides_the_planner():
    stop = _stop(nodes=128, time_limit="28-00:00:00",
                 sagemaker={**SM, "max_wait": "30-00:00:00"})
    assert stop == {"MaxRuntimeInSeconds": 2419200, "MaxWaitTimeInSeconds": 30 * 86400}


def test_max_wait_equal_to_the_time_limit_is_allowed():
    assert _stop(sagemaker={**SM, "max_wait": "10:00:00"})["MaxWaitTimeInSeconds"] == 36000


def test_the_spec_keeps_max_wait_in_the_time_limit_form():
    assert spec(sagemaker={**SM, "max_wait": "1-2:3:4"}).sagemaker.max_wait == "1-02:03:04"


@pytest.mark.parametrize(("changes", "message"), [
    pytest.param({"max_wait": "09:59:59"}, "must be at least time_limit (10:00:00 = 36000 s",
                 id="below-runtime"),
    pytest.param({"max_wait": "20:00:00", "spot": False}, "managed spot only",
                 id="on-demand"),
    pytest.param({"max_wait": "20:00:00", "expected_interruptions": 2}, "give one of them",
                 id="both"),
    pytest.param({"max_wait": "soon"}, "sagemaker.max_wait", id="not-a-duration"),
    pytest.param({"max_wait": "400-00:00:00"}, "sagemaker.max_wait", id="over-a-year"),
    # the SDK's max_wait is seconds, Slurm's bare number minutes: neither reading is guessed
    pytest.param({"max_wait": 86400}, '86400 s is "1-00:00:00"', id="a-number-as-the-sdk-writes"),
    pytest.param({"max_wait": "1440"}, "a bare number is seconds to the SageMaker SDK",
                 id="digits-as-text"),
    pytest.param({"max_wait": True}, 'give it as "HH:MM:SS"', id="a-boolean"),
])
def test_a_bad_max_wait_is_refused_naming_the_field(changes, message):
    found = problems(sagemaker={**SM, **changes})
    assert any("sagemaker.max_wait" in p and message in p for p in found), found


def test_an_unquoted_duration_in_the_yaml_file_is_the_duration_written(tmp_path):
    """YAML 1.1 reads ``max_wait: 24:00:00`` as the base-60 number 86400; the spec takes the
    text that was written (24 hours), not 86400 of anything."""
    path = tmp_path / "job.yaml"
    path.write_text("name: sm\nplatform: sagemaker\nnodes: 2\ntime_limit: 10:00:00\n"
                    "program: {argv: [python3, train.py]}\n"
                    "run_dir: run\ncheckpoint: {s3_uri: 's3://my-bucket/ckpt'}\n"
                    f"sagemaker: {{image: '{SM['image']}', role_arn: '{SM['role_arn']}', "
                    f"instance_type: {SM['instance_type']}, "
                    f"output_s3_uri: '{SM['output_s3_uri']}', max_wait: 24:00:00}}\n")
    loaded = load_job_spec(path)
    assert loaded.sagemaker.max_wait == "1-00:00:00"  # 24 hours, in the time_limit form
    request = build_request(loaded, job_name="n")
    assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": 36000,
                                            "MaxWaitTimeInSeconds": 86400}
