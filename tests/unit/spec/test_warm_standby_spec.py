"""``resilience.warm_standby``: off by default, what it renders to, and the programs and
launchers it refuses, naming the field, the value and what is allowed."""

from __future__ import annotations

from typing import Any

import pytest
from batch_script import supervisor_config as rendered_config

from hpcflow.errors import SpecError
from hpcflow.slurm.render import render_sbatch
from hpcflow.spec.job import JobSpec
from hpcflow.spec.loading import validate_model


def job(**changes: Any) -> JobSpec:
    data: dict[str, Any] = {"name": "t", "time_limit": "00:10:00", "run_dir": "/tmp/r",
                            "program": {"module": "m"}}
    data.update(changes)
    return validate_model(JobSpec, data, "job.yaml")


def test_off_by_default_and_rendered_for_the_supervisor() -> None:
    assert job(resilience={}).resilience.warm_standby is False
    cfg = rendered_config(render_sbatch(job(resilience={"warm_standby": True}),
                                        python="/usr/bin/python3"))
    assert cfg["warm_standby"] is True
    assert rendered_config(render_sbatch(job(resilience=False),
                                         python="/usr/bin/python3"))["warm_standby"] is False


@pytest.mark.parametrize("program", [
    pytest.param({"module": "pkg.train", "args": ["--steps", "3"]}, id="module"),
    pytest.param({"argv": ["python3", "train.py", "--lr", "1e-3"]}, id="python-script"),
    pytest.param({"argv": ["/opt/venv/bin/python3.11", "/work/train.py"]}, id="absolute-python"),
    pytest.param({"argv": ["python3", "-u", "-m", "submitit.core._submit", "/f"]},
                 id="options-and-module-as-hpcflow-launch-runs-it"),
    pytest.param({"argv": ["python3", "-uB", "-OO", "train.py"]}, id="joined-options"),
])
def test_python_programs_can_have_a_standby(program) -> None:
    assert job(program=program, resilience={"warm_standby": True}).resilience.warm_standby


@pytest.mark.parametrize(("changes", "expected"), [
    pytest.param({"launcher": "torchrun"}, ["resilience.warm_standby", "launcher: srun",
                                            "torchrun"], id="torchrun"),
    pytest.param({"program": {"argv": ["/opt/bin/train", "--lr", "1"]}},
                 ["resilience.warm_standby", "program.module", "/opt/bin/train"], id="not-python"),
    pytest.param({"program": {"argv": ["python", "-X", "importtime", "train.py"]}},
                 ["resilience.warm_standby", "[python, script.py, ...]", "-X", "-u, -B"],
                 id="interpreter-option-it-cannot-pass-on"),
    pytest.param({"program": {"argv": ["python", "-u", "-m"]}}, ["resilience.warm_standby"],
                 id="dash-m-without-module"),
    pytest.param({"program": {"argv": ["python"]}}, ["resilience.warm_standby"], id="no-script"),
    pytest.param({"resilience": {"warm_standby": True, "max_in_job_restarts": 0}},
                 ["resilience.warm_standby", "max_in_job_restarts", "at least 1"],
                 id="no-in-job-restart"),
    pytest.param({"container": {"image": "nvcr.io#nvidia/pytorch:24.05-py3"}},
                 ["resilience.warm_standby", "container"], id="container"),
])
def test_what_a_standby_cannot_run_is_refused(changes: dict, expected: list[str]) -> None:
    with pytest.raises(SpecError) as info:
        job(**{"resilience": {"warm_standby": True}, **changes})
    text = str(info.value)
    for word in expected:
        assert word in text, text
