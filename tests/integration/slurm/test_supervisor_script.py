"""The batch script and its supervisor (python -m hpcflow.supervisor) together, run with bash
against the fake srun/scontrol of ``test_sbatch_script_runs`` (no Slurm): the cases the rules'
tables cannot show alone: what a program that saves on TERM and exits 0 gets, Slurm's own
preemption told by a moved end time, the deadline re-read at the warning, the requeue as the
attempt's last act while Slurm kills the script, a crashed supervisor, and version skew."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import test_sbatch_script_runs as base
from test_sbatch_script_runs import run_script

from hpcflow import ending_kinds as K
from hpcflow import protocol as P

# Saves on TERM and exits 0: the pattern of most Slurm guides. TEST_SAVE_AT_ONCE: exits 0 by
# itself after a moment (a program whose ranks Slurm's preemption TERMed and which saved).
SAVES_ON_TERM = """\
import os, signal, sys, time
log = os.environ["SHIM_LOG"]
def save(*_):
    open(os.path.join(log, "saved"), "w").close()
    sys.exit(0)
signal.signal(signal.SIGTERM, save)
open(os.path.join(log, "ready"), "w").close()
if os.environ.get("TEST_SAVE_AT_ONCE"):
    time.sleep(0.5)
    save()
time.sleep(60)
sys.exit(99)
"""

# scontrol that answers `show job` as Slurm does for a job it is preempting (state RUNNING, end
# time moved to now + $SHIM_GRACE_S), and that on `requeue` does what Slurm does to the batch
# step at once: TERM to the script and the supervisor (slurmstepd, "DUE TO JOB REQUEUE").
SCONTROL = """\
#!/usr/bin/env bash
printf '%s\\n' "$*" >>"$SHIM_LOG/scontrol.calls"
if [[ $1 == show && $2 == job && -n ${SHIM_JOB_STATE:-} ]]; then
  echo "JobId=4242 JobName=x JobState=$SHIM_JOB_STATE Reason=${SHIM_JOB_REASON:-None}" \\
    "EndTime=2026-01-01T00:00:00"
  exit 0
fi
if [[ $1 == show && $2 == job && -n ${SHIM_GRACE_S:-} ]]; then
  end=$(date -d "@$(( $(date +%s) + SHIM_GRACE_S ))" +%Y-%m-%dT%H:%M:%S)
  echo "JobId=4242 JobName=x JobState=RUNNING Reason=None EndTime=$end Partition=low"
  exit 0
fi
if [[ $1 == requeue ]]; then
  wc -l <"$SHIM_LEDGER" >"$SHIM_LOG/ledger-lines-at-requeue"
  trap '' TERM
  pid=$PPID
  while [[ $pid -gt 1 ]]; do
    cmd=$(tr '\\0' ' ' <"/proc/$pid/cmdline")
    case $cmd in *hpcflow.supervisor*|*job.sbatch*) kill -TERM "$pid" ;; esac
    pid=$(awk '{print $4}' "/proc/$pid/stat")
  done
fi
exit 0
"""


@pytest.fixture
def harness(tmp_path: Path) -> dict[str, Path]:
    shims = tmp_path / "shims"
    shims.mkdir()
    for name, text in (("srun", base.SRUN), ("scontrol", SCONTROL), ("scancel", base.SCANCEL)):
        (shims / name).write_text(text)
        (shims / name).chmod(0o755)
    (tmp_path / "log").mkdir()
    (tmp_path / "prog.py").write_text(base.PROGRAM)
    return {"root": tmp_path, "shims": shims, "log": tmp_path / "log"}


def env(harness: dict[str, Path], **more: str) -> dict[str, str]:
    ledger = harness["root"] / "run" / P.STATE_DIR / P.LEDGER_FILE
    return {"SHIM_LEDGER": str(ledger), **more}


def test_a_program_that_saves_on_term_and_exits_0_is_requeued(harness):
    (harness["root"] / "prog.py").write_text(SAVES_ON_TERM)
    run = run_script(harness, "x", usr1=1, notice_in_s=32, run_dir_name="run",
                     slurm_env=env(harness))  # margin 30 s: stopped in about 2 s
    assert run.rc == 0, run.stderr
    assert (harness["log"] / "saved").exists()
    assert [e["event"] for e in run.events][-3:] == ["stop", "step_end", "requeue"]
    assert run.event("step_end")["rc"] == 0
    assert run.event("requeue") == {**run.event("requeue"), "step": None, "checkpoint": False}
    assert run.requeues == ["requeue 4242"]


def test_slurm_preemption_is_told_by_the_moved_end_time_and_requeued(harness):
    """No signal reaches the batch shell (Slurm TERMs the steps only); the program saves on
    TERM and exits 0; the job's end time is now + GraceTime: requeued, ending preempted_slurm."""
    (harness["root"] / "prog.py").write_text(SAVES_ON_TERM)
    run = run_script(harness, "x", run_dir_name="run",
                     slurm_env=env(harness, SHIM_GRACE_S="20"), env={"TEST_SAVE_AT_ONCE": "1"})
    assert run.rc == 0, run.stderr
    assert run.requeues == ["requeue 4242"]
    signal_ev = run.event("signal")
    assert signal_ev["source"] == P.SOURCE_SLURM_PREEMPT and signal_ev["signal"] == "TERM"
    from hpcflow.jobs.endings import ledger_ending

    kind, detail = ledger_ending(run.events)
    assert kind == K.ENDING_PREEMPTED_SLURM and "GraceTime" in detail


def test_the_warning_rereads_the_end_time_slurm_moved(harness):
    """With the user-signal option the warning comes at the start of the grace time: the
    unaware program's stop is armed from the current end time, not the time limit."""
    t0 = time.time()
    run = run_script(harness, "unaware", usr1=1, run_dir_name="run",
                     slurm_env=env(harness, SHIM_GRACE_S="33"))
    assert time.time() - t0 < 25, run.stderr  # stopped ~3 s after the warning, not ~570 s
    warning, preempt = [e for e in run.events if e["event"] == "signal"]
    assert warning["signal"] == "USR1" and abs(warning["deadline"] - (t0 + 33)) < 8
    # 33 s to the deadline less the 30 s margin; the supervisor reads the clock before it asks
    # scontrol, so a second may tick between the two.
    assert any(f"stopped in {s} s" in run.stderr for s in (2, 3, 4)), run.stderr
    assert run.requeues == ["requeue 4242"]
    # The end time says it was Slurm's preemption (with the user-signal option), not the limit.
    from hpcflow.jobs.endings import ledger_ending

    assert preempt["source"] == P.SOURCE_SLURM_PREEMPT
    assert ledger_ending(run.events)[0] == K.ENDING_PREEMPTED_SLURM


def test_the_requeue_is_the_last_act_while_slurm_terms_the_script(harness):
    """Slurm TERMs the batch step the moment the requeue is accepted: the ledger already holds
    everything (the requeue event last), and the ExcNodeList update still happens."""
    import test_sbatch_node_exclusion as excl

    (harness["root"] / "prog.py").write_text(excl.PROGRAM)
    step = harness["root"] / "run" / "checkpoints" / "step_5"
    step.mkdir(parents=True)
    (step / P.COMMIT_RECORD).write_text("{}")
    run = run_script(harness, "x", run_dir_name="run",
                     slurm_env=env(harness, SLURM_JOB_NODELIST="n1"),
                     env={"TEST_NODE": "n1"},
                     resilience={**excl.RESILIENCE, "exclude_after_failures": 1})
    assert run.rc == 0, run.stderr
    assert run.scontrol[-2:] == ["requeue 4242", "update JobId=4242 ExcNodeList=n1"]
    lines = int((harness["log"] / "ledger-lines-at-requeue").read_text())
    assert lines == len(run.events) and run.events[-1]["event"] == "requeue"
    assert run.events[-1]["cause"] == P.REASON_NODE_EXCLUDED


@pytest.mark.parametrize(("change", "reason", "words"), [
    pytest.param(("-m hpcflow.supervisor ", "-m hpcflow.no_such_supervisor "),
                 P.REASON_SUPERVISOR_ERROR, "supervisor gave no answer", id="crashed"),
    pytest.param(('"step": {', '"no_step": {'),
                 P.REASON_SUPERVISOR_ERROR, "supervisor failed", id="failed-inside"),
    pytest.param((f'"protocol_version": {P.PROTOCOL_VERSION}', '"protocol_version": 1'),
                 P.REASON_VERSION_SKEW, "Submit the job again", id="version-skew"),
])
def test_a_job_the_supervisor_cannot_run_ends_at_once_with_an_honest_record(
        harness, monkeypatch, change, reason, words):
    real = base.render_sbatch
    monkeypatch.setattr(base, "render_sbatch", lambda spec: real(spec).replace(*change))
    run = run_script(harness, "preempt", run_dir_name="run", slurm_env=env(harness))
    assert run.rc == 1 and words in run.stderr, run.stderr
    assert run.requeues == [] and not (harness["log"] / "ready").exists()
    assert run.events[-1]["event"] == "job_end" and run.events[-1]["reason"] == reason
    json.dumps(run.events)  # every line was a JSON object (run_script parsed them)


# What a batch script of protocol version 3 asked first (its config had no step: the script ran
# srun itself and asked the supervisor at each turn).
V3_CONFIG = ('{"launcher":"srun","max_requeues":3,"ntasks":1,"program_protocol":"auto",'
             '"protocol_version":3,"requeue_allowed":true,"requeue_margin_s":30,'
             '"resilience":false,"step_nodes":1,"term_grace_s":10}')


def test_a_version_3_batch_script_requeued_after_an_upgrade_ends_with_what_to_do(tmp_path):
    run_dir = tmp_path / "run"
    environ = {**os.environ, P.ENV_RUN_DIR: str(run_dir),
               P.ENV_CHECKPOINT_DIR: str(run_dir / "checkpoints")}
    (run_dir / P.STATE_DIR).mkdir(parents=True)
    proc = subprocess.run(
        [sys.executable, "-m", "hpcflow.supervisor", "start", "--config", V3_CONFIG,
         "--job-id", "4242", "--requeue-id", "4242", "--restart", "1", "--nodelist", "n1"],
        env=environ, capture_output=True, text=True, timeout=60, check=False)
    assert (proc.returncode, proc.stdout) == (0, "exit 1\n"), proc.stderr
    assert "protocol version 3" in proc.stderr and "Submit the job again" in proc.stderr
    from hpcflow.ledger import read_events

    (end,) = [e for e in read_events(P.ledger_path(run_dir)) if e["event"] == "job_end"]
    assert (end["reason"], end["rc"], end["restart"]) == (P.REASON_VERSION_SKEW, 1, 1)


def _start(harness: dict[str, Path], name: str, *, spec_env: dict[str, str] | None = None,
           session: bool = False, **env: str) -> subprocess.Popen[str]:
    """Render a one-rank job of ``prog.py`` into ``run/`` and start it with bash, as sbatch
    would, against the fake srun/scontrol; ``env`` goes to the batch script's environment."""
    script = harness["root"] / "job.sbatch"
    spec = base.JobSpec.model_validate({
        "name": name, "time_limit": "00:10:00", "run_dir": str(harness["root"] / "run"),
        "program": {"argv": [sys.executable, str(harness["root"] / "prog.py")]},
        "env": spec_env or {}})
    script.write_text(base.render_sbatch(spec))
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    environ.update(PATH=f"{harness['shims']}{os.pathsep}{os.environ['PATH']}",
                   SHIM_LOG=str(harness["log"]), SLURM_JOB_ID="4242", SLURM_JOB_NODELIST="n1",
                   SHIM_LEDGER=str(harness["root"] / "run" / P.STATE_DIR / P.LEDGER_FILE), **env)
    return subprocess.Popen(["bash", str(script)], env=environ, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=session)


def test_a_warning_that_comes_while_the_supervisor_starts_is_not_lost(harness):
    """The signal comes before the supervisor's handler is in place (it starts with it
    ignored): the trap's line in the signals file still makes it a warning."""
    proc = _start(harness, "early", spec_env={"TEST_MODE": "preempt"})
    signals = harness["root"] / "run" / P.STATE_DIR / P.signals_name("4242", 0)
    deadline = time.time() + 10
    while not _supervisor_pids(proc.pid) and time.time() < deadline:
        time.sleep(0.005)  # the supervisor's process exists, its Python is still starting
    proc.send_signal(signal.SIGUSR1)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert signals.read_text().startswith("USR1 ")
    from hpcflow.ledger import read_events

    events = read_events(P.ledger_path(harness["root"] / "run"))
    assert [e["event"] for e in events] == ["attempt_start", "signal", "step_end", "requeue"]
    assert events[-1]["step"] == 7  # the program saw the flag file and committed


def _supervisor_pids(parent: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(parent), "-f", "hpcflow.supervisor run"],
                         capture_output=True, text=True, check=False).stdout
    return [int(p) for p in out.split()]


def test_a_killed_supervisor_still_leaves_an_honest_end(harness):
    """kill -9 of the supervisor while the step runs: the batch shell records job_end
    supervisor_error and exits 1, never a requeue."""
    (harness["root"] / "prog.py").write_text(
        "import os, time\n"
        "open(os.path.join(os.environ['SHIM_LOG'], 'ready'), 'w').close()\n"
        "time.sleep(3)\n")
    proc = _start(harness, "killed", session=True)
    deadline = time.time() + 30
    while not (harness["log"] / "ready").exists():
        assert time.time() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.01)
    (pid,) = _supervisor_pids(proc.pid)
    watchdog = str(harness["root"] / "run" / P.STATE_DIR / "heartbeat-")
    assert _pids(watchdog), "the watchdog beside the step"
    os.kill(pid, signal.SIGKILL)
    proc.wait(timeout=60)
    # The watchdog sees its supervisor gone and stops: with Slurm's process tracking by
    # parentage (proctrack/linuxproc) an orphan would outlive the job and judge dead ranks.
    deadline = time.time() + 10
    while _pids(watchdog):
        assert time.time() < deadline, "the watchdog outlived its supervisor"
        time.sleep(0.1)
    # Slurm ends the step the dead supervisor left running with the job.
    os.killpg(proc.pid, signal.SIGKILL)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "supervisor gave no answer" in stderr, stderr
    from hpcflow.ledger import read_events

    events = read_events(P.ledger_path(harness["root"] / "run"))
    assert [e["event"] for e in events] == ["attempt_start", "job_end"]
    assert events[-1]["reason"] == P.REASON_SUPERVISOR_ERROR
    assert not (harness["log"] / "scontrol.calls").exists() or "requeue" not in (
        harness["log"] / "scontrol.calls").read_text()


def _pids(pattern: str) -> list[int]:
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True,
                         check=False).stdout
    return [int(p) for p in out.split()]


@pytest.mark.parametrize(("reason", "ending"), [
    pytest.param("None", P.REASON_CANCELLED, id="scancel"),
    pytest.param("TimeLimit", P.REASON_TIME_LIMIT, id="time-limit"),
])
def test_when_slurm_ends_the_job_it_is_never_requeued(harness, reason, ending):
    """scancel, or the time limit: Slurm TERMs every process of the job, the supervisor too,
    and reads COMPLETING. A program that checkpoints on TERM has committed; the job still ends,
    with the reason, and no requeue (a requeue would undo the cancel)."""
    (harness["root"] / "prog.py").write_text(SAVES_ON_TERM)
    proc = _start(harness, "ended", SHIM_JOB_STATE="COMPLETING", SHIM_JOB_REASON=reason)
    deadline = time.time() + 30
    while not (harness["log"] / "ready").exists():
        assert time.time() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.01)
    # What slurmstepd does: TERM to the batch step's processes and the step's tasks.
    for pid in [proc.pid, *_supervisor_pids(proc.pid), *_pids(str(harness["root"] / "prog.py"))]:
        os.kill(pid, signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    from hpcflow.ledger import read_events

    events = read_events(P.ledger_path(harness["root"] / "run"))
    assert [e["event"] for e in events] == ["attempt_start", "step_end", "job_end"], stderr
    assert events[-1]["reason"] == ending and events[-1]["rc"] == 0
    assert (harness["log"] / "saved").exists()  # the program saved on TERM all the same
    calls = (harness["log"] / "scontrol.calls").read_text()
    assert "requeue" not in calls and proc.returncode == 0
    assert "Slurm is ending the job" in stderr


def test_every_event_the_supervisor_writes_decodes_with_the_contract(harness):
    """The readers of a run directory skip an event whose members are not of their kinds
    (hpcflow.contract.decode_event): what the supervisor really writes is never skipped."""
    from hpcflow.contract import decode_events

    (harness["root"] / "prog.py").write_text(SAVES_ON_TERM)
    run = run_script(harness, "x", usr1=1, notice_in_s=32, run_dir_name="run",
                     slurm_env=env(harness))
    assert run.rc == 0, run.stderr
    lines = [json.dumps(e) for e in run.events]
    decoded = decode_events(lines)
    assert decoded.skipped == 0 and len(decoded.events) == len(run.events) >= 4
