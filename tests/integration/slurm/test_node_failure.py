"""A node dies under a running job, on the real local cluster: Slurm ends the attempt with
NODE_FAIL and requeues the job, the job resumes from its last committed checkpoint on the node
once it is back, and ``hpcflow report`` names the node failure and the steps it lost
(docs/protocol.md, "Ending kinds").

A node's death is emulated on the multiple-slurmd cluster: ``kill -9`` of that node's slurmd,
then of its slurmstepd processes (found by their sockets in the node's own spool folder,
``<SlurmdSpoolDir>/<node>_<job>.<step>``) and of every process of the job that runs "on" it
(``SLURMD_NODENAME=<node>`` in /proc/<pid>/environ: the batch script, srun, the ranks, the
watchdog). Killing slurmd alone would leave the step and its ranks running, which a dead node
never does. slurmctld sets the node DOWN once it has not answered for SlurmdTimeout (60 s here,
pings every 20 s; slurm.conf(5)); the slurmd is then started again through
``hpcflow.local_cluster.manager.start_node`` and the node returns to service when it registers
(``ReturnToService=2``), without an ``scontrol update ... State=RESUME``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from slurm_helpers import wait_for

from hpcflow import ending_kinds, protocol
from hpcflow.jobs.joblog import split_log
from hpcflow.jobs.report_load import load_report
from hpcflow.local_cluster import manager
from hpcflow.local_cluster import processes as procs
from hpcflow.local_cluster.daemons import query_nodes

pytestmark = [pytest.mark.slurm, pytest.mark.cluster_alone]

STEPS = 60
INTERVAL = 5
RESILIENCE = {
    "heartbeat_interval_s": 1, "max_in_job_restarts": 2, "max_failures": 3,
    "timeouts": {"startup_s": 120, "step_floor_s": 8, "warmup_steps": 5, "checkpoint_s": 60,
                 "kill_after_s": 0},
}


def train(name: str) -> dict:
    return {
        "name": name, "nodes": 2, "tasks_per_node": 1, "time_limit": "00:10:00",
        "program": {"module": "hpcflow.examples.train",
                    "args": ["--steps", str(STEPS), "--step-time-s", "0.2"]},
        "env": {"OMP_NUM_THREADS": "1"},
        "checkpoint": {"keep": 2, "interval_steps": INTERVAL},
        "resilience": RESILIENCE,
    }


def tagged(log: str, tag: str) -> list[dict]:
    return [json.loads(m) for m in re.findall(rf"^{tag} (\{{.*\}})$", log, re.M)]


def pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def stepd_pids(spool: Path, node: str, job_id: str) -> set[int]:
    """The slurmstepd processes of ``job_id`` on ``node``: those holding a socket bound under
    the node's spool folder as ``<node>_<job>.<step>`` (/proc/net/unix, proc(5))."""
    prefix = f"{spool}/{node}_{job_id}."
    inodes = set()
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 8 and fields[7].startswith(prefix):
            inodes.add(f"socket:[{fields[6]}]")
    out = set()
    for pid in pids():
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() != "slurmstepd":
                continue
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                    out.add(pid)
                    break
            except OSError:
                continue
    return out


def kill_node(cfg, node: str, job_id: str) -> dict[str, list[int]]:  # noqa: ANN001
    """What a node's death does to its processes: slurmd first (so nothing reports the rest),
    then the job's slurmstepds and everything the job runs there, until nothing is left."""
    slurmd = procs.load_records(manager.records_path(cfg))[f"slurmd:{node}"]
    assert procs.is_alive(slurmd)
    spool = cfg.state_dir / "spool" / f"slurmd.{node}"
    stepds = stepd_pids(spool, node, job_id)
    assert stepds, f"no slurmstepd of job {job_id} found under {spool}"
    os.kill(slurmd.pid, signal.SIGKILL)
    killed: dict[str, list[int]] = {"slurmd": [slurmd.pid], "slurmstepd": sorted(stepds),
                                    "processes": []}
    for pid in stepds:
        os.kill(pid, signal.SIGKILL)
    for _ in range(20):  # a process may fork while we look: look again until none is left
        left = set(procs.job_processes(job_id, node=node))
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
                killed["processes"].append(pid)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    assert not set(procs.job_processes(job_id, node=node))
    print(f"killed on {node}: {killed}")
    return killed


def node_state(cfg, node: str) -> str:  # noqa: ANN001
    return next((n.state for n in query_nodes(cfg) if n.name == node), "")


def show_job(job_id: str) -> dict[str, str]:
    out = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True,
                         text=True, check=False).stdout
    return dict(w.split("=", 1) for w in out.split() if "=" in w)


@pytest.fixture
def healthy_at_the_end(local_cluster):  # noqa: ANN001, ANN201
    """Whatever happens in the test, every daemon runs and both nodes are idle afterwards."""
    jobs: list[str] = []
    yield jobs
    for job_id in jobs:
        subprocess.run(["scancel", job_id], capture_output=True, check=False)
    manager.up(local_cluster, install=False)  # restarts a dead slurmd, resumes a DOWN node
    wait_for(lambda: all(n.state == "idle" for n in query_nodes(local_cluster))
             and len(query_nodes(local_cluster)) == len(local_cluster.node_names),
             120, "both nodes idle")


def test_a_dead_node_requeues_the_job_which_resumes_and_reports_the_lost_steps(
        submit_job, local_cluster, healthy_at_the_end):
    # The uninterrupted run first: the node's death below would also hit a job beside it.
    reference = submit_job(train("ref"))
    assert reference.wait_finished(240).state == "COMPLETED"
    ref_done = tagged(reference.log(), "hpcflow-done")

    job = submit_job(train("node"))
    healthy_at_the_end.append(job.job_id)
    ckpt = Path(job.run_dir) / "checkpoints"
    # Between two interval checkpoints, so that the death costs steps.
    wait_for(lambda: (steps := tagged(job.log(), "hpcflow-step")) and steps[-1]["step"] >= 17
             and steps[-1]["step"] % INTERVAL in (1, 2, 3)
             and any((d / protocol.COMMIT_RECORD).exists() for d in ckpt.glob("step_*")),
             240, "training past step 17 with a committed checkpoint", poll_s=0.1)
    node = show_job(job.job_id)["BatchHost"]
    assert node in local_cluster.node_names
    kill_node(local_cluster, node, job.job_id)
    killed_at = time.time()

    # slurmctld declares the node DOWN after SlurmdTimeout (60 s) and requeues the job.
    wait_for(lambda: node_state(local_cluster, node).startswith("down"), 150,
             f"{node} to be DOWN")
    assert time.time() - killed_at >= 55
    requeued = wait_for(lambda: (s := show_job(job.job_id)).get("Restarts") == "1" and s, 60,
                        "Slurm to requeue the job")
    # Not a final state: Slurm keeps the job (COMPLETING while the other node's step is killed,
    # then PENDING until the node is back).
    assert requeued["JobState"] in ("COMPLETING", "PENDING", "CONFIGURING", "RUNNING"), requeued
    ctld_log = (local_cluster.log_dir / "slurmctld.log").read_text(errors="replace")
    assert re.search(rf"requeue job JobId={job.job_id} due to failure of node {node}", ctld_log)

    # The node comes back by itself when its slurmd registers (ReturnToService=2).
    assert manager.start_node(local_cluster, node) is True
    wait_for(lambda: node_state(local_cluster, node) in ("idle", "mixed", "allocated"), 60,
             f"{node} back in service")

    final = job.wait_finished(300)
    assert final.state == "COMPLETED" and final.restarts == 1

    # The first attempt left no end record: its batch script died with the node.
    events = job.events()
    starts = [e for e in events if e["event"] == "attempt_start"]
    assert [e["restart"] for e in starts] == [0, 1]
    first = [e for e in events if e["restart"] == 0]
    assert not [e for e in first if e["event"] in ("job_end", "requeue")]
    assert job.event("job_end", restart=1)["reason"] == "completed"

    # Same weights as the uninterrupted run.
    log = job.log()
    done = tagged(log, "hpcflow-done")
    assert done[0]["step"] == STEPS
    assert done[0]["params_sha256"] == ref_done[0]["params_sha256"]

    # The lost steps: trained by the first attempt after its last committed checkpoint.
    attempts = split_log(log, job.job_id)
    trained = [p["step"] for tag, p in attempts[0] if tag == "hpcflow-step"]
    resumed = [p["step"] for tag, p in attempts[1] if tag == "hpcflow-resume"]
    assert len(resumed) == 1 and resumed[0] % INTERVAL == 0
    lost = list(range(resumed[0] + 1, trained[-1] + 1))
    assert lost, "the node died right after a commit: nothing lost, nothing to check"
    rep, _ = load_report(job.job_id)
    assert rep.attempts[0].ending == ending_kinds.ENDING_NODE_FAILURE
    assert rep.attempts[0].outcome == "interrupted"
    assert rep.attempts[1].ending == ending_kinds.ENDING_COMPLETED
    failures = [f for f in rep.failures if f.kind == ending_kinds.ENDING_NODE_FAILURE]
    assert len(failures) == 1 and failures[0].attempt == 1
    assert failures[0].lost_steps == len(lost)
    assert failures[0].steps == f"{lost[0]}-{lost[-1]}"

    out = subprocess.run([sys.executable, "-m", "hpcflow", "report", job.job_id],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    rows = [line for line in out.stdout.splitlines() if ending_kinds.ENDING_NODE_FAILURE in line]
    assert any(f"{lost[0]}-{lost[-1]}" in row for row in rows), out.stdout
