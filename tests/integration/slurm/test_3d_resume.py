"""The 3D example job (examples/tiny-3d.yaml: 2 nodes x 4 tasks, pp=2 dp=2 tp=2, the tiny
byte-level transformer on the standard library's text) on the real local Slurm cluster.

The uninterrupted run is docs/training.md's command block, run word for word in a scratch copy
of ``examples/`` (``hpcflow local-cluster up``, ``hpcflow submit examples/tiny-3d.yaml
--follow``). The same spec, preempted (USR1 to the batch shell, as Slurm sends it before a time
limit) and requeued by its own batch script, must finish with exactly its parameters, optimizer
state and every per-step loss. One preemption is enough for that claim: the supervisor's unit
tables cover the requeue count and budget across many attempts, and
tests/integration/launch/test_launch_slurm.py requeues one job twice on this cluster.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from slurm_helpers import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(900)]

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "tiny-3d.yaml"
DOC = Path(__file__).resolve().parents[3] / "docs" / "training.md"
PREEMPTIONS = 1


def example_spec() -> dict:
    """The example spec without its run_dir (each test job gets its own)."""
    spec = yaml.safe_load(EXAMPLE.read_text())
    spec.pop("run_dir")
    return spec


def steps_of(spec: dict) -> int:
    args = spec["program"]["args"]
    return int(args[args.index("--steps") + 1])


def run_the_doc_block(folder: Path) -> str:
    """docs/training.md's bash block in ``folder`` (holding a copy of examples/tiny-3d.yaml);
    returns the submitted job's id."""
    [block] = re.findall(r"^```bash\n(.*?)^```", DOC.read_text(), re.M | re.S)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    job_id = ""
    for line in block.strip().splitlines():
        print("+", line)
        proc = subprocess.run(shlex.split(line, comments=True), cwd=folder, env=env,
                              capture_output=True, text=True, timeout=600)
        print(proc.stdout[-3000:], proc.stderr[-3000:])
        assert proc.returncode == 0, line
        job_id = job_id or next(iter(re.findall(r"^submitted job (\d+)", proc.stdout, re.M)), "")
    assert job_id, "the block submitted no job"
    return job_id


def tagged(log: str, tag: str) -> list[dict]:
    return [json.loads(m) for m in re.findall(rf"^{tag} (\{{.*\}})$", log, re.M)]


def steps_in_attempt(log: str, attempt: int) -> list[int]:
    """Steps rank 0 logged after the ``attempt``-th start line (0-based)."""
    parts = re.split(r"^hpcflow-start ", log, flags=re.M)
    if len(parts) < attempt + 2:
        return []
    return [json.loads(m)["step"] for m in re.findall(r"^hpcflow-step (\{.*\})$", parts[attempt + 1],
                                                      re.M)]


def test_3d_job_preempted_matches_the_uninterrupted_run(submit_job, tmp_path):
    spec = example_spec()
    steps = steps_of(spec)
    assert spec["preemption"]["max_requeues"] >= PREEMPTIONS
    folder = tmp_path / "doc"
    (folder / "examples").mkdir(parents=True)
    shutil.copy(EXAMPLE, folder / "examples" / EXAMPLE.name)
    straight_id = run_the_doc_block(folder)  # --follow returned 0: the job COMPLETED
    log = (folder / "runs" / "tiny-3d" / f"tiny-3d-{straight_id}.out").read_text()
    expected = {line["step"]: line["loss"] for line in tagged(log, "hpcflow-step")}
    assert sorted(expected) == list(range(1, steps + 1))
    done = tagged(log, "hpcflow-done")[0]
    assert tagged(log, "hpcflow-layout")[0]["layout"] == {"pp": 2, "dp": 2, "tp": 2}

    job = submit_job(spec)
    committed: list[int] = []
    for attempt in range(PREEMPTIONS):
        # Stop a few steps into each attempt, so every preemption lands at a different step.
        wait_for(lambda a=attempt: len(steps_in_attempt(job.log(), a)) >= 3, 300,
                 f"three steps of attempt {attempt}")
        job.signal_batch("USR1")
        requeue = wait_for(lambda a=attempt: job.event("requeue", restart=a), 180,
                           f"the requeue event of attempt {attempt}")
        committed.append(int(requeue["step"]))
    final = job.wait_finished(400)
    log = job.log()
    assert final.state == "COMPLETED" and final.exit_code == 0, log
    assert final.restarts == PREEMPTIONS and final.attempts == PREEMPTIONS + 1
    assert committed == sorted(set(committed)) and committed[-1] < steps, committed
    assert [r["step"] for r in tagged(log, "hpcflow-resume")] == committed
    assert all(r["rng_restored"] for r in tagged(log, "hpcflow-restore"))
    # Every step ran exactly once across the attempts, with the uninterrupted run's loss.
    got = [(line["step"], line["loss"]) for line in tagged(log, "hpcflow-step")]
    assert [s for s, _ in got] == list(range(1, steps + 1))
    assert dict(got) == expected
    final_done = tagged(log, "hpcflow-done")[0]
    assert final_done["params_sha256"] == done["params_sha256"]
    assert final_done["optim_sha256"] == done["optim_sha256"]
    # metrics.jsonl in the run directory holds one record per step, appended by every attempt.
    records = [json.loads(x) for x in (job.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(1, steps + 1))
    assert {r["restart_count"] for r in records} == set(range(PREEMPTIONS + 1))
