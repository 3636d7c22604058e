"""docs/your-training-loop.md: outside a Slurm job, examples/my_loop.py runs as one process
and still reacts to USR1. One real process each (no Slurm, no second rank): the signal is sent
once the loop has reported its third step, the way the batch script forwards it in a job."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from hpcflow.protocol import EXIT_PREEMPTED, TAG_CHECKPOINT, TAG_PREEMPTED, TAG_RESUME, TAG_STEP
from hpcflow.runtime.commit import read_commit_record, step_dir

LOOP = Path(__file__).resolve().parents[3] / "examples" / "my_loop.py"
REPO = LOOP.parents[1]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "HPCFLOW_", "RANK", "WORLD_SIZE", "LOCAL_"))}
    return {**env, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", **extra}


def _tagged(lines: list[str], tag: str) -> list[dict]:
    return [json.loads(ln[len(tag) + 1:]) for ln in lines if ln.startswith(tag + " ")]


def run_and_signal_at_step_3(env: dict[str, str]) -> tuple[int, list[str], str]:
    """Run the loop for (far) more steps than it gets to; USR1 once step 3 is reported."""
    proc = subprocess.Popen([sys.executable, str(LOOP), "--steps", "1000000"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith(TAG_STEP + " ") and len(_tagged(lines, TAG_STEP)) == 3:
                proc.send_signal(signal.SIGUSR1)
            if len(lines) > 10_000:
                break  # never stopped: the asserts below say so
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, lines, err


def test_usr1_outside_slurm_commits_the_current_step_exits_75_and_a_rerun_resumes(tmp_path):
    ckpt = tmp_path / "ckpt"
    rc, lines, err = run_and_signal_at_step_3(_env(HPCFLOW_CHECKPOINT_DIR=str(ckpt)))
    assert rc == EXIT_PREEMPTED, err[-2000:]
    steps = [r["step"] for r in _tagged(lines, TAG_STEP)]
    # It stops at the first step boundary after the signal: step 3 or, if step 4 was already
    # under way when USR1 came, step 4; never a step more.
    stopped = steps[-1]
    assert steps == list(range(1, stopped + 1)) and stopped in (3, 4), steps
    assert [r["step"] for r in _tagged(lines, TAG_CHECKPOINT)] == [stopped]
    assert _tagged(lines, TAG_PREEMPTED), lines[-5:]
    assert read_commit_record(step_dir(ckpt, stopped)) is not None  # committed, not partial

    again = subprocess.run([sys.executable, str(LOOP), "--steps", str(stopped + 2)],
                           env=_env(HPCFLOW_CHECKPOINT_DIR=str(ckpt)), capture_output=True,
                           text=True, timeout=120)
    assert again.returncode == 0, again.stderr[-2000:]
    out = again.stdout.splitlines()
    assert _tagged(out, TAG_RESUME) == [{"step": stopped}]
    assert [r["step"] for r in _tagged(out, TAG_STEP)] == [stopped + 1, stopped + 2]


def test_usr1_outside_slurm_without_a_checkpoint_directory_stops_with_the_reason(tmp_path):
    rc, lines, err = run_and_signal_at_step_3(_env())
    assert rc == 1
    assert "asked to stop for preemption, but no checkpoint directory is set" in err
    assert len(_tagged(lines, TAG_STEP)) in (3, 4)
