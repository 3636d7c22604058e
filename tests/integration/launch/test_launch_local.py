"""The same code without Slurm: submitit's local executor (a laptop smoke test)."""

from __future__ import annotations

import pytest
from launch_programs import fsdp_train

from hpcflow.launch import Executor

pytestmark = [pytest.mark.timeout(300)]


def test_training_function_runs_on_the_local_executor_and_resumes_from_its_checkpoint(
        launch_env, tmp_path):
    ckpt = tmp_path / "ck"
    executor = Executor(launch_env, cluster="local", time_limit="00:05:00",
                        checkpoint={"dir": str(ckpt), "interval_steps": 2})
    assert executor.cluster == "local"
    first = executor.submit(fsdp_train, {"steps": 4}).result()
    assert first["step"] == 4 and first["first_step"] == 0
    assert sorted(p.name for p in ckpt.iterdir()) == ["step_2", "step_4"]
    again = executor.submit(fsdp_train, {"steps": 4}).result()
    assert again["first_step"] == 4
    assert again["params_sha256"] == first["params_sha256"]
    assert again["optim_sha256"] == first["optim_sha256"]


def test_local_executor_refuses_more_than_one_node(launch_env):
    from hpcflow.errors import SpecError

    with pytest.raises(SpecError, match="nodes: 2 is not allowed with the local executor"):
        Executor(launch_env, cluster="local", nodes=2)
