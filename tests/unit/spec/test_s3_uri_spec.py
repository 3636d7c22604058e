"""checkpoint.s3_uri: accepted forms, and refusals that name the field, the value and what is
allowed."""

from __future__ import annotations

from typing import Any

import pytest

from hpcflow.errors import SpecError
from hpcflow.spec.job import JobSpec
from hpcflow.spec.loading import validate_model
from hpcflow.spec.s3uri import S3Uri, parse_s3_uri

MINIMAL: dict[str, Any] = {
    "name": "toy",
    "time_limit": "01:00:00",
    "run_dir": "/scratch/runs/toy",
    "program": {"argv": ["/bin/true"]},
}


@pytest.mark.parametrize(("text", "bucket", "prefix"), [
    pytest.param("s3://my-bucket", "my-bucket", "", id="bucket-only"),
    pytest.param("s3://my-bucket/", "my-bucket", "", id="bucket-slash"),
    pytest.param("s3://my.bucket-1/runs/llm-7b/", "my.bucket-1", "runs/llm-7b", id="prefix"),
])
def test_valid_uris_parse(text: str, bucket: str, prefix: str) -> None:
    assert parse_s3_uri(text) == S3Uri(bucket, prefix)


def test_key_joins_under_the_prefix() -> None:
    assert parse_s3_uri("s3://bkt/a/b").key("step_3", "x/y") == "a/b/step_3/x/y"
    assert parse_s3_uri("s3://bkt").key("step_3") == "step_3"
    assert str(parse_s3_uri("s3://bkt/a/")) == "s3://bkt/a"


@pytest.mark.parametrize(("value", "what"), [
    pytest.param("https://bkt/x", "must start with 's3://'", id="scheme"),
    pytest.param("s3://My_Bucket/x", "bucket 'My_Bucket' is not a valid S3 bucket name",
                 id="bucket-case"),
    pytest.param("s3://ab", "bucket 'ab' is not a valid", id="bucket-short"),
    pytest.param("s3://a..b/x", "bucket 'a..b'", id="bucket-dots"),
    pytest.param("s3://bkt/a//b", "prefix 'a//b' is not allowed", id="empty-part"),
    pytest.param("s3://bkt/a b", "prefix 'a b' is not allowed", id="space"),
    pytest.param("s3://bkt/../x", "prefix '../x' is not allowed", id="dotdot"),
])
def test_bad_uri_is_refused_with_field_value_and_allowed(value: str, what: str) -> None:
    with pytest.raises(SpecError) as info:
        validate_model(JobSpec, {**MINIMAL, "checkpoint": {"s3_uri": value}}, "job.yaml")
    [problem] = info.value.problems
    assert problem.startswith(f"job.yaml: checkpoint.s3_uri: {value!r}: ")
    assert repr(value) in problem or value in problem
    assert what in problem
    assert "allowed: s3://BUCKET or s3://BUCKET/PREFIX" in problem


def test_s3_uri_defaults_to_none_and_is_kept() -> None:
    spec = validate_model(JobSpec, MINIMAL, "job.yaml")
    assert spec.checkpoint.s3_uri is None
    spec = validate_model(JobSpec, {**MINIMAL, "checkpoint": {"s3_uri": "s3://bkt/run"}}, "j.yaml")
    assert spec.checkpoint.s3_uri == "s3://bkt/run"
