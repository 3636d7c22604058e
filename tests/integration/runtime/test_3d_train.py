"""The byte-level transformer on a (pp=2, dp=2, tp=2) mesh: eight real gloo ranks laid out as a
2-node x 4-task Slurm step, trained on the standard library's source text.

Resume is tested as a pair of runs (torchtitan's pattern, stricter): stopped and resumed on the
same layout, the final parameters have the same sha256 and every later loss is equal. The same
checkpoint then resumes on other layouts through DCP resharding: dp=2 -> dp=1 (one node, four
ranks), and pp=2, tp=2 -> pp=1, tp=1 with dp=4.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from runtime_launch import ForkSrun, job_id_with_free_port, wait_for_line

pytestmark = [pytest.mark.dist, pytest.mark.timeout(240)]

STEPS = 8
EXIT_PREEMPTED = 75
LM = [
    "--model", "lm", "--model-size", "tiny", "--seq-len", "64", "--global-batch-size", "8",
    "--steps", str(STEPS), "--seed", "5", "--data-max-bytes", "200000",
]
ARGS_3D = [*LM, "--pp", "2", "--dp", "2", "--tp", "2"]
NODES, TASKS = 2, 4


@pytest.fixture(scope="module")
def srun():
    launcher = ForkSrun()
    yield launcher
    launcher.close()


def hpcflow_env(run_dir: Path, job_id: str, restart: int) -> dict[str, str]:
    """The HPCFLOW_* variables the batch script exports for one attempt (docs/protocol.md)."""
    return {
        "HPCFLOW_RUN_DIR": str(run_dir),
        "HPCFLOW_CHECKPOINT_KEEP": "2",
        "HPCFLOW_PREEMPT_FLAG": str(run_dir / ".hpcflow" / f"preempt-{job_id}-{restart}.flag"),
        "HPCFLOW_PREEMPT_COMMITTED": str(run_dir / ".hpcflow" / f"committed-{job_id}-{restart}.json"),
    }


def losses(step) -> dict[int, float]:
    return {line["step"]: line["loss"] for line in step.rank0_lines("hpcflow-step")}


@pytest.fixture(scope="module")
def baseline(srun, tmp_path_factory) -> dict:
    """The uninterrupted 3D run: per-step losses, the digest and its metrics file."""
    run_dir = tmp_path_factory.mktemp("baseline")
    job_id = job_id_with_free_port()
    step = srun.start(run_dir / "logs", ARGS_3D, job_id=job_id, nodes=NODES, tasks_per_node=TASKS,
                      extra_env=hpcflow_env(run_dir, job_id, 0))
    assert srun.wait(step, timeout_s=180) == [0] * 8, step.dump()
    return {
        "losses": losses(step),
        "digest": step.rank0_lines("hpcflow-done")[0]["params_sha256"],
        "optim": step.rank0_lines("hpcflow-done")[0]["optim_sha256"],
        "layout": step.rank0_lines("hpcflow-layout")[0],
        "metrics": [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()],
    }


@pytest.fixture(scope="module")
def stopped(srun, tmp_path_factory) -> dict:
    """The same run with background interval checkpoints, stopped by the flag file after step 3:
    run dir, job id, committed step and a copy of its checkpoints taken before any resume."""
    run_dir = tmp_path_factory.mktemp("stopped")
    job_id = job_id_with_free_port()
    # Background interval saves every 2 steps; the preemption save must wait for them.
    env = {**hpcflow_env(run_dir, job_id, 0), "HPCFLOW_CHECKPOINT_INTERVAL": "2"}
    step = srun.start(run_dir / "logs", [*ARGS_3D, "--step-time-s", "0.3", "--async-checkpoint"],
                      job_id=job_id, nodes=NODES, tasks_per_node=TASKS, extra_env=env)
    wait_for_line(step, "hpcflow-step", lambda p: p["step"] >= 3, 150)
    flag = Path(env["HPCFLOW_PREEMPT_FLAG"])
    flag.parent.mkdir(parents=True, exist_ok=True)
    flag.touch()
    assert srun.wait(step, timeout_s=120) == [EXIT_PREEMPTED] * 8, step.dump()
    committed = step.rank0_lines("hpcflow-preempted")[0]["step"]
    assert 3 <= committed < STEPS
    # keep=2: the last background interval save and the preemption save.
    kept = sorted(int(p.name.split("_")[1]) for p in (run_dir / "checkpoints").iterdir())
    assert kept == [2 * ((committed - 1) // 2), committed], kept
    snapshot = tmp_path_factory.mktemp("snapshot") / "checkpoints"
    shutil.copytree(run_dir / "checkpoints", snapshot)
    return {"run_dir": run_dir, "job_id": job_id, "step": committed, "snapshot": snapshot,
            "losses": losses(step)}


def resume_elsewhere(srun, stopped, tmp_path: Path, args: list[str], nodes: int, tasks: int):
    """Resume a copy of the stopped run's checkpoint with ``args`` on ``nodes x tasks`` ranks."""
    run_dir = tmp_path / "run"
    shutil.copytree(stopped["snapshot"], run_dir / "checkpoints")
    job_id = job_id_with_free_port()
    step = srun.start(tmp_path / "logs", args, job_id=job_id, nodes=nodes, tasks_per_node=tasks,
                      extra_env=hpcflow_env(run_dir, job_id, 0))
    assert srun.wait(step, timeout_s=150) == [0] * (nodes * tasks), step.dump()
    return step


def test_3d_run_reports_layout_metrics_and_a_falling_loss(baseline):
    layout = baseline["layout"]
    assert layout["layout"] == {"pp": 2, "dp": 2, "tp": 2}
    assert layout["data"] == "stdlib" and layout["data_files"] >= 1
    assert layout["microbatches"] == 2 and layout["schedule"] == "gpipe"
    curve = baseline["losses"]
    assert sorted(curve) == list(range(1, STEPS + 1))
    assert all(math.isfinite(v) for v in curve.values())
    # Byte-level cross-entropy starts near ln(256) = 5.55 and must fall on real text.
    assert abs(curve[1] - math.log(256)) < 0.3
    assert curve[STEPS] < curve[1] - 0.3
    records = baseline["metrics"]
    assert [r["step"] for r in records] == list(range(1, STEPS + 1))
    assert all(r["tokens"] == 8 * 64 and r["tokens_per_s"] > 0 for r in records)
    assert all(r["mfu"] is None and r["tflops_per_rank"] > 0 for r in records)  # CPU: no peak
    assert [r["loss"] for r in records] == [curve[s] for s in range(1, STEPS + 1)]


def test_stop_and_resume_on_the_same_layout_is_bit_exact(srun, baseline, stopped):
    run_dir, job_id, committed = stopped["run_dir"], stopped["job_id"], stopped["step"]
    assert {s: stopped["losses"][s] for s in range(1, committed + 1)} == {
        s: baseline["losses"][s] for s in range(1, committed + 1)
    }
    step = srun.start(run_dir / "logs", ARGS_3D, job_id=job_id, restart=1, nodes=NODES,
                      tasks_per_node=TASKS, extra_env=hpcflow_env(run_dir, job_id, 1))
    assert srun.wait(step, timeout_s=180) == [0] * 8, step.dump()
    assert step.rank0_lines("hpcflow-resume") == [{"step": committed}]
    resume = step.rank0_lines("hpcflow-restore")[0]
    assert resume["step"] == committed and resume["rng_restored"] is True
    resumed = losses(step)
    assert sorted(resumed) == list(range(committed + 1, STEPS + 1))
    assert resumed == {s: baseline["losses"][s] for s in resumed}
    done = step.rank0_lines("hpcflow-done")[0]
    assert done["params_sha256"] == baseline["digest"]
    assert done["optim_sha256"] == baseline["optim"]  # Adam moments and step counts too


def test_resume_at_dp1_reshards_and_continues_the_curve(srun, baseline, stopped, tmp_path):
    args = [*LM, "--pp", "2", "--dp", "1", "--tp", "2"]
    step = resume_elsewhere(srun, stopped, tmp_path, args, nodes=1, tasks=4)
    assert_continues(step, baseline, stopped["step"], {"pp": 2, "dp": 1, "tp": 2})


def test_resume_at_pp1_tp1_dp4_reshards_and_continues_the_curve(srun, baseline, stopped, tmp_path):
    """pp and tp both change (2 -> 1) and dp grows (2 -> 4): every parameter moves."""
    args = [*LM, "--pp", "1", "--dp", "4", "--tp", "1"]
    step = resume_elsewhere(srun, stopped, tmp_path, args, nodes=1, tasks=4)
    assert_continues(step, baseline, stopped["step"], {"pp": 1, "dp": 4, "tp": 1})


def assert_continues(step, baseline, committed: int, layout: dict) -> None:
    """Same step, same data, same weights on another layout: the loss picks up where the saved
    run was (not at a fresh model's ln 256); only dropout masks and reduction order differ."""
    assert step.rank0_lines("hpcflow-resume") == [{"step": committed}]
    resume = step.rank0_lines("hpcflow-restore")[0]
    assert resume["layout"] == layout and resume["rng_restored"] is False
    assert resume["saved_layout"] == {"pp": 2, "dp": 2, "tp": 2}
    resumed = losses(step)
    assert sorted(resumed) == list(range(committed + 1, STEPS + 1))
    assert all(math.isfinite(v) for v in resumed.values())
    expected = baseline["losses"]
    first = committed + 1
    assert abs(resumed[first] - expected[first]) < 0.25 * (expected[1] - expected[first]), (
        resumed, expected)
    assert len(step.rank0_lines("hpcflow-done")[0]["params_sha256"]) == 64
