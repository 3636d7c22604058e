"""Slurm's own preemption on the real local cluster (docs/protocol.md, "Slurm's own
preemption"): a job of the ``urgent`` partition takes the nodes of a ``preemptible`` job
(``PreemptType=preempt/partition_prio``, ``PreemptMode=REQUEUE``, ``GraceTime=30``, without the
user-signal option). Slurm TERMs the job's steps and moves its end time; nothing reaches the
batch shell. A program on hpcflow's runtime checkpoints inside the grace time, a script that
saves on TERM and exits 0 saves; either way the job is requeued once, resumes, and its ending
says ``preempted_slurm``. The first case goes through ``hpcflow local-cluster rehearse --by
slurm`` (which moves the job from the spec's ``debug`` to the ``preemptible`` partition)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from slurm_helpers import Job, wait_for

from hpcflow import ending_kinds as K
from hpcflow import protocol as P
from hpcflow.jobs.report_load import load_report

pytestmark = [pytest.mark.slurm, pytest.mark.cluster_alone]

PY = sys.executable
PROGRAMS = Path(__file__).resolve().parents[2] / "programs"


def preempt(job) -> None:  # noqa: ANN001
    """Submit an urgent job that needs every CPU of both nodes."""
    cmd = ["sbatch", "--parsable", "-p", "urgent", "-N", "2", "--exclusive", "-t", "1:00",
           "-o", "/dev/null", "--wrap", "sleep 1"]
    print("+", " ".join(cmd))
    subprocess.run(cmd, check=True, capture_output=True, text=True)


def spec(name: str, argv: list[str], **extra) -> dict:  # noqa: ANN003
    return {"name": name, "nodes": 2, "tasks_per_node": 1, "cpus_per_task": 4,
            "partition": "preemptible", "time_limit": "00:20:00", "program": {"argv": argv},
            "env": {"OMP_NUM_THREADS": "1"}, "preemption": {"max_requeues": 2}, **extra}


def ended_preempted_by_slurm(job) -> None:  # noqa: ANN001
    final = job.wait_finished(600)
    assert final.state == "COMPLETED" and final.restarts == 1, job.dump()
    requeues = [e for e in job.events() if e["event"] == "requeue"]
    assert len(requeues) == 1  # hpcflow's requeue; Slurm's found the job pending
    signal = job.event("signal", restart=0)
    assert signal["source"] == P.SOURCE_SLURM_PREEMPT
    rep, _ = load_report(job.job_id)
    assert rep.attempts[0].ending == K.ENDING_PREEMPTED_SLURM
    assert rep.attempts[1].ending == K.ENDING_COMPLETED


def test_a_program_on_the_runtime_checkpoints_inside_the_grace_time(
        local_cluster, hpcflow_home, tmp_path):
    """Rehearsed as a user would: ``hpcflow local-cluster rehearse --by slurm``. The rehearsal
    waits ``--preempt-after-s`` for the ranks to join (on a loaded machine torch's import alone
    can take seconds), then trains that long before Slurm preempts the job."""
    path = tmp_path / "api.yaml"
    path.write_text(json.dumps({  # JSON is YAML
        **spec("api", [PY, str(PROGRAMS / "fsdp_loop.py"), "--steps", "200",
                       "--step-time-s", "0.2"], checkpoint={"keep": 2, "interval_steps": 0}),
        "partition": "debug", "run_dir": str(tmp_path / "run")}))
    cmd = [PY, "-m", "hpcflow", "local-cluster", "rehearse", str(path), "--by", "slurm",
           "--preempt-after-s", "15", "--timeout-s", "500", "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=550)
    print(proc.stdout, proc.stderr)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout)["data"]
    assert out["preemptions_sent"] == 1 and out["requeues"] == 1
    assert re.search(r"asked Slurm to preempt job \d+: urgent job \d+ wants its nodes", proc.stderr)
    job = Job.of(out["job_id"], tmp_path / "run")
    requeue = job.event("requeue", restart=0)
    assert isinstance(requeue["step"], int) and requeue["step"] >= 4  # a committed checkpoint
    ended_preempted_by_slurm(job)
    resumes = [int(n) for n in re.findall(r'^hpcflow-resume \{"step": (\d+)\}', job.log(), re.M)]
    assert resumes == [requeue["step"]]
    assert re.search(r'^user-done \{.*"step": 200', job.log(), re.M), job.log()


def test_a_script_that_saves_on_term_and_exits_0_is_requeued_and_trains_each_step_once(
        submit_job, tmp_path):
    state = tmp_path / "state.txt"
    job = submit_job(spec("saves-on-term", [PY, str(PROGRAMS / "saves_on_term.py"),
                                            "--steps", "40", "--state", str(state)]))
    trained = lambda: [int(n) for n in re.findall(r"^term-step (\d+)$", job.log(), re.M)]  # noqa: E731
    wait_for(lambda: len(trained()) >= 6, 400, "the first steps")
    preempt(job)
    wait_for(lambda: job.event("requeue", restart=0), 120, "the requeue")
    ended_preempted_by_slurm(job)
    log = job.log()
    saved = [int(n) for n in re.findall(r"^term-saved (\d+)$", log, re.M)]
    assert len(saved) == 1 and re.findall(r"^term-resume (\d+)$", log, re.M) == [str(saved[0])]
    assert trained() == list(range(1, 41))  # every step once: none lost, none twice
    assert "term-done 40" in log
