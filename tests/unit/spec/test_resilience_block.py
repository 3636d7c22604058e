"""The job spec's resilience block: defaults and refusals that name the field."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from hpcflow.contract import WatchdogSettings
from hpcflow.slurm.render import watchdog_settings
from hpcflow.spec.job import JobSpec


def job(**changes: Any) -> JobSpec:
    data: dict[str, Any] = {"name": "t", "time_limit": "00:10:00", "run_dir": "/tmp/r",
                            "program": {"module": "m"}}
    data.update(changes)
    return JobSpec.model_validate(data)


def test_false_turns_the_watchdog_off() -> None:
    spec = job(resilience=False)
    assert spec.resilience is None and watchdog_settings(spec) is None
    # a dumped spec with the block off says false, and reads back off
    assert spec.model_dump()["resilience"] is False
    assert spec.model_dump(mode="json")["resilience"] is False
    assert JobSpec.model_validate(spec.model_dump(mode="json")).resilience is None


def test_null_is_refused_naming_both_ways_to_say_what_was_meant() -> None:
    # `resilience:` with every line below it commented out is null too: neither off nor the
    # defaults is a safe guess.
    with pytest.raises(ValidationError) as info:
        job(resilience=None)
    (error,) = info.value.errors()
    assert error["loc"] == ("resilience",)
    assert "write `resilience: false` to switch protection off" in error["msg"]
    assert "leave the key out (or write `resilience: {}`) for the defaults" in error["msg"]


@pytest.mark.parametrize("given", [pytest.param({}, id="absent"), pytest.param(
    {"resilience": True}, id="true"), pytest.param({"resilience": {}}, id="empty-block")])
def test_protection_is_on_by_default(given: dict) -> None:
    spec = job(**given)
    assert spec.resilience is not None and spec.resilience.watchdog
    assert watchdog_settings(spec) == WatchdogSettings(
        startup_s=600, checkpoint_s=600, step_floor_s=60, step_factor=3.0,
        warmup_steps=10, heartbeat_interval_s=2, kill_after_s=540)
    # a dumped spec reads back the same
    assert JobSpec.model_validate(spec.model_dump()).resilience == spec.resilience


def test_defaults_and_options() -> None:
    spec = job(resilience={"timeouts": {"step_s": 30}})
    r = spec.resilience
    assert r is not None and (r.max_in_job_restarts, r.max_failures, r.watchdog) == (2, 3, True)
    assert watchdog_settings(spec) == WatchdogSettings(
        startup_s=600, checkpoint_s=600, step_floor_s=60, step_factor=3.0,
        warmup_steps=10, heartbeat_interval_s=2, kill_after_s=540, step_s=30)


@pytest.mark.parametrize(("block", "where", "what"), [
    pytest.param({"max_in_job_restarts": -1}, "max_in_job_restarts", "greater than or equal to 0",
                 id="negative-restarts"),
    pytest.param({"timeouts": {"step_factor": 0.5}}, "step_factor", "greater than or equal to 1",
                 id="factor-below-1"),
    pytest.param({"timeouts": {"bogus": 1}}, "bogus", "Extra inputs", id="unknown-key"),
    pytest.param({"heartbeat_interval_s": 10, "timeouts": {"step_floor_s": 10}},
                 "resilience", "timeouts.step_floor_s=10 must exceed heartbeat_interval_s=10",
                 id="timeout-not-above-interval"),
])
def test_bad_values_are_refused_naming_the_field(block: dict, where: str, what: str) -> None:
    with pytest.raises(ValidationError) as info:
        job(resilience=block)
    text = str(info.value)
    assert where in text and what in text


def test_the_example_block_in_the_protocol_doc_is_a_valid_spec() -> None:
    import re
    from pathlib import Path

    import yaml

    doc = (Path(__file__).resolve().parents[3] / "docs" / "protocol.md").read_text()
    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", doc, re.S) if "resilience:" in b]
    assert len(blocks) == 1
    spec = job(**yaml.safe_load(blocks[0]))
    assert spec.resilience is not None and spec.resilience.timeouts.step_floor_s == 30


def test_a_block_left_empty_in_a_spec_file_is_refused_with_the_file_and_field(tmp_path) -> None:
    from hpcflow.errors import SpecError
    from hpcflow.spec.job import load_job_spec

    path = tmp_path / "job.yaml"
    path.write_text("name: t\ntime_limit: '10'\nrun_dir: r\nprogram: {module: m}\n"
                    "resilience:\n#  watchdog: false\n")
    with pytest.raises(SpecError) as info:
        load_job_spec(path)
    (line,) = info.value.problems
    assert line.startswith(f"{path}: resilience: None: null is not allowed here"), line
    assert load_job_spec(path, ["resilience=false"]).resilience is None
