"""``resilience.spare_nodes`` and ``resilience.exclude_after_failures``: defaults, what they
render to, and refusals that name the field, the value and what is allowed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from batch_script import spot_watch_command, step_command
from batch_script import supervisor_config as rendered_config

from hpcflow.errors import SpecError
from hpcflow.slurm.render import render_sbatch, sbatch_options, srun_options, supervisor_config
from hpcflow.spec.job import JobSpec
from hpcflow.spec.loading import validate_model


def job(**changes: Any) -> JobSpec:
    data: dict[str, Any] = {"name": "t", "time_limit": "00:10:00", "run_dir": "/tmp/r",
                            "program": {"module": "m"}}
    data.update(changes)
    return validate_model(JobSpec, data, "job.yaml")


def test_defaults_are_no_spare_and_two_failures() -> None:
    r = job(resilience={}).resilience
    assert r is not None and (r.spare_nodes, r.exclude_after_failures) == (0, 2)


def test_spare_nodes_are_allocated_but_each_step_keeps_the_layout() -> None:
    spec = job(nodes=2, tasks_per_node=4, resilience={"spare_nodes": 1})
    assert dict(sbatch_options(spec))["--nodes"] == "3"
    assert dict(sbatch_options(spec))["--ntasks-per-node"] == "4"
    words = srun_options(spec)
    assert "--nodes=2" in words and "--ntasks=8" in words
    script = render_sbatch(spec, python="/usr/bin/python3")
    assert step_command(script, exclude=["n2"])[6] == "--exclude=n2"
    cfg = json.loads(supervisor_config(spec))
    assert (cfg["step_nodes"], cfg["exclude_after"]) == (2, 2)


def test_without_the_block_the_allocation_is_the_nodes() -> None:
    spec = job(nodes=2, resilience=False)
    assert dict(sbatch_options(spec))["--nodes"] == "2"
    assert rendered_config(render_sbatch(spec, python="/usr/bin/python3"))["resilience"] is False


@pytest.mark.parametrize(("changes", "expected"), [
    pytest.param({"resilience": {"spare_nodes": -1}},
                 ["resilience.spare_nodes", "-1", "0"], id="negative-spare"),
    pytest.param({"resilience": {"spare_nodes": "one"}},
                 ["resilience.spare_nodes", "one"], id="text-spare"),
    pytest.param({"resilience": {"exclude_after_failures": 0}},
                 ["resilience.exclude_after_failures", "0", "1"], id="exclude-after-zero"),
    pytest.param({"launcher": "torchrun", "resilience": {"spare_nodes": 1}},
                 ["resilience.spare_nodes", "1", "launcher: srun", "torchrun"],
                 id="spare-with-torchrun"),
    pytest.param({"nodes": 100_000, "resilience": {"spare_nodes": 1}},
                 ["resilience.spare_nodes", "100000"], id="too-many-nodes"),
])
def test_bad_values_are_refused_naming_field_value_and_allowed(changes: dict,
                                                               expected: list[str]) -> None:
    with pytest.raises(SpecError) as info:
        job(**changes)
    text = str(info.value)
    for word in expected:
        assert word in text, text


def test_the_spot_watcher_runs_on_every_allocated_node_spares_included() -> None:
    spec = job(nodes=2, preemption={"spot_watch": True}, resilience={"spare_nodes": 1})
    script = render_sbatch(spec, python="/usr/bin/python3")
    assert spot_watch_command(script)[:5] == ["srun", "--overlap", "--kill-on-bad-exit=0",
                                              "--nodes=3", "--ntasks=3"]
