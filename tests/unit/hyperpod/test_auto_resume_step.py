"""``hyperpod.auto_resume``: the step's command line with and without it (the local Slurm has no
HyperPod plugin and refuses the option, so the command is checked here, not run), what the
supervisor and its watchdog are told, and the specs it is refused with, naming the field, the
value and what is allowed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from batch_script import step_command
from batch_script import supervisor_config as rendered_config

from hpcflow.contract import SupervisorSettings
from hpcflow.errors import SpecError
from hpcflow.slurm.render import render_sbatch, supervisor_settings
from hpcflow.spec.job import JobSpec
from hpcflow.spec.loading import validate_model
from hpcflow.supervisor import facts
from hpcflow.supervisor.commands import watchdog_argv
from hpcflow.supervisor.job import Job

PY = "/usr/bin/python3"


def job(**changes: Any) -> JobSpec:
    data: dict[str, Any] = {"name": "t", "nodes": 2, "tasks_per_node": 4, "time_limit": "01:00:00",
                            "run_dir": "/tmp/r", "program": {"module": "train"}}
    data.update(changes)
    return validate_model(JobSpec, data, "job.yaml")


ON = {"hyperpod": {"auto_resume": True}}
BASE = ["srun", "--kill-on-bad-exit=1", "--nodes=2", "--ntasks=8", "--ntasks-per-node=4",
        "--cpus-per-task=1"]
PROGRAM = [PY, "-m", "train"]


@pytest.mark.parametrize(("changes", "exclude", "argv"), [
    pytest.param({}, (), [*BASE, *PROGRAM], id="default"),
    pytest.param({"hyperpod": {}}, (), [*BASE, *PROGRAM], id="block-off"),
    pytest.param({"hyperpod": {"auto_resume": False}}, (), [*BASE, *PROGRAM], id="false"),
    pytest.param(ON, (), [*BASE, "--auto-resume=1", *PROGRAM], id="auto-resume"),
    pytest.param({}, ("n2",), [*BASE, "--exclude=n2", *PROGRAM], id="exclusion"),
    # HyperPod owns the node list: an exclusion that reached the command is dropped.
    pytest.param(ON, ("n2",), [*BASE, "--auto-resume=1", *PROGRAM], id="auto-resume-no-exclude"),
    pytest.param({**ON, "gpus_per_node": 4, "program": {"module": "train", "workdir": "/fsx/w"}},
                 (), [*BASE, "--gpus-per-node=4", "--chdir=/fsx/w", "--auto-resume=1", *PROGRAM],
                 id="auto-resume-with-gpus-and-workdir"),
    pytest.param({**ON, "container": {"image": "nvcr.io#nvidia/pytorch:24.05-py3"}}, (),
                 [*BASE, "--container-image=nvcr.io#nvidia/pytorch:24.05-py3", "--auto-resume=1",
                  *PROGRAM], id="auto-resume-with-pyxis"),
])
def test_the_step_command(changes, exclude, argv) -> None:
    script = render_sbatch(job(**changes), python=PY)
    assert step_command(script, exclude=exclude) == argv


def test_the_supervisor_is_told_and_an_old_script_reads_as_off() -> None:
    on = rendered_config(render_sbatch(job(**ON), python=PY))
    assert on["auto_resume"] is True and "--auto-resume=1" in on["step"]["srun"]
    off = rendered_config(render_sbatch(job(), python=PY))
    assert "auto_resume" not in off  # a script of every other job is unchanged
    assert SupervisorSettings.decode(off).auto_resume is False
    cfg = SupervisorSettings.decode(on)
    assert cfg.auto_resume is True and SupervisorSettings.decode(cfg.encode()) == cfg
    with pytest.raises(ValueError, match="auto_resume"):
        SupervisorSettings.decode({**on, "auto_resume": "yes"})


def test_the_rules_and_the_watchdog_are_told(tmp_path: Path) -> None:
    paths = facts.Paths(tmp_path, tmp_path / "ckpt", "42", 0)
    for changes, on in (({}, False), (ON, True)):
        cfg = supervisor_settings(job(**changes), python=PY)
        attempt = Job(json.loads(json.dumps(cfg.encode())), job_id="42", requeue_id="42",
                      restart=0, nodelist="n[1-2]", run_dir=tmp_path, checkpoint_dir=tmp_path)
        assert attempt.limits.auto_resume is on
        argv = watchdog_argv(cfg, paths, 0)
        assert ("--auto-resume" in argv) is on and argv[-2] == "--parent-pid"


@pytest.mark.parametrize(("changes", "expected"), [
    pytest.param({"launcher": "torchrun"},
                 ["hyperpod.auto_resume: True", "launcher: srun", "'torchrun'", "rendezvous"],
                 id="torchrun"),
    pytest.param({"platform": "sagemaker"},
                 ["hyperpod.auto_resume: True", "platform: slurm", "'sagemaker'"], id="sagemaker"),
    pytest.param({"resilience": {"spare_nodes": 1}},
                 ["resilience.spare_nodes: 1", "must be 0 with hyperpod.auto_resume"],
                 id="spare-nodes"),
    pytest.param({"resilience": {"warm_standby": True}},
                 ["resilience.warm_standby: True", "must be false with hyperpod.auto_resume"],
                 id="warm-standby"),
    pytest.param({"hyperpod": {"auto_resume": "maybe"}}, ["hyperpod.auto_resume", "maybe"],
                 id="not-a-boolean"),
    pytest.param({"hyperpod": {"auto_resume": True, "replace": True}}, ["hyperpod.replace"],
                 id="unknown-key"),
])
def test_what_auto_resume_cannot_run_with_is_refused(changes, expected) -> None:
    with pytest.raises(SpecError) as info:
        job(**{**ON, **changes})
    text = str(info.value)
    for word in expected:
        assert word in text, text


@pytest.mark.parametrize("changes", [
    pytest.param({"launcher": "torchrun", "hyperpod": {"auto_resume": False}}, id="off-torchrun"),
    pytest.param({"resilience": {"spare_nodes": 1}, "hyperpod": {}}, id="off-spares"),
    pytest.param({**ON, "resilience": False}, id="on-without-resilience"),
])
def test_what_is_allowed(changes) -> None:
    job(**changes)
