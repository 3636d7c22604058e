"""Every kind of ending told apart in ``status``: held jobs (from output captured on the local
Slurm 22.05 cluster), an unreachable controller, and the ledger's rank exits."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from hpcflow import ending_kinds as K
from hpcflow import protocol as P
from hpcflow.jobs import endings
from hpcflow.jobs.status import compose_status
from hpcflow.slurm.parse import parse_scontrol_show_job, parse_squeue, pick_job_record

OUTPUT = Path(__file__).parents[2] / "unit" / "slurm" / "slurm_output"
T0 = 1_700_000_000.0


def captured(name: str) -> dict[str, Any]:
    return json.loads((OUTPUT / f"{name}.json").read_text())


def ev(event: str, t: float, restart: int = 0, **extra: Any) -> dict[str, Any]:
    return {"event": event, "time": T0 + t, "job_id": "7", "restart": restart, **extra}


@pytest.mark.parametrize(("queue_case", "show_case", "job_id", "slurm_reason"), [
    ("squeue_held", "scontrol_show_held", "230", "JobHeldUser"),
    ("squeue_requeue_held", "scontrol_show_requeue_held", "231", "job requeued in held state"),
])
def test_a_held_job_says_held_and_how_to_release_it(queue_case, show_case, job_id, slurm_reason):
    (row,) = parse_squeue(captured(queue_case)["stdout"])
    show = pick_job_record(parse_scontrol_show_job(captured(show_case)["stdout"]), job_id)
    st = compose_status(job_id, queue=row.__dict__, show=show, now_s=T0)
    assert st.state == "PENDING" and not st.finished
    assert st.ending == K.ENDING_HELD
    assert f"needs `scontrol release {job_id}`" in st.reason and slurm_reason in st.reason


def test_held_reasons_from_slurms_reason_table():
    # squeue prints the reason with spaces, scontrol with underscores; priority 0 is a hold too.
    assert endings.held_reason("PENDING", "launch failed requeued held")
    assert endings.held_reason("PENDING", "launch_failed_requeued_held")
    assert "administrator" in endings.held_reason("PENDING", "JobHeldAdmin")
    assert endings.held_reason("REQUEUE_HOLD", "None")
    assert endings.held_reason("PENDING", "None", priority="0")
    assert endings.held_reason("PENDING", "BeginTime", priority="4294901759") is None
    assert endings.held_reason("RUNNING", "None") is None


def test_logs_follow_on_a_held_job_returns_and_says_so(slurm, hpcflow):
    slurm.answers["squeue"] = (0, captured("squeue_held")["stdout"], "")
    slurm.answers["scontrol"] = (0, captured("scontrol_show_held")["stdout"], "")
    started = time.monotonic()
    result = hpcflow("logs", "-f", "230")
    assert time.monotonic() - started < 10
    assert result.exit_code == 1
    assert "is held (JobHeldUser): needs `scontrol release 230`" in result.output


def test_status_with_the_controller_down_says_unreachable_and_exits_4(slurm, hpcflow, tmp_path):
    from hpcflow.jobs import records

    run = tmp_path / "run"
    records.record_submission(records.JobRecord("7", "j", str(run), T0), "", "")
    records.append_jsonl(P.ledger_path(run), {**ev("attempt_start", 0), "time": time.time() - 5})
    # What squeue and scontrol print (after ~18 s) when slurmctld is stopped, seen here.
    down = (1, "", "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n")
    slurm.answers["squeue"] = slurm.answers["scontrol"] = down
    result = hpcflow("status", "7")
    assert result.exit_code == 4
    assert "the Slurm controller is unreachable" in result.output
    assert "ledger last recorded 'attempt_start' of attempt 1" in result.output
    assert "UNKNOWN" not in result.output and "no longer knows" not in result.output
    # One query, no retries of the others: the answer does not wait on each command in turn.
    assert [c[0] for c in slurm.calls] == ["squeue"]


STEP_END_DISK_FULL = ev("step_end", 50, rc=143, ranks_exited=4, ranks_missing=0, missing=[],
                        first_failure={"rank": 2, "rc": 5, "reason": "CheckpointError: the "
                                       "checkpoint of step 4 failed: [Errno 28] No space left"})
STEP_END_KILLED = ev("step_end", 50, rc=137, ranks_exited=3, ranks_missing=1, missing=[1],
                     first_failure={"rank": 0, "rc": 1, "reason": "RuntimeError: Connection "
                                    "closed by peer"})


@pytest.mark.parametrize(("step_end", "reason", "kind", "words"), [
    (STEP_END_DISK_FULL, "program_error", K.ENDING_PROGRAM_ERROR,
     ["first failure: rank 2 exited with status 5 (CheckpointError", "No space left",
      "srun reported 143"]),
    (STEP_END_KILLED, "rank_killed", K.ENDING_RANK_KILLED,
     ["rank(s) 1 left no exit record (killed by a signal)", "srun reported 137"]),
    (ev("step_end", 50, rc=134, ranks_exited=3, ranks_missing=1, missing=[1], first_failure=None),
     "completed_after_done", K.ENDING_COMPLETED, ["final checkpoint was committed",
                                                  "srun reported 134"]),
])
def test_the_ledger_tells_a_full_disk_a_killed_rank_and_a_teardown_apart(step_end, reason, kind,
                                                                         words):
    rc = 0 if kind == K.ENDING_COMPLETED else step_end["rc"]
    events = [ev("attempt_start", 0), step_end, ev("job_end", 50, rc=rc, reason=reason)]
    st = compose_status("7", events=events, now_s=T0 + 60)
    assert st.ending == kind and st.finished
    for word in words:
        assert word in st.reason, st.reason


def test_an_attempt_without_end_record_that_slurm_ran_again_was_a_node_failure():
    st = compose_status("7", queue={"state": "RUNNING", "reason": "None", "restart_count": 1},
                        events=[ev("attempt_start", 0)], now_s=T0 + 60)
    assert st.ending == K.ENDING_NODE_FAILURE and "node failure" in st.reason
    cancelled = compose_status("7", show={"JobState": "CANCELLED", "ExitCode": "0:15"},
                               events=[ev("attempt_start", 0)], now_s=T0 + 60)
    assert cancelled.ending == K.ENDING_CANCELLED


def test_every_reason_the_supervisor_writes_has_a_kind():
    import re

    folder = Path(__file__).parents[3] / "hpcflow" / "supervisor"
    names = {n for f in folder.glob("*.py") for n in re.findall(r"P\.(REASON_[A-Z_]+)",
                                                                 f.read_text())}
    written = {getattr(P, n) for n in names} | {P.REASON_SUPERVISOR_ERROR}
    assert len(written) >= 10 and written <= set(K.REASON_KIND), written - set(K.REASON_KIND)
    assert set(K.REASON_KIND.values()) <= set(K.ENDING_KINDS)


def test_the_ending_kinds_table_in_the_docs_is_the_list_in_protocol():
    doc = (Path(__file__).parents[3] / "docs" / "protocol.md").read_text()
    section = doc.split("## Ending kinds", 1)[1].split("\n## ", 1)[0]
    import re

    rows = re.findall(r"^\| `([a-z_]+)` \|", section, re.M)
    assert rows == list(K.ENDING_KINDS)
    for reason in K.REASON_KIND:
        assert f"`{reason}`" in doc, reason
