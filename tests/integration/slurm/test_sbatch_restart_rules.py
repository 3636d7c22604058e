"""The in-job restart rules of the rendered batch script (docs/protocol.md, "Hangs and in-job
restarts"), run with bash against the fake srun/scontrol of ``test_sbatch_script_runs``: when a
failed step is started again, how often, and when the job ends instead."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import test_sbatch_script_runs as base
from test_sbatch_script_runs import run_script


@pytest.fixture
def harness(tmp_path: Path) -> dict[str, Path]:
    """The fake srun/scontrol/scancel of ``test_sbatch_script_runs`` on PATH."""
    shims = tmp_path / "shims"
    shims.mkdir()
    for name, text in (("srun", base.SRUN), ("scontrol", base.SCONTROL),
                       ("scancel", base.SCANCEL)):
        (shims / name).write_text(text)
        (shims / name).chmod(0o755)
    (tmp_path / "log").mkdir()
    return {"root": tmp_path, "shims": shims, "log": tmp_path / "log"}


# A program that counts its tries and fails; with TEST_SIG it leaves that exception signature
# the way hpcflow.runtime does on its way out.
FAILING = """\
import os, sys
log = os.environ["SHIM_LOG"]
with open(os.path.join(log, "tries"), "a") as f:
    f.write(os.environ["HPCFLOW_STEP_TRY"] + "\\n")
if os.environ.get("TEST_JOIN"):  # as Run.from_env announces a rank that joined the protocol
    joined = os.environ["HPCFLOW_JOINED_DIR"]
    os.makedirs(joined, exist_ok=True)
    with open(os.path.join(joined, os.environ.get("SLURM_PROCID", "0")), "w") as f:
        f.write(f"{os.getpid()} n1\\n")
sig = os.environ.get("TEST_SIG")
if sig:
    folder = os.environ["HPCFLOW_ERROR_DIR"]
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "0.sig"), "w") as f:
        f.write(sig + "\\n")
sys.exit(3)
"""

NO_WATCHDOG = {"watchdog": False, "max_in_job_restarts": 2, "max_failures": 5}


def failing(harness: dict[str, Path], *, committed: bool = True, ledger: list[dict] = (),
            env: dict[str, str] | None = None, slurm_env: dict[str, str] | None = None,
            resilience: dict = NO_WATCHDOG, **changes):
    (harness["root"] / "prog.py").write_text(FAILING)
    run_dir = harness["root"] / "run"
    if committed:
        step = run_dir / "checkpoints" / "step_5"
        step.mkdir(parents=True)
        (step / "hpcflow-commit.json").write_text("{}")
        (run_dir / "checkpoints" / "step_9.tmp").mkdir()  # never counted
    if ledger:
        (run_dir / ".hpcflow").mkdir(parents=True, exist_ok=True)
        (run_dir / ".hpcflow" / "events.jsonl").write_text(
            "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in ledger))
    run = run_script(harness, "fail", run_dir_name="run", env=env, slurm_env=slurm_env,
                     resilience=resilience, **changes)
    tries_file = harness["log"] / "tries"
    tries = tries_file.read_text().split() if tries_file.exists() else []
    return run, tries


def restarts(run) -> list[dict]:
    return [e for e in run.events if e["event"] == "step_restart" and e["job_id"] == "4242"]


def test_failed_step_restarts_in_the_allocation_up_to_the_bound(harness) -> None:
    run, tries = failing(harness)
    assert tries == ["0", "1", "2"]
    assert [(e["try"], e["cause"], e["step"], e["rc"]) for e in restarts(run)] == [
        (1, "rank_failure", 5, 3), (2, "rank_failure", 5, 3)]
    assert run.rc == 3 and run.event("job_end")["reason"] == "failed"
    assert run.requeues == []
    assert "in-job restart 1 of at most 2" in run.stderr


def test_no_committed_checkpoint_no_restart(harness) -> None:
    run, tries = failing(harness, committed=False)
    assert tries == ["0"] and restarts(run) == []
    assert run.event("job_end")["reason"] == "failed"
    assert "no committed checkpoint" in run.stderr


def test_a_joined_program_without_a_checkpoint_starts_again_from_the_start(harness) -> None:
    # the fake ranks leave no exit record, as ranks killed by a signal
    run, tries = failing(harness, committed=False, env={"TEST_JOIN": "1"})
    assert tries == ["0", "1", "2"]
    assert [(e["try"], e["step"]) for e in restarts(run)] == [(1, None), (2, None)]
    assert "from the start (no committed checkpoint yet)" in run.stderr
    assert run.event("job_end")["reason"] == "failed"


def test_the_same_exception_twice_ends_the_job_program_error(harness) -> None:
    run, tries = failing(harness, env={"TEST_SIG": "ValueError@6"})
    assert tries == ["0", "1"]
    errors = [e for e in run.events if e["event"] == "program_error"]
    assert [(e["exception"], e["repeated"], e["try"]) for e in errors] == [
        ("ValueError@6", False, 0), ("ValueError@6", True, 1)]
    assert [e["cause"] for e in restarts(run)] == ["program_error"]
    assert run.rc == 3 and run.event("job_end")["reason"] == "program_error"


def test_failure_budget_spans_the_job_and_ends_it_failure_limit(harness) -> None:
    earlier = {"event": "step_restart", "time": 1, "job_id": "4242", "restart": 0, "try": 1,
               "rc": 1, "cause": "hang", "step": 5}
    other_job = {**earlier, "job_id": "99"}
    run, tries = failing(harness, ledger=[earlier, other_job],
                         resilience={**NO_WATCHDOG, "max_failures": 2})
    assert tries == ["0", "1"]
    assert len(restarts(run)) == 2  # the earlier one and this attempt's one
    assert run.event("job_end")["reason"] == "failure_limit"


def test_an_attempt_past_the_failure_budget_ends_at_once(harness) -> None:
    # Slurm requeued the job twice by itself (node failures): no hpcflow requeue in the ledger.
    run, tries = failing(harness, slurm_env={"SLURM_RESTART_COUNT": "2"},
                         resilience={**NO_WATCHDOG, "max_failures": 1})
    assert tries == [] and run.rc == 1
    assert run.event("job_end")["reason"] == "failure_limit"


def test_preemptions_are_counted_apart_from_node_failures(harness) -> None:
    # Two restarts by Slurm after node failures, none by hpcflow: the preemption budget of one
    # requeue is still whole.
    (harness["root"] / "prog.py").write_text(base.PROGRAM)
    run = run_script(harness, "preempt", usr1=1, slurm_env={"SLURM_RESTART_COUNT": "2"},
                     preemption={"max_requeues": 1}, resilience=NO_WATCHDOG)
    assert run.rc == 0, run.stderr
    assert run.requeues == ["requeue 4242"]
    assert restarts(run) == []
