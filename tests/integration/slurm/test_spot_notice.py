"""A spot interruption notice on the real local Slurm cluster: ``hpcflow spot-watch`` (its own
process, watching node n1) polls a local HTTP server that imitates IMDSv2
(tests/programs/fake_imds.py). When the notice is posted, the training job on n[1-2] gets it,
checkpoints, requeues and resumes with no step lost; the ledger and the report show the notice
and the time to commit; the requeued attempt is not signalled again for the same notice."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import urllib.request

import pytest
from slurm_helpers import wait_for

from hpcflow import protocol

pytestmark = [pytest.mark.slurm]

PY = sys.executable


def steps_logged(log: str) -> list[int]:
    return [json.loads(m)["step"] for m in re.findall(r"^hpcflow-step (\{.*\})$", log, re.M)]



@pytest.fixture
def start_watcher(imds, tmp_path):
    """``start_watcher(job_id) -> (process, log path)``: spot-watch for node n1, limited to the
    test's job (the local cluster is shared: other jobs on n1 must not get the notice)."""
    started = []
    log = tmp_path / "spot-watch.log"

    def start(job_id: str):
        with log.open("wb") as fh:
            proc = subprocess.Popen([PY, "-m", "hpcflow", "spot-watch", "--endpoint", imds.url,
                                     "--node", "n1", "--interval-s", "0.5", "--job", job_id],
                                    stdout=fh, stderr=subprocess.STDOUT)
        started.append(proc)
        return proc, log

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        print("----- spot-watch log -----\n" + log.read_text())


def test_spot_notice_checkpoints_requeues_and_resumes_with_no_lost_step(submit_job, imds,
                                                                         start_watcher):
    job = submit_job({
        "name": "spot", "nodes": 2, "tasks_per_node": 2, "time_limit": "00:20:00",
        "program": {"module": "hpcflow.examples.train",
                    "args": ["--steps", "30", "--step-time-s", "0.3"]},
        "env": {"OMP_NUM_THREADS": "1"},
        "preemption": {"signal_lead_s": 120, "max_requeues": 3},
        "checkpoint": {"keep": 2, "interval_steps": 0},
    })
    proc, watch_log = start_watcher(job.job_id)
    wait_for(lambda: len(steps_logged(job.log())) >= 4, 300, "training steps in the log")
    assert job.event(protocol.EVENT_SPOT_NOTICE) is None  # 404 so far: nothing done
    body = json.dumps({"action": "terminate", "in_s": 120}).encode()
    urllib.request.urlopen(urllib.request.Request(imds.url + "/_fake/notice", data=body,
                                                  method="POST"), timeout=5).read()
    requeue = wait_for(lambda: job.event("requeue", restart=0), 120, "the requeue event")
    committed = int(requeue["step"])
    assert committed >= 4
    notice = job.event(protocol.EVENT_SPOT_NOTICE, restart=0)
    assert notice is not None and notice["node"] == "n1" and notice["action"] == "terminate"
    assert notice["signal"] == "USR1"
    # The batch script's trap took the notice's time as the deadline, and removed the file.
    sig = job.event("signal", restart=0)
    assert sig["deadline"] == notice["notice_time"] and sig["forwarded"] is True
    assert not (protocol.state_dir(job.run_dir) / protocol.notice_name(job.job_id)).exists()
    assert f"sent USR1 to its batch shell (scancel --signal=USR1 --batch {job.job_id})" \
        in watch_log.read_text()

    final = job.wait_finished(300)
    assert final.state == "COMPLETED" and final.exit_code == 0 and final.restarts == 1
    log = job.log()
    resumes = [json.loads(m)["step"] for m in re.findall(r"^hpcflow-resume (\{.*\})$", log, re.M)]
    assert resumes == [committed]
    steps = steps_logged(log)
    second = steps[steps.index(committed + 1, steps.index(committed)):]
    assert second[0] == committed + 1 and second[-1] == 30
    # The notice stayed posted while the second attempt ran on n1: it was acted on once only.
    events = job.events()
    assert [e["restart"] for e in events if e["event"] == "signal"] == [0]
    assert [e["restart"] for e in events if e["event"] == protocol.EVENT_SPOT_NOTICE] == [0]

    out = subprocess.run([PY, "-m", "hpcflow", "report", job.job_id, "--json"],
                         capture_output=True, text=True, check=True)
    rep = json.loads(out.stdout)["data"]
    assert rep["totals"]["lost"] == 0.0
    assert [a["outcome"] for a in rep["attempts"]] == ["requeue", "completed"]
    assert [a["ending"] for a in rep["attempts"]] == ["preempted_spot", "completed"]
    assert "spot notice (terminate on n1)" in rep["attempts"][0]["detail"]
    [spot] = rep["spot_notices"]
    assert spot["restart"] == 0 and spot["step"] == committed
    assert 0 <= spot["committed_in_s"] < 60
    text = subprocess.run([PY, "-m", "hpcflow", "report", job.job_id],
                          capture_output=True, text=True, check=True).stdout
    assert f"attempt 1: spot notice (terminate, n1) -> committed step {committed} in " in text

    # The daemon stops cleanly on TERM (systemd's stop).
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=15) == 0


def test_the_batch_script_starts_a_watcher_on_each_node_when_the_spec_asks(submit_job, imds,
                                                                           monkeypatch):
    # The job inherits the submitting environment (sbatch --export=ALL): the watchers it starts
    # poll the imitation.
    monkeypatch.setenv("HPCFLOW_SPOT_ENDPOINT", imds.url)
    monkeypatch.setenv("HPCFLOW_SPOT_INTERVAL_S", "0.5")
    job = submit_job({
        "name": "spot-in-job", "nodes": 2, "tasks_per_node": 1, "time_limit": "00:20:00",
        "program": {"module": "hpcflow.examples.train",
                    "args": ["--steps", "25", "--step-time-s", "0.3"]},
        "env": {"OMP_NUM_THREADS": "1"},
        "preemption": {"signal_lead_s": 120, "max_requeues": 3, "spot_watch": True},
        "checkpoint": {"keep": 2, "interval_steps": 0},
    })
    wait_for(lambda: len(steps_logged(job.log())) >= 3, 300, "training steps in the log")
    for node in ("n1", "n2"):
        wait_for(lambda n=node: f"for jobs on node {n}" in job.log(), 60, f"the watcher on {node}")
    body = json.dumps({"action": "terminate", "in_s": 120}).encode()
    urllib.request.urlopen(urllib.request.Request(imds.url + "/_fake/notice", data=body,
                                                  method="POST"), timeout=5).read()
    requeue = wait_for(lambda: job.event("requeue", restart=0), 120, "the requeue event")
    # The reclaimed nodes are gone; the next attempt's nodes have no notice.
    urllib.request.urlopen(urllib.request.Request(imds.url + "/_fake/notice", method="DELETE"),
                           timeout=5).read()
    committed = int(requeue["step"])
    notices = [e for e in job.events() if e["event"] == protocol.EVENT_SPOT_NOTICE]
    assert notices and {e["restart"] for e in notices} == {0}
    assert {e["node"] for e in notices} <= {"n1", "n2"}
    assert job.event("signal", restart=0)["deadline"] == notices[0]["notice_time"]
    assert "sent USR1 to its batch shell" in job.log()

    final = job.wait_finished(300)
    assert final.state == "COMPLETED" and final.exit_code == 0 and final.restarts == 1
    log = job.log()
    resumes = [json.loads(m)["step"] for m in re.findall(r"^hpcflow-resume (\{.*\})$", log, re.M)]
    assert resumes == [committed]
    assert steps_logged(log)[-1] == 25
    out = subprocess.run([PY, "-m", "hpcflow", "report", job.job_id, "--json"],
                         capture_output=True, text=True, check=True)
    rep = json.loads(out.stdout)["data"]
    assert rep["totals"]["lost"] == 0.0
    assert rep["spot_notices"][0]["step"] == committed
