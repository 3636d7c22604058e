"""A node that keeps failing is excluded from the job's steps, on the real local cluster
(docs/protocol.md, "Spare nodes and node exclusion"): with ``resilience.spare_nodes: 1`` a
one-node job holds both nodes; after ``exclude_after_failures`` rank deaths on the node its step
runs on, the next step runs on the other node with the same layout (both ranks on one node), and
training ends with the same weights as an uninterrupted run. Without a spare, the job is
requeued with the node in its ExcNodeList and resumes on the other node."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import pytest
from slurm_helpers import wait_for

from hpcflow import ending_kinds, protocol
from hpcflow.jobs.report_load import load_report
from hpcflow.local_cluster.processes import environ

pytestmark = [pytest.mark.slurm]

STEPS = 40
INTERVAL = 5
TASKS = 2


def train(name: str, **resilience: int) -> dict:
    return {
        "name": name, "nodes": 1, "tasks_per_node": TASKS, "time_limit": "00:10:00",
        "program": {"module": "hpcflow.examples.train",
                    "args": ["--steps", str(STEPS), "--step-time-s", "0.2"]},
        "env": {"OMP_NUM_THREADS": "1"},
        "checkpoint": {"keep": 2, "interval_steps": INTERVAL},
        "resilience": {
            "heartbeat_interval_s": 1, "max_in_job_restarts": 3, "max_failures": 3,
            "timeouts": {"kill_after_s": 0, "startup_s": 120, "step_floor_s": 15, "warmup_steps": 5,
                         "checkpoint_s": 60},
            **resilience,
        },
    }


def tagged(log: str, tag: str) -> list[dict]:
    return [json.loads(m) for m in re.findall(rf"^{tag} (\{{.*\}})$", log, re.M)]


def heartbeat(job, try_: int, rank: int) -> dict | None:  # noqa: ANN001
    path = (protocol.state_dir(job.run_dir) / protocol.heartbeat_name(job.job_id, 0, try_)
            / f"{rank}.json")
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def node_of(pid: int) -> str:
    """The emulated node a rank runs on: srun sets SLURMD_NODENAME in its environment."""
    return environ(pid)["SLURMD_NODENAME"]


def training_rank(job, try_: int, rank: int, past_step: int) -> int:  # noqa: ANN001
    """The pid of ``rank`` in try ``try_`` once it trains past ``past_step``."""
    def ready():  # noqa: ANN202
        beat = heartbeat(job, try_, rank)
        return (beat and beat["section"] == "step" and beat["step"] > past_step
                and beat["pid"])
    return int(wait_for(ready, 240, f"rank {rank} of try {try_} past step {past_step}"))


_REFERENCE: list[dict] = []


def reference_done(submit_job) -> list[dict]:  # noqa: ANN001
    """The done record of an uninterrupted run of ``train``: the same spec and seed give the
    same weights, so the module's tests run it once and share it."""
    if not _REFERENCE:
        reference = submit_job(train("ref"))
        assert reference.wait_finished(300).state == "COMPLETED"
        _REFERENCE.extend(tagged(reference.log(), "hpcflow-done"))
    return _REFERENCE


def test_a_node_that_keeps_failing_is_replaced_by_the_spare_with_the_same_layout(submit_job):
    ref_done = reference_done(submit_job)

    job = submit_job(train("spare", spare_nodes=1, exclude_after_failures=2))
    # try 0 and try 1 run on the same node (one failure is not enough); each loses a rank.
    pid = training_rank(job, 0, 1, 7)
    bad = node_of(pid)
    os.kill(pid, signal.SIGKILL)
    restart = wait_for(lambda: job.event(protocol.EVENT_STEP_RESTART), 120, "the first restart")
    pid = training_rank(job, 1, TASKS - 1, restart["step"] + 2)
    assert node_of(pid) == bad
    os.kill(pid, signal.SIGKILL)

    excluded = wait_for(lambda: job.event(protocol.EVENT_NODE_EXCLUDED), 120,
                        "the node_excluded event")
    assert excluded["node"] == bad and excluded["failures"] == 2
    assert excluded["spare"] is True and excluded["excluded"] == bad
    # try 2: every rank on the other node, the same layout.
    pids = [training_rank(job, 2, rank, 0) for rank in range(TASKS)]
    nodes = {node_of(p) for p in pids}
    assert len(nodes) == 1 and bad not in nodes

    final = job.wait_finished(300)
    assert final.state == "COMPLETED" and final.restarts == 0  # no requeue: the spare sufficed
    events = job.events()
    blamed = [e.get("node") for e in events if e["event"] == "step_end"]
    assert blamed == [bad, bad, None]
    restarts = [e for e in events if e["event"] == protocol.EVENT_STEP_RESTART]
    assert [(r["try"], r["cause"]) for r in restarts] == [(1, "rank_failure"),
                                                           (2, "rank_failure")]
    log = job.log()
    assert {s["world_size"] for s in tagged(log, "hpcflow-start")} == {TASKS}
    assert len(tagged(log, "hpcflow-start")) == 3
    done = tagged(log, "hpcflow-done")
    assert done[0]["step"] == STEPS
    assert done[0]["params_sha256"] == ref_done[0]["params_sha256"]

    rep, _ = load_report(job.job_id)
    assert rep.attempts[0].ending == ending_kinds.ENDING_COMPLETED
    assert [f.kind for f in rep.failures] == [ending_kinds.ENDING_RANK_RESTARTED] * 2
    out = subprocess.run([sys.executable, "-m", "hpcflow", "report", job.job_id],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    table = out.stdout.split("excluded nodes", 1)[1]
    assert re.search(rf"\b{bad}\b.*\b2\b.*a spare node took its place", table), out.stdout


def test_without_a_spare_the_job_is_requeued_without_the_node_and_resumes(submit_job):
    ref_done = reference_done(submit_job)

    job = submit_job(train("nospare", exclude_after_failures=1))
    pid = training_rank(job, 0, 1, 7)
    bad = node_of(pid)
    os.kill(pid, signal.SIGKILL)

    final = job.wait_finished(300)
    assert final.state == "COMPLETED" and final.restarts == 1
    excluded = job.event(protocol.EVENT_NODE_EXCLUDED)
    assert excluded["node"] == bad and excluded["spare"] is False
    requeue = job.event("requeue", restart=0)
    assert requeue["cause"] == protocol.REASON_NODE_EXCLUDED and requeue["excluded"] == bad
    # Slurm kept the exclusion, and the second attempt ran elsewhere.
    show = subprocess.run(["scontrol", "show", "job", "-o", job.job_id], capture_output=True,
                          text=True, check=True).stdout
    assert f"ExcNodeList={bad} " in show
    second = job.event("attempt_start", restart=1)
    assert second["nodelist"] != bad
    assert not [e for e in job.events() if e["event"] == protocol.EVENT_STEP_RESTART]

    log = job.log()
    assert {s["world_size"] for s in tagged(log, "hpcflow-start")} == {TASKS}
    assert [r["step"] for r in tagged(log, "hpcflow-resume")] == [requeue["step"]]
    done = tagged(log, "hpcflow-done")
    assert done[0]["params_sha256"] == ref_done[0]["params_sha256"]
    rep, _ = load_report(job.job_id)
    assert rep.attempts[0].ending == ending_kinds.ENDING_NODE_EXCLUDED
    assert rep.attempts[1].ending == ending_kinds.ENDING_COMPLETED
