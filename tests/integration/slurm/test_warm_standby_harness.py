"""A warm standby (``resilience.warm_standby``) through the rendered batch script and the
supervisor, against a fake srun that runs each step as one local process (no Slurm): the
standby starts once rank 0 listed its modules, the restart is handed to it, and at the end an
unused one leaves quietly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import test_sbatch_script_runs as base
from test_sbatch_script_runs import run_script

# Like the shared fake srun, but each call is a step of its own (SLURM_STEP_ID), as srun gives.
SRUN = """\
#!/usr/bin/env bash
n=$(cat "$SHIM_LOG/steps" 2>/dev/null || echo 0)
echo $((n + 1)) >"$SHIM_LOG/steps"
printf '%s\\0' "$@" >>"$SHIM_LOG/srun.calls"
printf '\\n' >>"$SHIM_LOG/srun.calls"
while [[ $# -gt 0 && $1 == --* ]]; do shift; done
SLURM_STEP_ID="$n" SLURM_PROCID=0 exec "$@"
"""

# Try 0 lists its modules as rank 0 of hpcflow.runtime does at its first step, waits until the
# standby's step has started, and fails; the next try says where it runs and succeeds.
PROGRAM = """\
import json, os, sys, time
log = os.environ["SHIM_LOG"]
try_ = os.environ["HPCFLOW_STEP_TRY"]
with open(os.path.join(log, f"try-{try_}.json"), "w") as f:
    json.dump({"pid": os.getpid(), "warm_t0": os.environ.get("HPCFLOW_WARM_T0"),
               "attempt_t0": os.environ.get("HPCFLOW_ATTEMPT_T0"),
               "step": os.environ.get("SLURM_STEP_ID"), "argv": sys.argv[1:],
               "colorsys_loaded_ahead": "colorsys" in sys.modules}, f)
with open(os.environ["HPCFLOW_WARM_MODULES"], "w") as f:
    f.write("colorsys\\n")
if try_ == "1":  # long enough for a standby to start, were one due
    time.sleep(2.5)
if try_ == "0":
    deadline = time.time() + 30
    while time.time() < deadline:
        calls = open(os.path.join(log, "srun.calls"), "rb").read()
        if b"hpcflow.runtime.standby" in calls:
            break
        time.sleep(0.05)
    time.sleep(0.5)
    sys.exit(3)
"""


@pytest.fixture
def harness(tmp_path: Path) -> dict[str, Path]:
    shims = tmp_path / "shims"
    shims.mkdir()
    for name, text in (("srun", SRUN), ("scontrol", base.SCONTROL), ("scancel", base.SCANCEL)):
        (shims / name).write_text(text)
        (shims / name).chmod(0o755)
    (tmp_path / "log").mkdir()
    (tmp_path / "prog.py").write_text(PROGRAM)
    return {"root": tmp_path, "shims": shims, "log": tmp_path / "log"}


def _calls(log: Path) -> list[list[str]]:
    raw = (log / "srun.calls").read_bytes().decode()
    return [c.split("\0") for c in raw.split("\0\n") if c]


def test_the_restart_is_handed_to_the_standby_started_beside_the_step(harness) -> None:
    step = harness["root"] / "run" / "checkpoints" / "step_5"
    step.mkdir(parents=True)
    (step / "hpcflow-commit.json").write_text("{}")
    run = run_script(harness, "warm", run_dir_name="run", args=["--lr", "0.1"],
                     resilience={"watchdog": False, "warm_standby": True,
                                 "max_in_job_restarts": 1})
    log = harness["log"]
    assert run.rc == 0, run.stderr
    assert run.event("job_end")["reason"] == "completed"
    assert run.event("step_restart")["try"] == 1
    first, second = (json.loads((log / f"try-{t}.json").read_text()) for t in (0, 1))
    calls = _calls(log)
    standby = [c for c in calls if "hpcflow.runtime.standby" in c]
    assert len(calls) >= 2 and "hpcflow.runtime.standby" not in calls[0]  # try 0 started cold
    assert "--overlap" in standby[0]
    assert standby[0][-3:] == [str(harness["root"] / "prog.py"), "--lr", "0.1"]
    # Try 1 ran in the standby: the second srun, started while try 0 ran, its modules ahead.
    assert (first["step"], second["step"]) == ("0", "1")
    assert second["warm_t0"] and float(second["warm_t0"]) >= float(second["attempt_t0"])
    assert second["argv"] == ["--lr", "0.1"]
    assert second["colorsys_loaded_ahead"]
    assert "the restart is handed to warm standby 1" in run.stderr
    # No restart was left (max_in_job_restarts: 1): no second standby.
    assert len(standby) == 1 and "warm standby 2" not in run.stderr
    # A standby that was never used leaves with nothing in the log.
    assert "Traceback" not in run.stderr and "Terminated" not in run.stderr
