"""compose_status: a requeued or preempted job is never reported as finished, and status works
from hpcflow's ledger when Slurm has forgotten the job and has no accounting."""

import pytest

from hpcflow.jobs.status import compose_status

T0 = 1_700_000_000.0


def ev(event, t, restart=0, **extra):
    return {"event": event, "time": T0 + t, "job_id": "7", "restart": restart, **extra}


LEDGER_REQUEUED = [ev("attempt_start", 0, nodelist="n[1-2]"), ev("signal", 30, signal="USR1"),
                   ev("step_end", 35, rc=75), ev("requeue", 36, step=12)]
LEDGER_DONE = LEDGER_REQUEUED + [ev("attempt_start", 60, 1, nodelist="n[1-2]"),
                                 ev("step_end", 100, 1, rc=0),
                                 ev("job_end", 100, 1, rc=0, reason="completed")]


@pytest.mark.parametrize(
    ("kwargs", "state", "finished", "attempts", "restarts", "exit_code"),
    [
        pytest.param({"queue": {"state": "RUNNING", "reason": "None", "name": "j"},
                      "events": [ev("attempt_start", 0)]}, "RUNNING", False, 1, 0, None,
                     id="running"),
        pytest.param({"queue": {"state": "PENDING", "reason": "BeginTime"},
                      "show": {"JobState": "PENDING", "Restarts": "1"},
                      "events": LEDGER_REQUEUED}, "PENDING", False, 1, 1, None,
                     id="pending-after-requeue"),
        pytest.param({"show": {"JobState": "REQUEUED", "Restarts": "1"}}, "REQUEUED", False, 2, 1,
                     None, id="requeued-in-scontrol"),
        pytest.param({"show": {"JobState": "PREEMPTED", "Restarts": "0"}}, "PREEMPTED", False, 1,
                     0, None, id="preempted"),
        pytest.param({"show": {"JobState": "COMPLETED", "Restarts": "1", "ExitCode": "0:0"},
                      "events": LEDGER_DONE}, "COMPLETED", True, 2, 1, 0, id="completed"),
        pytest.param({"show": {"JobState": "FAILED", "ExitCode": "3:0"}}, "FAILED", True, 1, 0, 3,
                     id="failed"),
        pytest.param({"show": {"JobState": "CANCELLED", "ExitCode": "0:15"}}, "CANCELLED", True,
                     1, 0, 143, id="cancelled-by-signal"),
        pytest.param({"events": LEDGER_DONE}, "COMPLETED", True, 2, 1, 0,
                     id="forgotten-by-slurm-ledger-knows"),
        pytest.param({"events": LEDGER_REQUEUED}, "REQUEUED", False, 1, 0, None,
                     id="ledger-says-requeued"),
        pytest.param({"acct_state": "TIMEOUT", "acct_exit": "0:0"}, "TIMEOUT", True, 1, 0, 0,
                     id="sacct-only"),
        pytest.param({}, "UNKNOWN", False, 0, 0, None, id="nobody-knows"),
    ],
)
def test_state_finished_attempts(kwargs, state, finished, attempts, restarts, exit_code):
    st = compose_status("7", now_s=T0 + 200, **kwargs)
    assert (st.state, st.finished, st.attempts, st.restarts, st.exit_code) == (
        state, finished, attempts, restarts, exit_code)


def test_elapsed_runs_from_first_start_to_job_end():
    st = compose_status("7", events=LEDGER_DONE, now_s=T0 + 999)
    assert st.elapsed_s == pytest.approx(100.0)


@pytest.mark.parametrize(("show", "elapsed"), [
    pytest.param({"JobState": "RUNNING"}, 200.0, id="still-running-counts-to-now"),
    pytest.param({"JobState": "CANCELLED", "ExitCode": "0:15"}, 44.0,
                 id="ended-without-its-end-record-stops-at-the-last-record"),
])
def test_elapsed_of_a_job_whose_end_was_never_recorded(show, elapsed):
    events = [ev("attempt_start", 0), ev("step_end", 40, rc=137),
              ev("step_restart", 40, **{"try": 1}), ev("hang", 44)]
    st = compose_status("7", show=show, events=events, now_s=T0 + 200)
    assert st.elapsed_s == pytest.approx(elapsed)


def test_requeue_reason_names_the_committed_step():
    st = compose_status("7", events=LEDGER_REQUEUED, now_s=T0 + 40)
    assert "step 12" in st.reason


def test_ledger_running_but_slurm_silent_is_unknown_not_running():
    st = compose_status("7", events=[ev("attempt_start", 0)], now_s=T0 + 40)
    assert st.state == "UNKNOWN" and not st.finished


def test_a_job_cancelled_while_pending_has_no_attempts():
    st = compose_status("7", run_dir="/runs/r", queue={"state": "CANCELLED", "reason": "Priority"},
                        show={"JobState": "CANCELLED", "ExitCode": "0:0"}, now_s=T0)
    assert (st.state, st.finished, st.attempts) == ("CANCELLED", True, 0)
    assert st.reason == "cancelled before it started"


def test_a_job_cancelled_while_running_keeps_its_attempt():
    st = compose_status("7", run_dir="/runs/r", show={"JobState": "CANCELLED", "ExitCode": "0:15"},
                        events=[ev("attempt_start", 0)], now_s=T0 + 5)
    assert (st.attempts, st.exit_code) == (1, 143)


def test_the_reason_names_each_part_once():
    """The ledger's reason word and the ending's detail that starts with it are one part."""
    events = [ev("attempt_start", 0), ev("signal", 30, signal="USR1"), ev("step_end", 35, rc=75),
              ev("job_end", 36, rc=75, reason="requeue_limit")]
    st = compose_status("7", events=events, now_s=T0 + 999,
                        show={"JobState": "FAILED", "ExitCode": "75:0", "Reason": "NonZeroExitCode"})
    parts = st.reason.split("; ")
    assert parts.count("requeue_limit") == 1 and len(parts) == len(set(parts)), st.reason
