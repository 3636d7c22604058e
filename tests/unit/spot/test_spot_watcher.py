"""The spot watcher's poll logic against a real local HTTP server that imitates IMDSv2
(tests/programs/fake_imds.py), with Slurm's answers replayed from output captured on the local
cluster (the scontrol show job record) and batch scripts rendered by hpcflow itself. The same
code runs against the real cluster in tests/integration/slurm/test_spot_notice.py."""

from __future__ import annotations

import json
import logging
import subprocess
import threading
import urllib.request
from pathlib import Path

import pytest

from hpcflow import protocol
from hpcflow.aws.imds import ImdsClient
from hpcflow.jobs import records
from hpcflow.slurm.render import render_sbatch
from hpcflow.spec.job import JobSpec
from hpcflow.spot.nodejobs import NodeJobs, parse_batch_script
from hpcflow.spot.watcher import EVENT, SpotWatcher

TESTS = Path(__file__).resolve().parents[2]
SHOW_JOB = json.loads((TESTS / "unit/slurm/slurm_output/scontrol_show_requeued.json").read_text())



def post(server, path: str, body: dict | None = None, method: str = "POST") -> None:
    data = json.dumps(body or {}).encode()
    urllib.request.urlopen(urllib.request.Request(server.url + path, data=data, method=method),
                           timeout=5).read()


def script_for(run_dir: Path, signal: str = "USR1") -> str:
    spec = JobSpec.model_validate({
        "name": "toy", "nodes": 1, "tasks_per_node": 1, "time_limit": "00:10:00",
        "run_dir": str(run_dir), "program": {"module": "hpcflow.examples.train"},
        "preemption": {"signal": signal}, "env": {"NCCL_DEBUG": "INFO"},
    })
    return render_sbatch(spec, python="/usr/bin/python3")


class Slurm:
    """Replays Slurm's answers and records every command (argv lists)."""

    def __init__(self, scripts: dict[str, str], node_jobs: list[str]) -> None:
        self.scripts, self.node_jobs = scripts, node_jobs
        self.calls: list[list[str]] = []
        self.scancel_rc = [0]
        self.owners: dict[str, int] = {}  # job -> uid (and gid); root's own job by default
        self.on_scancel: list = []  # callables run at each scancel, given the job id

    def __call__(self, argv, input=None, timeout_s=60.0):  # noqa: A002, ANN001
        self.calls.append(list(argv))
        out, rc = "", 0
        if argv[0] == "squeue" and any(a.startswith("--jobs=") for a in argv):
            job = next(a for a in argv if a.startswith("--jobs="))[len("--jobs="):]
            uid = self.owners.get(job, 0)
            out = f"{uid} {uid}\n"  # --format=%U %G
        elif argv[0] == "squeue":
            out = "".join(f"{j}\n" for j in self.node_jobs)
        elif argv[:3] == ["scontrol", "write", "batch_script"]:
            out = self.scripts[argv[3]]
        elif argv[:3] == ["scontrol", "show", "job"]:
            out = SHOW_JOB["stdout"].replace("JobId=37 ", f"JobId={argv[-1]} ")
            if argv[-1] in self.owners:
                uid = self.owners[argv[-1]]
                out = out.replace("UserId=root(0) GroupId=root(0)",
                                  f"UserId=u{uid}({uid}) GroupId=u{uid}({uid})")
        elif argv[0] == "scancel":
            for hook in self.on_scancel:
                hook(argv[-1])
            rc = self.scancel_rc.pop(0) if len(self.scancel_rc) > 1 else self.scancel_rc[0]
        return subprocess.CompletedProcess(argv, rc, out, "error: busy\n" if rc else "")

    def scancels(self) -> list[list[str]]:
        return [c for c in self.calls if c[0] == "scancel"]


@pytest.fixture
def run_dir(tmp_path) -> Path:
    d = tmp_path / "run dir's"
    protocol.state_dir(d).mkdir(parents=True)
    return d


def test_the_batch_script_gives_run_dir_and_signal(run_dir):
    assert parse_batch_script(script_for(run_dir, "USR2")) == (run_dir, "USR2")
    assert parse_batch_script("#!/bin/bash\nexport HPCFLOW_RUN_DIR=/x\nsleep 9\n") is None
    assert parse_batch_script("#!/bin/bash\nsrun train.py\n") is None


def test_no_notice_asks_slurm_nothing(imds, run_dir):
    slurm = Slurm({"41": script_for(run_dir)}, ["41"])
    result = SpotWatcher(ImdsClient(imds.url), "n1", NodeJobs(slurm)).poll_once()
    assert result.notice is None and result.actions == [] and result.errors == []
    assert slurm.calls == []


def test_a_notice_reaches_each_hpcflow_job_once(imds, run_dir, caplog):
    slurm = Slurm({"41": script_for(run_dir, "USR2"), "42": "#!/bin/bash\nsleep 600\n"},
                  ["41", "42"])
    watcher = SpotWatcher(ImdsClient(imds.url), "n1", NodeJobs(slurm), clock=lambda: 1000.0)
    post(imds, "/_fake/notice", {"action": "terminate", "in_s": 120})
    with caplog.at_level(logging.INFO, logger="hpcflow.spot"):
        first = watcher.poll_once()
    assert first.errors == [] and [a.job_id for a in first.actions] == ["41"]
    notice = first.notice
    assert notice is not None and notice.action == "terminate"
    # the notice file the trap reads: the notice's time, whole Unix seconds
    path = protocol.state_dir(run_dir) / protocol.notice_name("41")
    assert path.read_text() == f"{notice.time_s}\n"
    assert ["squeue", "--noheader", "--states=RUNNING", "--nodelist=n1", "--format=%A"] in slurm.calls
    assert slurm.scancels() == [["scancel", "-v", "--signal=USR2", "--batch", "41"]]
    [event] = [e for e in records.job_events(run_dir, "41") if e["event"] == EVENT]
    assert event == {"event": EVENT, "time": 1000, "job_id": "41", "restart": 1,
                     "action": "terminate", "notice_time": notice.time_s, "node": "n1",
                     "signal": "USR2"}
    assert "job 42 on n1 is not an hpcflow job" in caplog.text
    assert "sent USR2 to its batch shell" in caplog.text
    # The same notice again (the job requeued onto this node, say): nothing more is done, and
    # the job that is not hpcflow's is not asked about again.
    slurm.calls.clear()
    second = watcher.poll_once()
    assert second.actions == [] and slurm.scancels() == []
    assert [c for c in slurm.calls if c[:2] == ["scontrol", "write"]] == []
    assert len(records.job_events(run_dir, "41")) == 1


def test_a_new_watcher_leaves_a_job_that_already_got_the_notice_alone(imds, run_dir):
    slurm = Slurm({"41": script_for(run_dir)}, ["41"])
    post(imds, "/_fake/notice", {"in_s": 120})
    assert len(SpotWatcher(ImdsClient(imds.url), "n1", NodeJobs(slurm)).poll_once().actions) == 1
    restarted = SpotWatcher(ImdsClient(imds.url), "n1", NodeJobs(slurm))  # e.g. systemd restart
    assert restarted.poll_once().actions == [] and len(slurm.scancels()) == 1


def test_the_signal_goes_out_even_when_the_run_dir_cannot_be_written(imds, tmp_path, caplog):
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / ".hpcflow").write_text("a file where the state folder should be")
    slurm = Slurm({"41": script_for(blocked)}, ["41"])
    post(imds, "/_fake/notice", {"in_s": 120})
    result = SpotWatcher(ImdsClient(imds.url), "n1", NodeJobs(slurm)).poll_once()
    assert [a.job_id for a in result.actions] == ["41"]
    assert slurm.scancels() == [["scancel", "-v", "--signal=USR1", "--batch", "41"]]
    assert "cannot write the notice file" in caplog.text
    assert "Not a directory" in caplog.text


def test_a_new_notice_is_acted_on_again(imds, run_dir):
    slurm = Slurm({"41": script_for(run_dir)}, ["41"])
    watcher = SpotWatcher(ImdsClient(imds.url), "n1", NodeJobs(slurm))
    post(imds, "/_fake/notice", {"in_s": 120})
    watcher.poll_once()
    post(imds, "/_fake/notice", {"in_s": 600})
    assert [a.job_id for a in watcher.poll_once().actions] == ["41"]
    assert len(slurm.scancels()) == 2


def test_only_the_jobs_asked_for_are_acted_on(imds, run_dir, tmp_path):
    other = tmp_path / "other run"
    protocol.state_dir(other).mkdir(parents=True)
    slurm = Slurm({"41": script_for(run_dir), "43": script_for(other)}, ["41", "43"])
    watcher = SpotWatcher(ImdsClient(imds.url), "n1", NodeJobs(slurm), only_jobs=["43"])
    post(imds, "/_fake/notice", {"in_s": 120})
    assert [a.job_id for a in watcher.poll_once().actions] == ["43"]
    assert slurm.scancels() == [["scancel", "-v", "--signal=USR1", "--batch", "43"]]
    assert not (protocol.state_dir(run_dir) / protocol.notice_name("41")).exists()


def test_a_failed_scancel_is_tried_again_on_the_next_poll(imds, run_dir, caplog):
    slurm = Slurm({"41": script_for(run_dir)}, ["41"])
    slurm.scancel_rc = [1, 0]
    watcher = SpotWatcher(ImdsClient(imds.url), "n1", NodeJobs(slurm))
    post(imds, "/_fake/notice", {"in_s": 120})
    first = watcher.poll_once()
    assert first.actions == [] and len(first.errors) == 1 and "scancel failed" in first.errors[0]
    assert "polling again" in caplog.text
    second = watcher.poll_once()
    assert [a.job_id for a in second.actions] == ["41"] and second.errors == []
    assert len(slurm.scancels()) == 2
    # the notice and the ledger event were written once
    assert len([e for e in records.job_events(run_dir, "41") if e["event"] == EVENT]) == 1


def test_a_network_error_is_logged_and_the_next_poll_acts(imds, run_dir):
    slurm = Slurm({"41": script_for(run_dir)}, ["41"])
    watcher = SpotWatcher(ImdsClient(imds.url, timeout_s=1), "n1", NodeJobs(slurm))
    post(imds, "/_fake/notice", {"in_s": 120})
    post(imds, "/_fake/down", {"polls": 2})  # the rebalance and the notice reads both fail
    broken = watcher.poll_once()
    assert len(broken.errors) == 2 and broken.actions == [] and slurm.calls == []
    assert [a.job_id for a in watcher.poll_once().actions] == ["41"]


def test_a_failing_squeue_is_logged_not_raised(imds, run_dir):
    def runner(argv, input=None, timeout_s=60.0):  # noqa: A002, ANN001, ARG001
        return subprocess.CompletedProcess(
            argv, 1, "", "slurm_load_jobs error: Unable to contact slurm controller\n")

    watcher = SpotWatcher(ImdsClient(imds.url), "n1", NodeJobs(runner))
    post(imds, "/_fake/notice", {"in_s": 120})
    result = watcher.poll_once()
    assert result.actions == [] and "Unable to contact slurm controller" in result.errors[0]


def test_a_rebalance_recommendation_is_one_warning(imds, caplog):
    slurm = Slurm({}, [])
    watcher = SpotWatcher(ImdsClient(imds.url), "n1", NodeJobs(slurm))
    post(imds, "/_fake/rebalance", {"in_s": 0})
    with caplog.at_level(logging.WARNING, logger="hpcflow.spot"):
        watcher.poll_once()
        watcher.poll_once()
    warnings = [r for r in caplog.records if "rebalance recommendation" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
    assert slurm.calls == []  # a recommendation alone signals no job


def test_run_polls_at_the_interval_until_stopped(imds):
    watcher = SpotWatcher(ImdsClient(imds.url), "n1", NodeJobs(Slurm({}, [])))
    stop = threading.Event()
    thread = threading.Thread(target=watcher.run, kwargs={"interval_s": 0.1, "stop": stop})
    thread.start()
    threading.Event().wait(0.75)
    stop.set()
    thread.join(timeout=5)
    assert not thread.is_alive()
    with urllib.request.urlopen(imds.url + "/_fake/stats", timeout=5) as resp:
        stats = json.loads(resp.read())
    # two reads (rebalance, notice) per poll, about 8 polls in 0.75 s; one token for all
    assert 8 <= stats["gets"] <= 20 and stats["tokens"] == 1
