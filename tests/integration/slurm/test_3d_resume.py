"""The 3D example job (examples/tiny-3d.yaml: 2 nodes x 4 tasks, pp=2 dp=2 tp=2, the tiny
byte-level transformer on the standard library's text) on the real local Slurm cluster.

Preempted (USR1 to the batch shell, as Slurm sends it before a time limit) and requeued by its
own batch script, it must finish with exactly the parameters, optimizer state and every per-step
loss of an uninterrupted run of the same spec. One preemption is enough for that claim: the
supervisor's unit tables cover the requeue count and budget across many attempts, and
tests/integration/launch/test_launch_slurm.py requeues one job twice on this cluster.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from slurm_helpers import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(900)]

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "tiny-3d.yaml"
STEPS = 24
PREEMPTIONS = 1


def example_spec() -> dict:
    """The example spec with fewer steps and no run_dir (each test job gets its own)."""
    spec = yaml.safe_load(EXAMPLE.read_text())
    spec.pop("run_dir")
    args = list(spec["program"]["args"])
    args[args.index("--steps") + 1] = str(STEPS)
    spec["program"]["args"] = args
    spec["checkpoint"] = {"keep": 2, "interval_steps": 0}
    return spec


def tagged(log: str, tag: str) -> list[dict]:
    return [json.loads(m) for m in re.findall(rf"^{tag} (\{{.*\}})$", log, re.M)]


def steps_in_attempt(log: str, attempt: int) -> list[int]:
    """Steps rank 0 logged after the ``attempt``-th start line (0-based)."""
    parts = re.split(r"^hpcflow-start ", log, flags=re.M)
    if len(parts) < attempt + 2:
        return []
    return [json.loads(m)["step"] for m in re.findall(r"^hpcflow-step (\{.*\})$", parts[attempt + 1],
                                                      re.M)]


def test_3d_job_preempted_matches_the_uninterrupted_run(submit_job):
    spec = example_spec()
    assert spec["preemption"]["max_requeues"] >= PREEMPTIONS
    straight = submit_job(spec)
    final = straight.wait_finished(400)
    assert final.state == "COMPLETED" and final.exit_code == 0, straight.log()
    log = straight.log()
    expected = {line["step"]: line["loss"] for line in tagged(log, "hpcflow-step")}
    assert sorted(expected) == list(range(1, STEPS + 1))
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
    assert committed == sorted(set(committed)) and committed[-1] < STEPS, committed
    assert [r["step"] for r in tagged(log, "hpcflow-resume")] == committed
    assert all(r["rng_restored"] for r in tagged(log, "hpcflow-restore"))
    # Every step ran exactly once across the attempts, with the uninterrupted run's loss.
    got = [(line["step"], line["loss"]) for line in tagged(log, "hpcflow-step")]
    assert [s for s, _ in got] == list(range(1, STEPS + 1))
    assert dict(got) == expected
    final_done = tagged(log, "hpcflow-done")[0]
    assert final_done["params_sha256"] == done["params_sha256"]
    assert final_done["optim_sha256"] == done["optim_sha256"]
    # metrics.jsonl in the run directory holds one record per step, appended by every attempt.
    records = [json.loads(x) for x in (job.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(1, STEPS + 1))
    assert {r["restart_count"] for r in records} == set(range(PREEMPTIONS + 1))
