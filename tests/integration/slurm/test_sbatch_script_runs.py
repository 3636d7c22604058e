"""Run the rendered batch script with bash against fake ``srun``/``scontrol`` on PATH.

This exercises the script's own logic deterministically, without a cluster: the USR1 trap, the
wait loop that survives it, the requeue decision of docs/protocol.md step 6, the exit code, the
ledger, and that hostile arguments, environment values and run directories reach the program
literally. The ``srun`` shim records its argv and execs the program (so the trap's USR1 reaches
the program directly, as srun would forward it); ``scontrol`` records its calls.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hpcflow import protocol
from hpcflow.ledger import append_event
from hpcflow.slurm.render import render_sbatch
from hpcflow.spec.job import JobSpec

HOSTILE = [
    "plain",
    "two words",
    "it's",
    'say "hi"',
    "$(touch pwned-subst)",
    "`touch pwned-tick`",
    "$HOME ${PATH}",
    "line1\nline2",
    "; rm -rf / #",
    "\\back\\slash",
    "*",
    "",
]

SRUN = """\
#!/usr/bin/env bash
# Fake srun: record argv (NUL-separated), drop the options, exec the program.
printf '%s\\0' "$@" >"$SHIM_LOG/srun.argv"
while [[ $# -gt 0 && $1 == --* ]]; do shift; done
exec "$@"
"""

SCANCEL = """\
#!/usr/bin/env bash
# Fake scancel: record the call and fail, so the script falls back to signalling the step itself.
printf '%s\\n' "$*" >>"$SHIM_LOG/scancel.calls"
exit 1
"""

SCONTROL = """\
#!/usr/bin/env bash
# Fake scontrol: record the call; `show hostnames` prints many hosts (more than a pipe buffer,
# so a reader that stops after the first line would make it fail with SIGPIPE).
printf '%s\\n' "$*" >>"$SHIM_LOG/scontrol.calls"
if [[ $1 == show && $2 == hostnames ]]; then seq -f 'n%g' 1 20000; exit 0; fi
exit "${SHIM_SCONTROL_RC:-0}"
"""

# torchrun stand-in for `python -m torch.distributed.run ... (-m MOD | --no-python) ARGS`:
# records its options, ignores USR1 the way a launcher that does not forward it would, and runs
# the program as a child so the ranks see only the flag file.
FAKE_PYTHON = f"""\
#!/usr/bin/env bash
printf '%s\\0' "$@" >"$SHIM_LOG/torchrun.argv"
trap '' USR1
shift 2
while [[ $# -gt 0 && $1 == --* && $1 != --no-python ]]; do shift; done
if [[ $1 == --no-python ]]; then shift; "$@"; else {sys.executable} "$@"; fi
"""

PROGRAM = """\
import json, os, signal, sys, time

mode = os.environ["TEST_MODE"]
log = os.environ["SHIM_LOG"]
signalled = []
def on_usr1(*_):
    signalled.append(1)
    with open(os.path.join(log, "usr1-at"), "w") as f:
        f.write(repr(time.time()))
if mode == "ignore-usr1":
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
else:
    signal.signal(signal.SIGUSR1, on_usr1)
joins = bool(os.environ.get("TEST_JOIN"))  # says it has a handler, as hpcflow.runtime does
if joins:
    with open(os.path.join(os.environ["HPCFLOW_JOINED_DIR"], "0"), "w") as f:
        f.write(f"{os.getpid()} n1")
with open(os.path.join(log, "seen.json"), "w") as f:
    env = {k: v for k, v in os.environ.items() if k.startswith(("HPCFLOW_", "USER_"))}
    json.dump({"argv": sys.argv[1:], "env": env}, f)
open(os.path.join(log, "ready"), "w").close()
if mode == "ok":
    sys.exit(0)
if mode == "fail":
    sys.exit(3)
if mode == "unaware":  # never looks at the flag file; TERM (default action) ends it
    time.sleep(30)
    sys.exit(99)
deadline = time.time() + 20
while time.time() < deadline:
    if signalled or (not joins and os.path.exists(os.environ["HPCFLOW_PREEMPT_FLAG"])):
        break
    time.sleep(0.01)
else:
    sys.exit(99)
time.sleep(0.3)  # still running after the trap returned: the script must wait again
if mode in ("preempt", "ignore-usr1"):
    tmp = os.environ["HPCFLOW_PREEMPT_COMMITTED"] + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"step": 7, "time": time.time()}, f)
    os.replace(tmp, os.environ["HPCFLOW_PREEMPT_COMMITTED"])
sys.exit(int(os.environ.get("TEST_PREEMPT_RC", "75")))
"""


@dataclass
class Run:
    rc: int
    stderr: str
    events: list[dict[str, Any]]
    scontrol: list[str]
    seen: dict[str, Any]
    srun_argv: list[str]
    run_dir: Path

    @property
    def requeues(self) -> list[str]:
        return [c for c in self.scontrol if c.startswith("requeue")]

    def event(self, name: str) -> dict[str, Any]:
        (match,) = [e for e in self.events if e["event"] == name]
        return match


@pytest.fixture
def harness(tmp_path: Path) -> dict[str, Path]:
    shims = tmp_path / "shims"
    shims.mkdir()
    for name, text in (("srun", SRUN), ("scontrol", SCONTROL), ("scancel", SCANCEL),
                       ("fake-python", FAKE_PYTHON)):
        (shims / name).write_text(text)
        (shims / name).chmod(0o755)
    (tmp_path / "prog.py").write_text(PROGRAM)
    (tmp_path / "log").mkdir()
    return {"root": tmp_path, "shims": shims, "log": tmp_path / "log"}


def run_script(
    harness: dict[str, Path],
    mode: str,
    *,
    usr1: int = 0,
    slurm_env: dict[str, str] | None = None,
    args: list[str] | None = None,
    env: dict[str, str] | None = None,
    run_dir_name: str = "run dir it's $(x) `y`",
    unchecked_env: dict[str, str] | None = None,
    sig: signal.Signals = signal.SIGUSR1,
    notice_in_s: float | None = None,
    **spec_changes: Any,
) -> Run:
    root, log = harness["root"], harness["log"]
    run_dir = root / run_dir_name
    data: dict[str, Any] = {
        "name": "shimjob",
        "time_limit": "00:10:00",
        "run_dir": str(run_dir),
        "program": {"argv": [sys.executable, str(root / "prog.py"), *(args or [])]},
        "env": {"TEST_MODE": mode, **(env or {})},
        **spec_changes,
    }
    script = root / "job.sbatch"
    spec = JobSpec.model_validate(data)
    if unchecked_env:  # what the spec refuses, to show the script does not depend on that
        spec = spec.model_copy(update={"env": {**spec.env, **unchecked_env}})
    script.write_text(render_sbatch(spec))
    proc_env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    proc_env.update(
        PATH=f"{harness['shims']}{os.pathsep}{os.environ['PATH']}",
        SHIM_LOG=str(log),
        SLURM_JOB_ID="4242",
        SLURM_JOB_NODELIST="n[1-2]",
        SLURM_NNODES="1",
    )
    proc_env.update(slurm_env or {})
    proc = subprocess.Popen(
        ["bash", str(script)],
        cwd=root,
        env=proc_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        if usr1:
            deadline = time.time() + 20
            while not (log / "ready").exists():
                assert proc.poll() is None, proc.communicate()
                assert time.time() < deadline, "the program never started"
                time.sleep(0.01)
            if notice_in_s is not None:
                state = run_dir / ".hpcflow"
                (state / "notice-4242").write_text(f"{int(time.time() + notice_in_s)}\n")
            for _ in range(usr1):
                (log / "usr1-sent").write_text(repr(time.time()))
                proc.send_signal(sig)
                time.sleep(0.05)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    ledger = run_dir / ".hpcflow" / "events.jsonl"
    events = [json.loads(line) for line in ledger.read_text().splitlines()] if ledger.exists() else []
    calls = log / "scontrol.calls"
    seen = log / "seen.json"
    argv = log / "srun.argv"
    return Run(
        rc=proc.returncode,
        stderr=stderr,
        events=events,
        scontrol=calls.read_text().splitlines() if calls.exists() else [],
        seen=json.loads(seen.read_text()) if seen.exists() else {},
        srun_argv=argv.read_bytes().decode().split("\0")[:-1] if argv.exists() else [],
        run_dir=run_dir,
    )


def names(run: Run) -> list[str]:
    return [e["event"] for e in run.events]


# ---- the decision table of docs/protocol.md step 6 ------------------------------------------


def test_program_success_exits_zero_without_requeue(harness: dict[str, Path]) -> None:
    run = run_script(harness, "ok")
    assert run.rc == 0, run.stderr
    assert run.requeues == []
    assert names(run) == ["attempt_start", "step_end", "job_end"]
    assert run.event("job_end")["reason"] == "completed"
    assert run.event("attempt_start")["nodelist"] == "n[1-2]"
    # What the supervisor itself cost the attempt is in the log (bench_goodput reads it).
    cost = re.search(r"the supervisor used ([\d.]+) s of CPU in ([\d.]+) s", run.stderr)
    assert cost and 0 < float(cost.group(1)) < 30, run.stderr


def test_failing_program_is_never_requeued_and_its_code_is_the_jobs(
    harness: dict[str, Path],
) -> None:
    run = run_script(harness, "fail")
    assert run.rc == 3, run.stderr
    assert run.requeues == []
    assert run.event("step_end")["rc"] == 3
    assert run.event("job_end") | {"time": 0} == {
        "event": "job_end", "time": 0, "job_id": "4242", "restart": 0, "rc": 3, "reason": "failed"
    }


def test_usr1_with_committed_checkpoint_requeues_once_and_exits_zero(
    harness: dict[str, Path],
) -> None:
    run = run_script(harness, "preempt", usr1=1)
    assert run.rc == 0, run.stderr
    assert run.requeues == ["requeue 4242"]
    assert names(run) == ["attempt_start", "signal", "step_end", "requeue"]
    assert run.event("step_end")["rc"] == 75  # the real status, not wait's 138
    assert run.event("requeue")["step"] == 7
    assert run.event("signal")["signal"] == "USR1"
    assert (run.run_dir / ".hpcflow" / "preempt-4242-0.flag").exists()
    assert "hpcflow: " in run.stderr and "requeueing 4242" in run.stderr


def test_the_warning_reaches_ranks_that_joined_within_a_second_and_requeues(harness):
    """Every rank joined: the trap's supervisor writes the flag file and forwards USR1 to the
    step (srun passes it on), well inside a second of the warning, while the step runs."""
    run = run_script(harness, "preempt", usr1=1, env={"TEST_JOIN": "1"})
    assert run.rc == 0, run.stderr
    signal_event = run.event("signal")
    assert signal_event["forwarded"] is True and signal_event["joined"] == 1
    sent = float((harness["log"] / "usr1-sent").read_text())
    got = float((harness["log"] / "usr1-at").read_text())
    assert 0 <= got - sent < 1.0, got - sent
    assert run.requeues == ["requeue 4242"] and run.event("requeue")["step"] == 7
    assert "not forwarded" not in run.stderr


def test_two_signals_still_requeue_once(harness: dict[str, Path]) -> None:
    run = run_script(harness, "preempt", usr1=2)
    assert run.rc == 0, run.stderr
    assert run.requeues == ["requeue 4242"]
    assert names(run).count("signal") == 2


def test_requeue_bound_reached_ends_with_75(harness: dict[str, Path]) -> None:
    # With resilience off, SLURM_RESTART_COUNT is what is counted.
    run = run_script(harness, "preempt", usr1=1, slurm_env={"SLURM_RESTART_COUNT": "3"},
                     resilience=False)
    assert run.rc == 75, run.stderr
    assert run.requeues == []
    assert run.event("job_end")["reason"] == "requeue_limit"
    assert run.event("job_end")["restart"] == 3
    assert (run.run_dir / ".hpcflow" / "committed-4242-3.json").exists()


def test_requeue_bound_counts_hpcflows_own_requeues_by_default(harness: dict[str, Path]) -> None:
    """With resilience on (the default), the bound counts the ledger's ``requeue`` events:
    Slurm's own requeues after a node failure are failures, not preemptions."""
    run_dir = harness["root"] / "run dir it's $(x) `y`"
    protocol.state_dir(run_dir).mkdir(parents=True)
    for restart in range(3):
        append_event(protocol.ledger_path(run_dir), protocol.EVENT_REQUEUE, job_id="4242",
                     restart=restart, step=restart + 1)
    run = run_script(harness, "preempt", usr1=1, slurm_env={"SLURM_RESTART_COUNT": "3"})
    assert run.rc == 75, run.stderr
    assert run.requeues == [] and run.event("job_end")["reason"] == "requeue_limit"


def test_restarts_slurm_made_itself_do_not_use_the_requeue_bound(harness: dict[str, Path]):
    # Three restarts, none of them hpcflow's: node failures, counted against
    # resilience.max_failures (3, not over it), so the warned attempt is still requeued.
    run = run_script(harness, "preempt", usr1=1, slurm_env={"SLURM_RESTART_COUNT": "3"})
    assert run.rc == 0 and run.requeues == ["requeue 4242"], run.stderr


def test_restart_below_bound_requeues(harness: dict[str, Path]) -> None:
    run = run_script(
        harness, "preempt", usr1=1, slurm_env={"SLURM_RESTART_COUNT": "2"},
        preemption={"max_requeues": 3},
    )
    assert run.rc == 0, run.stderr
    assert run.requeues == ["requeue 4242"]
    assert all(e["restart"] == 2 for e in run.events)


def test_max_requeues_zero_never_requeues(harness: dict[str, Path]) -> None:
    run = run_script(harness, "preempt", usr1=1, preemption={"max_requeues": 0})
    assert run.rc == 75
    assert run.requeues == []


def test_signal_without_commit_is_not_requeued(harness: dict[str, Path]) -> None:
    run = run_script(harness, "preempt-nocommit", usr1=1, env={"TEST_PREEMPT_RC": "42"})
    assert run.rc == 42, run.stderr
    assert run.requeues == []
    assert run.event("job_end")["reason"] == "preempted_no_checkpoint"


def test_array_element_is_requeued_alone(harness: dict[str, Path]) -> None:
    run = run_script(
        harness, "preempt", usr1=1,
        slurm_env={"SLURM_ARRAY_JOB_ID": "4240", "SLURM_ARRAY_TASK_ID": "2"},
    )
    assert run.rc == 0, run.stderr
    assert run.requeues == ["requeue 4240_2"]


def test_failed_requeue_ends_with_the_step_status(harness: dict[str, Path]) -> None:
    run = run_script(harness, "preempt", usr1=1, slurm_env={"SHIM_SCONTROL_RC": "1"})
    assert run.rc == 75
    assert run.requeues == ["requeue 4242"]
    assert names(run)[-2:] == ["requeue", "job_end"]
    assert run.event("job_end")["reason"] == "requeue_failed"


def test_stale_commit_from_an_earlier_run_of_the_attempt_is_ignored(
    harness: dict[str, Path],
) -> None:
    state = harness["root"] / "run" / ".hpcflow"
    state.mkdir(parents=True)
    (state / "committed-4242-0.json").write_text('{"step": 1}')
    run = run_script(harness, "fail", run_dir_name="run")
    assert run.rc == 3
    assert run.requeues == []


def test_outside_slurm_the_script_refuses_to_run(harness: dict[str, Path]) -> None:
    run = run_script(harness, "ok", slurm_env={"SLURM_JOB_ID": ""})
    assert run.rc == 1
    assert "submit this script with sbatch" in run.stderr
    assert run.seen == {}


# ---- torchrun: the flag file alone stops the ranks -------------------------------------------


def test_torchrun_flag_file_alone_stops_the_ranks_and_requeues(harness: dict[str, Path]) -> None:
    run = run_script(
        harness,
        "ignore-usr1",
        usr1=1,
        env={"TEST_PREEMPT_RC": "1", "PYTHONPATH": str(harness["root"])},  # torchrun exits 1
        launcher="torchrun",
        program={"module": "prog", "python": str(harness["shims"] / "fake-python")},
    )
    assert run.rc == 0, run.stderr
    assert run.requeues == ["requeue 4242"]
    torchrun = (harness["log"] / "torchrun.argv").read_bytes().decode().split("\0")[:-1]
    assert torchrun[:2] == ["-m", "torch.distributed.run"]
    assert "--rdzv-endpoint=n1:24242" in torchrun
    assert "--nnodes=1" in torchrun and "--rdzv-id=4242" in torchrun
    assert torchrun[-2:] == ["-m", "prog"]
    assert "--ntasks-per-node=1" in run.srun_argv


# ---- hostile values reach the program literally --------------------------------------------


def test_hostile_args_env_and_run_dir_reach_the_program_literally(
    harness: dict[str, Path],
) -> None:
    env = {f"USER_V{i}": value for i, value in enumerate(HOSTILE)}
    run = run_script(harness, "ok", args=HOSTILE, env=env, cpus_per_task=2)
    assert run.rc == 0, run.stderr
    assert run.seen["argv"] == HOSTILE
    for name, value in env.items():
        assert run.seen["env"][name] == value
    assert run.seen["env"]["HPCFLOW_RUN_DIR"] == str(run.run_dir)
    assert run.seen["env"]["HPCFLOW_CHECKPOINT_DIR"] == str(run.run_dir / "checkpoints")
    assert run.seen["env"]["HPCFLOW_PREEMPT_FLAG"] == str(
        run.run_dir / ".hpcflow" / "preempt-4242-0.flag"
    )
    assert run.seen["env"]["HPCFLOW_PREEMPT_COMMITTED"] == str(
        run.run_dir / ".hpcflow" / "committed-4242-0.json"
    )
    assert run.seen["env"]["HPCFLOW_MAX_REQUEUES"] == "3"
    assert run.srun_argv[:5] == [
        "--kill-on-bad-exit=1", "--nodes=1", "--ntasks=1", "--ntasks-per-node=1",
        "--cpus-per-task=2",
    ]
    assert not list(harness["root"].glob("pwned*")) and not list(run.run_dir.glob("pwned*"))


def test_module_program_runs_with_the_given_interpreter(harness: dict[str, Path]) -> None:
    run = run_script(
        harness, "ok", env={"PYTHONPATH": str(harness["root"])},
        program={"module": "prog", "args": ["a b", "$(c)"], "python": sys.executable},
    )
    assert run.rc == 0, run.stderr
    assert run.seen["argv"] == ["a b", "$(c)"]
    assert run.srun_argv[-4:] == ["-m", "prog", "a b", "$(c)"]


def test_ledger_lines_are_json_objects_with_the_common_fields(harness: dict[str, Path]) -> None:
    run = run_script(
        harness, "preempt", usr1=1,
        slurm_env={"SLURM_JOB_NODELIST": 'odd"node\\list\tx'},
    )
    assert run.events, run.stderr
    for event in run.events:
        assert {"event", "time", "job_id", "restart"} <= set(event)
        assert isinstance(event["time"], int) and abs(event["time"] - time.time()) < 120
        assert event["job_id"] == "4242" and event["restart"] == 0
    # One JSON writer (hpcflow.ledger) keeps any text exactly, control characters included.
    assert run.event("attempt_start")["nodelist"] == 'odd"node\\list\tx'


def test_script_starts_with_shebang_then_sbatch_lines() -> None:
    """sbatch reads #SBATCH lines only before the first command (sbatch(1), DESCRIPTION)."""
    text = render_sbatch(
        JobSpec.model_validate(
            {"name": "x", "time_limit": "10", "run_dir": "/r", "program": {"argv": ["p"]}}
        )
    )
    head, _, _ = text.partition("\nset -uo pipefail\n")
    assert text.startswith("#!/usr/bin/env bash\n#SBATCH ")
    assert all(line.startswith("#") or not line for line in head.splitlines())


HIJACK = {"SLURM_JOB_ID": "1", "SLURM_RESTART_COUNT": "0", "SLURM_ARRAY_JOB_ID": "9",
          "SLURM_ARRAY_TASK_ID": "9", "SLURM_JOB_NODELIST": "evil"}


def test_spec_env_cannot_change_which_job_is_requeued(harness):
    run = run_script(harness, "preempt", usr1=1, unchecked_env=HIJACK)
    assert run.requeues == ["requeue 4242"]
    assert run.event("attempt_start")["nodelist"] == "n[1-2]"


def test_spec_env_cannot_lift_the_requeue_bound(harness):
    run = run_script(harness, "preempt", usr1=1, unchecked_env=HIJACK,
                     slurm_env={"SLURM_RESTART_COUNT": "3"}, resilience=False)
    assert run.requeues == [] and run.event("job_end")["reason"] == "requeue_limit"


def test_requeue_false_renders_no_requeue_and_never_requeues(harness):
    run = run_script(harness, "preempt", usr1=1, preemption={"requeue": False})
    assert "#SBATCH --no-requeue\n" in (harness["root"] / "job.sbatch").read_text()
    assert run.rc == 75 and run.requeues == []
    assert run.event("job_end")["reason"] == "requeue_disabled"


def test_usr2_as_the_preemption_signal(harness):
    run = run_script(harness, "preempt", usr1=1, sig=signal.SIGUSR2,
                     preemption={"signal": "USR2"})
    assert "#SBATCH --signal=B:USR2@120\n" in (harness["root"] / "job.sbatch").read_text()
    assert run.rc == 0 and run.requeues == ["requeue 4242"]
    assert run.event("signal")["signal"] == "USR2"
    assert run.seen["env"]["HPCFLOW_PREEMPT_SIGNAL"] == "USR2"


def test_a_program_that_never_joins_is_stopped_before_the_deadline_and_requeued(harness):
    started = time.time()
    run = run_script(harness, "unaware", usr1=1, notice_in_s=32)  # margin 30 s: stop in ~2 s
    assert run.rc == 0, run.stderr
    assert run.requeues == ["requeue 4242"]
    assert run.event("signal")["forwarded"] is False and run.event("signal")["joined"] == 0
    assert run.event("stop")["signal"] == "TERM"
    assert run.event("step_end")["rc"] == 128 + signal.SIGTERM  # the program's, not wait's 142
    assert run.event("requeue") | {"time": 0} == {
        "event": "requeue", "time": 0, "job_id": "4242", "restart": 0, "step": None,
        "checkpoint": False}
    assert time.time() - started < 20  # stopped by the timer, not by the program's own end
    assert (harness["log"] / "scancel.calls").read_text().startswith("--signal=TERM 4242")


def test_protocol_requeue_never_asks_the_program_to_checkpoint(harness):
    # "preempt" would commit a checkpoint on seeing the flag file: with protocol requeue it is
    # never written, so the program is stopped and the job requeued without a checkpoint.
    run = run_script(harness, "preempt", usr1=1, notice_in_s=32,
                     program={"argv": [sys.executable, str(harness["root"] / "prog.py")],
                              "protocol": "requeue"})
    assert run.rc == 0, run.stderr
    assert not (run.run_dir / ".hpcflow" / "preempt-4242-0.flag").exists()
    assert run.event("requeue")["checkpoint"] is False
    assert "program.protocol is requeue" in run.stderr
