"""The rendered script on the real local Slurm cluster: sbatch reads its #SBATCH lines as meant
(hostile run directory included) and the job runs the program with its arguments intact."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from hpcflow.slurm.client import SlurmClient
from hpcflow.slurm.render import render_sbatch
from hpcflow.spec.job import JobSpec

pytestmark = pytest.mark.slurm

ARGS = ["two words", "it's", 'say "hi"', "$(touch pwned)", "`touch pwned2`", "a\nb", "#x"]
FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}


@pytest.fixture(scope="module")
def slurm(local_cluster) -> SlurmClient:  # noqa: ANN001 - the session's cluster, brought up once
    return SlurmClient()


def test_rendered_job_runs_with_a_hostile_run_dir(slurm: SlurmClient, tmp_path: Path) -> None:
    run_dir = tmp_path / "run dir it's $(x) `y` #z"
    run_dir.mkdir()
    spec = JobSpec.model_validate(
        {
            "name": "render-check",
            "time_limit": "00:05:00",
            "run_dir": str(run_dir),
            "program": {
                "argv": [sys.executable, "-c", "import json,sys; print(json.dumps(sys.argv[1:]))"]
                + ARGS
            },
            "env": {"ODD_VALUE": "x $(y) 'z'"},
        }
    )
    script = run_dir / "job.sbatch"
    script.write_text(render_sbatch(spec))
    job_id = slurm.submit(script, chdir=run_dir)
    print(f"submitted {job_id}")
    record = slurm.show_job(job_id)
    assert record is not None
    assert record["JobName"] == "render-check"
    assert record["StdOut"] == f"{run_dir}/render-check-{job_id}.out"
    assert record["Requeue"] == "1"
    assert record["TimeLimit"] == "00:05:00"

    deadline = time.monotonic() + 180
    state = ""
    while time.monotonic() < deadline:
        entries = slurm.queue([job_id])
        state = entries[0].state if entries else "GONE"
        if state in FINAL or state == "GONE":
            break
        time.sleep(1)
    log = run_dir / f"render-check-{job_id}.out"
    print(log.read_text() if log.exists() else f"no log at {log}")
    assert state == "COMPLETED"
    text = log.read_text()
    assert json.dumps(ARGS) in text
    ledger = (run_dir / ".hpcflow" / "events.jsonl").read_text()
    events = [json.loads(line) for line in ledger.splitlines()]
    assert [e["event"] for e in events] == ["attempt_start", "step_end", "job_end"]
    assert events[-1]["reason"] == "completed" and events[-1]["job_id"] == job_id
    assert not list(run_dir.glob("pwned*")) and not list(tmp_path.glob("pwned*"))


PREEMPTIBLE = """\
import json, os, signal, sys, time
got = []
signal.signal(signal.SIGUSR1, lambda *_: got.append(1))
print("ready", flush=True)
while not got and not os.path.exists(os.environ["HPCFLOW_PREEMPT_FLAG"]):
    time.sleep(0.05)
if int(os.environ.get("SLURM_PROCID", "0")) == 0:
    path = os.environ["HPCFLOW_PREEMPT_COMMITTED"]
    with open(path + ".tmp", "w") as f:
        json.dump({"step": 5, "time": time.time()}, f)
    os.replace(path + ".tmp", path)
time.sleep(0.5)  # every rank waits for the commit before exiting (srun --kill-on-bad-exit)
sys.exit(75)
"""


def test_usr1_to_the_batch_shell_checkpoints_and_requeues(
    slurm: SlurmClient, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (tmp_path / "prog.py").write_text(PREEMPTIBLE)
    spec = JobSpec.model_validate(
        {
            "name": "render-preempt",
            "nodes": 2,
            "time_limit": "00:05:00",
            "run_dir": str(run_dir),
            "program": {"argv": [sys.executable, str(tmp_path / "prog.py")]},
        }
    )
    script = run_dir / "job.sbatch"
    script.write_text(render_sbatch(spec))
    job_id = slurm.submit(script, chdir=run_dir)
    log = run_dir / f"render-preempt-{job_id}.out"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if log.exists() and log.read_text().count("ready") == 2:
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"the ranks never started; log:\n{log.read_text() if log.exists() else ''}")
        slurm.cancel(job_id, signal="USR1", batch_only=True)
        ledger = run_dir / ".hpcflow" / "events.jsonl"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            entries = slurm.queue([job_id])
            if entries and entries[0].restart_count == 1:
                break
            time.sleep(0.5)
        # Read after the requeue is seen: the ledger's requeue line is written before it.
        events = [json.loads(x) for x in ledger.read_text().splitlines()]
        print(log.read_text())
        assert [e["event"] for e in events][:4] == ["attempt_start", "signal", "step_end", "requeue"]
        # The step's status is 75, or a kill status when srun's --kill-on-bad-exit reaps the
        # last ranks first; the requeue rests on the commit record either way.
        assert events[2]["rc"] != 0 and events[3]["step"] == 5
        assert entries and entries[0].restart_count == 1
        assert entries[0].state in {"PENDING", "REQUEUED", "RUNNING", "CONFIGURING"}
    finally:
        slurm.cancel(job_id)
