"""The batch script of a Python submission is hpcflow's template around submitit's runner."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from batch_script import ranks_env, step_command

from hpcflow.launch.params import build_spec
from hpcflow.slurm.render import render_sbatch

ARGV = ["/usr/bin/python3", "-u", "-m", "submitit.core._submit", "/work/jobs folder"]
ENV = {"SUBMITIT_EXECUTOR": "slurm", "SUBMITIT_PREEMPT_SIGNAL": "USR2"}


def script(array: str | None = None) -> str:
    spec = build_spec({"name": "train", "nodes": 2, "tasks_per_node": 2,
                       "preemption": {"signal": "USR2"}},
                      run_dir=Path("/work/jobs folder/train-1234abcd"), argv=ARGV, env=ENV)
    return render_sbatch(spec, python="/usr/bin/python3", array=array)


def test_one_signal_everywhere_and_the_payload_runner_under_srun():
    text = script()
    assert "#SBATCH --signal=B:USR2@120" in text and "#SBATCH --requeue" in text
    assert "trap 'hpcflow_pass_on USR2' USR2" in text
    assert "export SUBMITIT_PREEMPT_SIGNAL=USR2" in text
    assert "export HPCFLOW_PREEMPT_SIGNAL=USR2" in text
    assert ranks_env(text)["HPCFLOW_MAX_REQUEUES"] == "3"
    assert step_command(text)[-5:] == ARGV
    assert "--array" not in text and "hpcflow_task=" not in text


def test_array_elements_get_their_own_run_directory_and_log():
    text = script("0-3%2")
    assert "#SBATCH --array=0-3%2" in text
    assert '#SBATCH --output="/work/jobs folder/train-1234abcd/%a/%x-%A_%a.out"' in text
    assert 'export HPCFLOW_RUN_DIR="$HPCFLOW_RUN_DIR/$hpcflow_task"' in text


@pytest.mark.parametrize("array", [None, "0-3%2"], ids=["single", "array"])
def test_script_is_shellcheck_clean(tmp_path, array):
    checker = shutil.which("shellcheck")
    if checker is None:
        pytest.fail("shellcheck is not installed (apt-get install shellcheck)")
    path = tmp_path / "job.sbatch"
    path.write_text(script(array))
    proc = subprocess.run([checker, "-s", "bash", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout
