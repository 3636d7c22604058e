"""The resilience parts of the batch script: rendered only with a ``resilience`` block,
ShellCheck-clean with every launcher, values quoted."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from batch_script import supervisor_config

from hpcflow.slurm.render import render_sbatch
from hpcflow.spec.job import JobSpec
from hpcflow.supervisor.commands import try_env, watchdog_argv
from hpcflow.supervisor.facts import Paths

PYTHON = "/opt/my venv/bin/python"


def job(**changes: Any) -> JobSpec:
    data: dict[str, Any] = {
        "name": "r", "nodes": 2, "tasks_per_node": 2, "time_limit": "00:30:00",
        "run_dir": "/scratch/it's $(odd)", "program": {"module": "pkg.train"},
    }
    data.update(changes)
    return JobSpec.model_validate(data)


PATHS = Paths(Path("/scratch/it's $(odd)"), Path("/scratch/it's $(odd)/checkpoints"), "4242", 0)


def test_with_resilience_false_no_resilience_code_is_rendered() -> None:
    text = render_sbatch(job(resilience=False), python=PYTHON)
    for word in ("hpcflow.watchdog", "HPCFLOW_HEARTBEAT_DIR", "step_restart"):
        assert word not in text
    cfg = supervisor_config(text)
    assert cfg["resilience"] is False and cfg["watchdog"] is None
    assert watchdog_argv(cfg, PATHS, 0) == []
    # A rank's traceback is still recorded for `hpcflow report`: one step, try 0.
    assert try_env(cfg, PATHS, 0) == {
        "HPCFLOW_STEP_TRY": "0",
        "HPCFLOW_ERROR_DIR": "/scratch/it's $(odd)/.hpcflow/errors-4242-0-0"}


def test_the_batch_script_decides_nothing_itself() -> None:
    """Requeues, restarts and endings are the supervisor's (hpcflow.supervisor): the script
    holds no requeue command, no budget and no ledger event but its last-resort record."""
    for spec in (job(), job(resilience={"spare_nodes": 1}), job(launcher="torchrun")):
        text = render_sbatch(spec, python=PYTHON)
        assert "scontrol requeue" not in text and "scontrol update" not in text
        assert "max_failures" not in text.replace('"max_failures"', "")
        assert text.count('"event":') == 1 and "supervisor_error" in text


def test_watchdog_runs_with_the_submitting_interpreter_quoted() -> None:
    text = render_sbatch(job(resilience={"timeouts": {"step_s": 45}}), python=PYTHON)
    argv = watchdog_argv(supervisor_config(text), PATHS, 1)
    assert argv[:5] == [PYTHON, "-m", "hpcflow.watchdog", "--heartbeat-dir",
                        "/scratch/it's $(odd)/.hpcflow/heartbeat-4242-0-1"]
    settings = json.loads(argv[argv.index("--settings") + 1])
    assert settings["step_s"] == 45 and argv[argv.index("--try") + 1] == "1"
    # It stops by itself once the supervisor that started it (this process here) is gone.
    assert argv[-2:] == ["--parent-pid", str(os.getpid())]
    restarted = try_env(supervisor_config(text), PATHS, 1)
    assert restarted["HPCFLOW_HEARTBEAT_INTERVAL_S"] == "2"
    # An in-job restart's start-up is timed from the new step's start, not the attempt's.
    assert abs(float(restarted["HPCFLOW_ATTEMPT_T0"]) - time.time()) < 5
    assert "HPCFLOW_ATTEMPT_T0" not in try_env(supervisor_config(text), PATHS, 0)
    no_watchdog = render_sbatch(job(resilience={"watchdog": False}), python=PYTHON)
    assert "hpcflow.watchdog" not in no_watchdog
    cfg = supervisor_config(no_watchdog)
    assert cfg["resilience"] is True and cfg["max_in_job_restarts"] >= 1


@pytest.mark.parametrize("launcher", ["srun", "torchrun"])
@pytest.mark.parametrize("watchdog", [True, False])
def test_resilience_script_is_shellcheck_clean(launcher: str, watchdog: bool,
                                               tmp_path: Path) -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.fail("shellcheck is not installed (apt-get install shellcheck)")
    script = tmp_path / "job.sbatch"
    script.write_text(render_sbatch(job(launcher=launcher, resilience={"watchdog": watchdog}),
                                    python=PYTHON))
    out = subprocess.run([shellcheck, "--severity=style", "--shell=bash", str(script)],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_step_env_is_built_once_and_read_back_by_the_runtime() -> None:
    from hpcflow.runtime.runconfig import RunConfig
    from hpcflow.supervisor.commands import step_env

    spec = job(checkpoint={"interval_steps": 7, "keep": 4}, parallelism={"dp": -1, "pp": 1,
                                                                         "tp": 2})
    env = step_env(supervisor_config(render_sbatch(spec, python=PYTHON)), PATHS, 1, now=5.0)
    assert env.try_variables() == try_env(supervisor_config(render_sbatch(spec, python=PYTHON)),
                                          PATHS, 1) | {"HPCFLOW_ATTEMPT_T0": "5.000000"}
    config = RunConfig.from_environ(env.variables())
    assert (config.checkpoint_interval, config.checkpoint_keep) == (7, 4)
    assert config.preempt_flag == PATHS.flag and config.joined_dir == PATHS.joined
    assert config.parallelism == {"dp": -1, "pp": 1, "tp": 2}
