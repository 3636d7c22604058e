"""Preempt, commit, resume: four real gloo ranks laid out as a 2-node x 2-task Slurm step.

The resume test follows torchtitan's pattern (a full run against one stopped and resumed) and is
stricter: the final parameters must have the same sha256 and every per-step loss must be equal.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from runtime_launch import WORLD_SIZE, ForkSrun, job_id_with_free_port, wait_for_line

pytestmark = [pytest.mark.dist, pytest.mark.timeout(180)]

STEPS = 10
ARGS = ["--steps", str(STEPS), "--batch-size", "8", "--seed", "3"]
EXIT_PREEMPTED = 75


@pytest.fixture(scope="module")
def srun():
    launcher = ForkSrun()
    yield launcher
    launcher.close()


@pytest.fixture(scope="module")
def baseline(srun, tmp_path_factory) -> dict:
    """The uninterrupted run: per-step losses and the final digest."""
    step = srun.start(tmp_path_factory.mktemp("baseline"), ARGS, job_id=job_id_with_free_port())
    assert srun.wait(step) == [0] * WORLD_SIZE, step.dump()
    done = step.rank0_lines("hpcflow-done")
    assert len(done) == 1, step.dump()
    return {
        "losses": {line["step"]: line["loss"] for line in step.rank0_lines("hpcflow-step")},
        "digest": done[0]["params_sha256"],
    }


def hpcflow_env(run_dir: Path, job_id: str, restart: int, **overrides: str) -> dict[str, str]:
    """The HPCFLOW_* variables the batch script exports for one attempt (docs/protocol.md)."""
    env = {
        "HPCFLOW_RUN_DIR": str(run_dir),
        "HPCFLOW_CHECKPOINT_DIR": str(run_dir / "checkpoints"),
        "HPCFLOW_CHECKPOINT_INTERVAL": "0",
        "HPCFLOW_CHECKPOINT_KEEP": "2",
        "HPCFLOW_PREEMPT_FLAG": str(run_dir / ".hpcflow" / f"preempt-{job_id}-{restart}.flag"),
        "HPCFLOW_PREEMPT_COMMITTED": str(
            run_dir / ".hpcflow" / f"committed-{job_id}-{restart}.json"
        ),
    }
    env.update(overrides)
    return env


def test_uninterrupted_run_logs_every_step_and_a_digest(baseline):
    assert sorted(baseline["losses"]) == list(range(1, STEPS + 1))
    assert all(loss > 0 for loss in baseline["losses"].values())
    assert len(baseline["digest"]) == 64


def test_torchrun_variables_give_the_same_run(srun, baseline, tmp_path):
    step = srun.start(tmp_path, ARGS, job_id=job_id_with_free_port(), torchrun=True)
    assert srun.wait(step) == [0] * WORLD_SIZE, step.dump()
    assert step.rank0_lines("hpcflow-start")[0]["launcher"] == "torchrun"
    assert step.rank0_lines("hpcflow-done")[0]["params_sha256"] == baseline["digest"]


def test_usr1_to_one_rank_stops_all_at_one_step_and_resume_is_bit_exact(
    srun, baseline, tmp_path
):
    run_dir = tmp_path / "run"
    job_id = job_id_with_free_port()
    # First attempt: slow steps; USR1 reaches rank 3 only, the all-reduce must stop every rank.
    step = srun.start(
        tmp_path / "logs",
        [*ARGS, "--step-time-s", "0.5"],
        job_id=job_id,
        extra_env=hpcflow_env(run_dir, job_id, 0, HPCFLOW_CHECKPOINT_INTERVAL="2"),
    )
    wait_for_line(step, "hpcflow-step", lambda line: line["step"] >= 3, timeout_s=60)
    step.signal(signal.SIGUSR1, ranks=[3])
    assert srun.wait(step) == [EXIT_PREEMPTED] * WORLD_SIZE, step.dump()
    stopped = step.rank0_lines("hpcflow-preempted")
    assert len(stopped) == 1, step.dump()
    stop_step = stopped[0]["step"]
    assert step.rank0_lines("hpcflow-checkpoint")[-1]["reason"] == "preempt"
    assert 3 <= stop_step < STEPS, step.dump()
    committed = json.loads((run_dir / ".hpcflow" / f"committed-{job_id}-0.json").read_text())
    assert committed["step"] == stop_step
    ckpt_dir = run_dir / "checkpoints"
    record = json.loads((ckpt_dir / f"step_{stop_step}" / "hpcflow-commit.json").read_text())
    assert record["step"] == stop_step and record["world_size"] == WORLD_SIZE
    assert {entry["path"] for entry in record["files"]} >= {".metadata", "__0_0.distcp"}
    assert not list(ckpt_dir.glob("*.tmp")), "a .tmp directory survived a committed save"
    kept = sorted(p.name for p in ckpt_dir.iterdir())
    assert len(kept) <= 2, f"keep=2 but found {kept}"

    # Second attempt, as Slurm requeues it: same job id, SLURM_RESTART_COUNT=1.
    step = srun.start(
        tmp_path / "logs", ARGS, job_id=job_id, restart=1,
        extra_env=hpcflow_env(run_dir, job_id, 1),
    )
    assert srun.wait(step) == [0] * WORLD_SIZE, step.dump()
    assert step.rank0_lines("hpcflow-start") == [{
        "world_size": WORLD_SIZE, "launcher": "slurm", "backend": "gloo", "job_id": job_id,
        "restart_count": 1,
    }]
    assert step.rank0_lines("hpcflow-resume") == [{"step": stop_step}], step.dump()
    resumed = {line["step"]: line["loss"] for line in step.rank0_lines("hpcflow-step")}
    assert sorted(resumed) == list(range(stop_step + 1, STEPS + 1)), step.dump()
    assert resumed == {s: baseline["losses"][s] for s in resumed}
    assert step.rank0_lines("hpcflow-done")[0]["params_sha256"] == baseline["digest"]


def test_flag_file_stops_and_partial_checkpoints_are_ignored_and_removed(
    srun, baseline, tmp_path
):
    run_dir = tmp_path / "run"
    job_id = job_id_with_free_port()
    env0 = hpcflow_env(run_dir, job_id, 0)
    flag = Path(env0["HPCFLOW_PREEMPT_FLAG"])
    flag.parent.mkdir(parents=True)
    flag.write_text("")  # the trap fired before the first step boundary
    step = srun.start(tmp_path / "logs", ARGS, job_id=job_id, extra_env=env0)
    assert srun.wait(step) == [EXIT_PREEMPTED] * WORLD_SIZE, step.dump()
    assert step.rank0_lines("hpcflow-preempted") == [{"step": 1}], step.dump()

    # Leftovers a crash could leave: newer than the committed step, so they would win if loaded.
    ckpt_dir = run_dir / "checkpoints"
    (ckpt_dir / "step_7.tmp").mkdir()
    (ckpt_dir / "step_7.tmp" / "__0_0.distcp").write_bytes(b"half a shard")
    (ckpt_dir / "step_8").mkdir()  # renamed but no record: never committed by hpcflow
    (ckpt_dir / "step_8" / ".metadata").write_bytes(b"")
    step = srun.start(
        tmp_path / "logs", ARGS, job_id=job_id, restart=1,
        extra_env=hpcflow_env(run_dir, job_id, 1),
    )
    assert srun.wait(step) == [0] * WORLD_SIZE, step.dump()
    assert step.rank0_lines("hpcflow-resume") == [{"step": 1}], step.dump()
    assert not (ckpt_dir / "step_7.tmp").exists()
    assert not (ckpt_dir / "step_8").exists()
    assert step.rank0_lines("hpcflow-done")[0]["params_sha256"] == baseline["digest"]


def test_stop_request_without_checkpoint_dir_fails_on_every_rank(srun, tmp_path):
    flag = tmp_path / "preempt.flag"
    flag.write_text("")
    step = srun.start(
        tmp_path / "logs", ARGS, job_id=job_id_with_free_port(),
        extra_env={"HPCFLOW_PREEMPT_FLAG": str(flag)},
    )
    assert srun.wait(step) == [1] * WORLD_SIZE, step.dump()
    assert "no checkpoint directory is set" in step.logs[2].read_text()


def test_unwritable_checkpoint_dir_fails_every_rank_with_checkpoint_error(srun, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the checkpoint directory should be")
    step = srun.start(
        tmp_path / "logs", ARGS, job_id=job_id_with_free_port(),
        extra_env={
            "HPCFLOW_CHECKPOINT_DIR": str(blocker / "checkpoints"),
            "HPCFLOW_CHECKPOINT_INTERVAL": "2",
        },
    )
    assert srun.wait(step) == [5] * WORLD_SIZE, step.dump()
    assert "prepare checkpoint of step 2" in step.logs[3].read_text(), step.dump()
    assert step.rank0_lines("hpcflow-checkpoint") == []


def test_one_ranks_damaged_shard_makes_every_rank_resume_from_the_previous_checkpoint(
    srun, baseline, tmp_path
):
    """A flipped byte in rank 2's file of the newest checkpoint: rank 2 finds it while it
    reads, DCP tells every rank, and all four load the previous checkpoint and finish the
    run bit-exact."""
    run_dir = tmp_path / "run"
    job_id = job_id_with_free_port()
    step = srun.start(tmp_path / "logs", ARGS, job_id=job_id,
                      extra_env=hpcflow_env(run_dir, job_id, 0, HPCFLOW_CHECKPOINT_INTERVAL="4"))
    assert srun.wait(step) == [0] * WORLD_SIZE, step.dump()
    ckpt_dir = run_dir / "checkpoints"
    steps = sorted(int(p.name.split("_")[1]) for p in ckpt_dir.iterdir())
    assert len(steps) == 2, steps
    previous, newest = steps
    shard = ckpt_dir / f"step_{newest}" / "__2_0.distcp"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x01
    shard.write_bytes(bytes(data))

    step = srun.start(tmp_path / "logs", ARGS, job_id=job_id, restart=1,
                      extra_env=hpcflow_env(run_dir, job_id, 1, HPCFLOW_CHECKPOINT_INTERVAL="4"))
    assert srun.wait(step) == [0] * WORLD_SIZE, step.dump()
    assert step.rank0_lines("hpcflow-resume") == [{"step": previous}], step.dump()
    log = step.logs[0].read_text()
    assert f"step_{newest} is ignored" in log and "__2_0.distcp" in log, step.dump()
    assert (ckpt_dir / f"step_{newest}.damaged").is_dir()
    assert step.rank0_lines("hpcflow-done")[0]["params_sha256"] == baseline["digest"]
