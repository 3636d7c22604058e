"""Slurm's own preemption on the real local cluster (docs/protocol.md, "Slurm's own
preemption"): a job of the ``urgent`` partition takes the nodes of a ``preemptible`` job
(``PreemptType=preempt/partition_prio``, ``PreemptMode=REQUEUE``, ``GraceTime=30``). Without the
user-signal option, Slurm TERMs the job's steps and moves its end time; nothing reaches the
batch shell; with it (the last test), the batch shell gets USR1 too. A program on hpcflow's
runtime checkpoints inside the grace time, a script that saves on TERM and exits 0 saves; either
way the job is requeued once, resumes, and its ending says ``preempted_slurm``. The first case
goes through ``hpcflow local-cluster rehearse --by slurm`` (which moves the job from the spec's
``debug`` to the ``preemptible`` partition)."""

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


@pytest.fixture
def user_signal_option(local_cluster):  # noqa: ANN001, ANN201
    """For one test: the cluster with the user-signal option of preemption, spelled as `hpcflow
    doctor` spells it for the Slurm it finds (Slurm then also sends a preempted job's batch
    shell its --signal at the start of GraceTime); slurm.conf is put back afterwards."""
    from hpcflow.doctor.checks import check_preempt_signal, parse_slurm_config, user_signal_setting

    def config() -> dict[str, str]:
        out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True,
                             check=True).stdout
        return parse_slurm_config(out)

    setting = user_signal_setting(config()["SLURM_VERSION"])
    path = local_cluster.slurm_conf_path
    before = path.read_text()
    path.write_text(before + setting + "\n")
    try:
        subprocess.run(["scontrol", "reconfigure"], check=True, capture_output=True)
        wait_for(lambda: "send_user_signal" in ",".join(
            (config().get("SlurmctldParameters", ""), config().get("PreemptParameters", ""))),
            60, "the user-signal option in Slurm's configuration")
        assert check_preempt_signal(config()).level == "pass"  # doctor recognises it
        yield setting
    finally:
        path.write_text(before)
        subprocess.run(["scontrol", "reconfigure"], check=False, capture_output=True)


def test_with_the_user_signal_option_both_kinds_of_program_are_requeued_and_resume(
        user_signal_option, submit_job, tmp_path):
    """One urgent job preempts two jobs at once: a program on the runtime and one that only
    saves on TERM. The batch shells get USR1 as well as the steps' TERM; the supervisor reads the
    moved end time, so the unaware program's stop is armed from the grace time, not the limit."""
    one_node = {"nodes": 1, "time_limit": "00:20:00"}
    state = tmp_path / "state.txt"
    api = submit_job({**spec("api-usr", [PY, str(PROGRAMS / "fsdp_loop.py"), "--steps", "80",
                                         "--step-time-s", "0.2"],
                             checkpoint={"keep": 2, "interval_steps": 0}), **one_node})
    unaware = submit_job({**spec("term-usr", [PY, str(PROGRAMS / "saves_on_term.py"),
                                              "--steps", "40", "--state", str(state)]),
                          **one_node})
    wait_for(lambda: re.search(r'^hpcflow-step \{.*"step": 4\b', api.log(), re.M), 400,
             "the runtime program's first steps")
    wait_for(lambda: re.search(r"^term-step 4$", unaware.log(), re.M), 400, "the script's steps")
    preempt(api)
    for job in (api, unaware):
        wait_for(lambda job=job: job.event("requeue", restart=0), 120, "the requeue")
        warning = [e for e in job.events() if e["event"] == "signal" and e["restart"] == 0
                   and e["source"] == P.SOURCE_WARNING]
        assert warning and warning[0]["signal"] == "USR1", job.dump()
        assert warning[0]["deadline"] - warning[0]["time"] <= 60  # the grace time's end
    for job in (api, unaware):
        final = job.wait_finished(600)
        assert final.state == "COMPLETED" and final.restarts == 1, job.dump()
        assert len([e for e in job.events() if e["event"] == "requeue"]) == 1
        sources = [e["source"] for e in job.events() if e["event"] == "signal"]
        assert sources[-1] == P.SOURCE_SLURM_PREEMPT, sources  # the moved end time, after the step
        rep, _ = load_report(job.job_id)
        assert [a.ending for a in rep.attempts] == [K.ENDING_PREEMPTED_SLURM, K.ENDING_COMPLETED]
    step = api.event("requeue", restart=0)["step"]
    assert isinstance(step, int) and step >= 1
    assert re.findall(r'^hpcflow-resume \{"step": (\d+)\}', api.log(), re.M) == [str(step)]
    assert re.search(r'^user-done \{.*"step": 80', api.log(), re.M), api.log()
    log = unaware.log()
    saved = [int(n) for n in re.findall(r"^term-saved (\d+)$", log, re.M)]
    assert saved and re.findall(r"^term-resume (\d+)$", log, re.M) == [str(saved[-1])]
    assert "term-done 40" in log
