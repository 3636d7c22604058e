"""The resilience parts of the batch script: rendered only with a ``resilience`` block,
ShellCheck-clean with every launcher, values quoted."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from hpcflow.slurm.render import render_sbatch
from hpcflow.spec.job import JobSpec

PYTHON = "/opt/my venv/bin/python"


def job(**changes: Any) -> JobSpec:
    data: dict[str, Any] = {
        "name": "r", "nodes": 2, "tasks_per_node": 2, "time_limit": "00:30:00",
        "run_dir": "/scratch/it's $(odd)", "program": {"module": "pkg.train"},
    }
    data.update(changes)
    return JobSpec.model_validate(data)


def test_without_the_block_no_resilience_code_is_rendered() -> None:
    text = render_sbatch(job(), python=PYTHON)
    for word in ("hpcflow.watchdog", "hpcflow_restart_step", "HPCFLOW_HEARTBEAT_DIR",
                 "step_restart", "hpcflow_prepare_try"):
        assert word not in text
    # A rank's traceback is still recorded for `hpcflow report`: one step, try 0.
    assert ('hpcflow_try=0\nexport HPCFLOW_ERROR_DIR="$hpcflow_state_dir/errors-'
            '${hpcflow_job_id}-${hpcflow_restart}-${hpcflow_try}"\n') in text


def test_watchdog_runs_with_the_submitting_interpreter_quoted() -> None:
    text = render_sbatch(job(resilience={"timeouts": {"step_s": 45}}), python=PYTHON)
    assert "  '/opt/my venv/bin/python' -m hpcflow.watchdog --heartbeat-dir" in text
    assert "    --step-s=45 </dev/null &\n" in text
    assert "hpcflow_start_watchdog\n" in text
    no_watchdog = render_sbatch(job(resilience={"watchdog": False}), python=PYTHON)
    assert "hpcflow.watchdog" not in no_watchdog and "hpcflow_restart_step" in no_watchdog


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
