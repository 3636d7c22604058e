"""Node exclusion in the rendered batch script (docs/protocol.md, "Spare nodes and node
exclusion"), run with bash against the fake srun of ``test_sbatch_script_runs`` and a fake
scontrol that knows the allocation's nodes: which failures are blamed on a node, when it is
excluded, how the next step avoids it, and how the job is requeued without it when no spare
node is left."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import test_sbatch_script_runs as base
from test_sbatch_script_runs import run_script

SCONTROL = """\
#!/usr/bin/env bash
# Fake scontrol: record the call; `show hostnames` prints the nodes in $SHIM_HOSTS.
printf '%s\\n' "$*" >>"$SHIM_LOG/scontrol.calls"
if [[ $1 == show && $2 == hostnames ]]; then tr ',' '\\n' <<<"$SHIM_HOSTS"; exit 0; fi
exit 0
"""

# A rank that joins on node $TEST_NODE and, in its first $TEST_FAIL_TRIES tries, dies of
# SIGKILL (no exit record, as a killed rank); with TEST_SIG it raises instead (an exception
# signature, as hpcflow.runtime leaves it).
PROGRAM = """\
import os, signal, sys
log, joined = os.environ["SHIM_LOG"], os.environ["HPCFLOW_JOINED_DIR"]
try_ = int(os.environ["HPCFLOW_STEP_TRY"])
os.makedirs(joined, exist_ok=True)
with open(os.path.join(joined, "0"), "w") as f:
    f.write(f"{os.getpid()} {os.environ['TEST_NODE']}\\n")
with open(os.path.join(log, "tries"), "a") as f:
    f.write(f"{try_}\\n")
with open(os.path.join(log, f"argv-{try_}"), "wb") as f, open(os.path.join(log, "srun.argv"), "rb") as g:
    f.write(g.read())
if try_ < int(os.environ.get("TEST_FAIL_TRIES", "99")):
    if os.environ.get("TEST_SIG"):
        folder = os.environ["HPCFLOW_ERROR_DIR"]
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "0.sig"), "w") as f:
            f.write(os.environ["TEST_SIG"] + "\\n")
        sys.exit(1)
    os.kill(os.getpid(), signal.SIGKILL)
"""

RESILIENCE = {"watchdog": False, "max_in_job_restarts": 3, "max_failures": 5,
              "exclude_after_failures": 2}


@pytest.fixture
def harness(tmp_path: Path) -> dict[str, Path]:
    shims = tmp_path / "shims"
    shims.mkdir()
    for name, text in (("srun", base.SRUN), ("scontrol", SCONTROL), ("scancel", base.SCANCEL)):
        (shims / name).write_text(text)
        (shims / name).chmod(0o755)
    (tmp_path / "log").mkdir()
    (tmp_path / "prog.py").write_text(PROGRAM)
    step = tmp_path / "run" / "checkpoints" / "step_5"
    step.mkdir(parents=True)
    (step / "hpcflow-commit.json").write_text("{}")
    return {"root": tmp_path, "shims": shims, "log": tmp_path / "log"}


def run(harness, *, hosts: str, node: str = "n1", fail_tries: int = 99, spare: int = 0,
        ledger: list[dict] = (), restart: int = 0, env: dict | None = None,
        **resilience):  # noqa: ANN001, ANN003, ANN201
    if ledger:
        state = harness["root"] / "run" / ".hpcflow"
        state.mkdir(parents=True, exist_ok=True)
        (state / "events.jsonl").write_text(
            "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in ledger))
    slurm_env = {"SHIM_HOSTS": hosts, "SLURM_JOB_NODELIST": hosts}
    if restart:
        slurm_env["SLURM_RESTART_COUNT"] = str(restart)
    out = run_script(harness, "x", run_dir_name="run", slurm_env=slurm_env,
                     env={"TEST_NODE": node, "TEST_FAIL_TRIES": str(fail_tries), **(env or {})},
                     resilience={**RESILIENCE, "spare_nodes": spare, **resilience})
    tries_file = harness["log"] / "tries"
    tries = tries_file.read_text().split() if tries_file.exists() else []
    return out, tries


def srun_args(harness, try_: int) -> list[str]:  # noqa: ANN001
    return (harness["log"] / f"argv-{try_}").read_text().split("\0")


def events(out, name: str) -> list[dict]:  # noqa: ANN001
    return [e for e in out.events if e["event"] == name]


def test_a_node_that_failed_twice_is_replaced_by_a_spare(harness) -> None:
    out, tries = run(harness, hosts="n1,n2", spare=1, fail_tries=2)
    assert out.rc == 0 and tries == ["0", "1", "2"]
    assert [e["node"] for e in events(out, "step_end")] == ["n1", "n1", None]
    excluded = events(out, "node_excluded")
    assert [(e["node"], e["failures"], e["excluded"], e["spare"]) for e in excluded] == [
        ("n1", 2, "n1", True)]
    assert not any(a.startswith("--exclude") for a in srun_args(harness, 1))
    assert "--exclude=n1" in srun_args(harness, 2)
    assert "--nodes=1" in srun_args(harness, 2) and "--ntasks=1" in srun_args(harness, 2)
    assert out.requeues == [] and out.event("job_end")["reason"] == "completed"


def test_without_a_spare_the_job_is_requeued_without_the_node(harness) -> None:
    out, tries = run(harness, hosts="n1", fail_tries=99)
    assert tries == ["0", "1"] and out.rc == 0
    assert [(e["node"], e["spare"]) for e in events(out, "node_excluded")] == [("n1", False)]
    requeue = out.event("requeue")
    assert requeue["cause"] == "node_excluded" and requeue["excluded"] == "n1"
    assert requeue["step"] == 5
    # Slurm takes ExcNodeList only from a pending job: the update comes after the requeue.
    calls = [c for c in out.scontrol if not c.startswith("show")]
    assert calls == ["requeue 4242", "update JobId=4242 ExcNodeList=n1"]
    assert events(out, "job_end") == []


def test_the_next_attempt_avoids_the_node_and_counts_the_requeue_as_a_failure(harness) -> None:
    # Slurm ran the requeued job on n1 and n2 again (say the update was lost): the step keeps
    # off n1 from the start. The exclusion requeue is a failure: with max_failures 1 it is
    # the last one, and the next failed step ends the job failure_limit.
    earlier = [
        {"event": "node_excluded", "time": 1, "job_id": "4242", "restart": 0, "node": "n1",
         "failures": 2, "excluded": "n1", "spare": False},
        {"event": "requeue", "time": 2, "job_id": "4242", "restart": 0, "step": 5,
         "cause": "node_excluded", "excluded": "n1"},
    ]
    out, tries = run(harness, hosts="n1,n2", node="n2", ledger=earlier, restart=1,
                     fail_tries=1, max_failures=1)
    assert tries == ["0"]
    assert "--exclude=n1" in srun_args(harness, 0)
    assert out.event("job_end")["reason"] == "failure_limit"


def test_warned_requeues_keep_their_own_budget_after_an_exclusion_requeue(harness) -> None:
    # One requeue without a node so far: the preemption budget of one requeue is still whole.
    (harness["root"] / "prog.py").write_text(base.PROGRAM)
    state = harness["root"] / "run" / ".hpcflow"
    state.mkdir(parents=True)
    (state / "events.jsonl").write_text(json.dumps(
        {"event": "requeue", "time": 2, "job_id": "4242", "restart": 0, "step": 5,
         "cause": "node_excluded", "excluded": "n1"}, separators=(",", ":")) + "\n")
    out = run_script(harness, "preempt", usr1=1, run_dir_name="run",
                     slurm_env={"SLURM_RESTART_COUNT": "1", "SHIM_HOSTS": "n2"},
                     preemption={"max_requeues": 1}, resilience=RESILIENCE)
    assert out.rc == 0, out.stderr
    assert out.requeues == ["requeue 4242"]
    assert [e.get("cause") for e in events(out, "requeue")] == ["node_excluded", None]


def test_a_program_error_is_not_blamed_on_the_node(harness) -> None:
    out, tries = run(harness, hosts="n1,n2", spare=1, fail_tries=2,
                     env={"TEST_SIG": "ValueError@6"}, exclude_after_failures=1)
    assert [e["node"] for e in events(out, "step_end")][:1] == [None]
    assert events(out, "node_excluded") == []
    assert out.event("job_end")["reason"] == "program_error"


def test_one_failure_is_not_enough_with_the_default_of_two(harness) -> None:
    out, tries = run(harness, hosts="n1,n2", spare=1, fail_tries=1)
    assert tries == ["0", "1"] and out.rc == 0
    assert [e["node"] for e in events(out, "step_end")] == ["n1", None]
    assert events(out, "node_excluded") == []
    assert not any(a.startswith("--exclude") for a in srun_args(harness, 1))
