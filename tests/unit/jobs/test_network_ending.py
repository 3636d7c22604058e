"""A job that fell back to TCP sockets on an EFA instance ends ``network_fallback``, and
``status`` and ``report`` say what NCCL ran over and the fix."""

from __future__ import annotations

from typing import Any

import pytest

from hpcflow import ending_kinds as K
from hpcflow import protocol as P
from hpcflow.jobs import endings
from hpcflow.jobs.report import build_report
from hpcflow.jobs.status import compose_status

T0 = 1_700_000_000.0
SOCKETS = "NCCL over TCP sockets: EFA expected on p5.48xlarge"


def ev(event: str, t: float, restart: int = 0, **extra: Any) -> dict[str, Any]:
    return {"event": event, "time": T0 + t, "job_id": "7", "restart": restart, **extra}


NETWORK_STOP = ev("network", 20, transport="socket", stopped=True, summary=SOCKETS,
                  problems=["NCCL found no net plugin (libnccl-net*.so not on the loader's "
                            "path)"], fix="put the plugin on the path")
NETWORK_EFA = ev("network", 20, transport="efa", stopped=False,
                 summary="NCCL over EFA (aws-ofi-nccl 1.9.1, 32 NICs)", problems=[])
FIRST = {"rank": 0, "rc": 78, "reason": f"network_fallback: {SOCKETS}"}


@pytest.mark.parametrize("events", [
    pytest.param([ev("attempt_start", 0), NETWORK_STOP, ev("step_end", 25, rc=78),
                  ev("job_end", 25, rc=78, reason="network_fallback")],
                 id="the-batch-script-names-it"),
    pytest.param([ev("attempt_start", 0), NETWORK_STOP,
                  ev("step_end", 25, rc=78, ranks_exited=2, first_failure=FIRST),
                  ev("job_end", 25, rc=78, reason="program_error")],
                 id="a-script-that-does-not-know-it-yet"),
    pytest.param([ev("attempt_start", 0),
                  ev("step_end", 25, rc=78, ranks_exited=2, first_failure=FIRST),
                  ev("job_end", 25, rc=78, reason="failure_limit")],
                 id="exit-records-alone"),
])
def test_the_fall_back_is_its_own_ending_with_the_fix(events):
    kind, detail = endings.ledger_ending(events)
    assert kind == K.ENDING_NETWORK_FALLBACK
    assert detail.startswith(SOCKETS) or detail.startswith("NCCL over TCP sockets")
    assert "fix: " in detail


def test_a_program_error_after_efa_stays_a_program_error():
    first = {"rank": 1, "rc": 1, "reason": "ValueError: bad batch"}
    events = [ev("attempt_start", 0), NETWORK_EFA,
              ev("step_end", 25, rc=1, ranks_exited=2, first_failure=first),
              ev("job_end", 25, rc=1, reason="program_error")]
    assert endings.ledger_ending(events)[0] == K.ENDING_PROGRAM_ERROR


def test_status_shows_the_network_and_the_ending():
    events = [ev("attempt_start", 0), NETWORK_STOP, ev("step_end", 25, rc=78),
              ev("job_end", 25, rc=78, reason="network_fallback")]
    st = compose_status("7", events=events, now_s=T0 + 60)
    assert st.ending == K.ENDING_NETWORK_FALLBACK
    assert SOCKETS in st.reason and "fix: put the plugin on the path" in st.reason
    assert st.network == SOCKETS
    assert st.to_dict()["network"] == SOCKETS


def test_the_report_shows_each_attempts_network():
    events = [ev("attempt_start", 0), NETWORK_STOP, ev("step_end", 25, rc=78),
              ev("job_end", 25, rc=78, reason="network_fallback")]
    rep = build_report("7", submitted_at=T0, events=events, log_text="", now_s=T0 + 60)
    [att] = rep.attempts
    assert (att.ending, att.network) == (K.ENDING_NETWORK_FALLBACK, SOCKETS)
    [failure] = rep.failures
    assert failure.kind == K.ENDING_NETWORK_FALLBACK and SOCKETS in failure.detail


def test_status_and_report_print_it(slurm, hpcflow, tmp_path):
    from hpcflow.jobs import records

    run_dir = tmp_path / "run"
    records.record_submission(records.JobRecord("7", "demo", str(run_dir), T0), "", "")
    for e in (ev("attempt_start", 0), NETWORK_EFA, ev("step_end", 25, rc=0),
              ev("job_end", 25, rc=0, reason="completed")):
        records.append_jsonl(P.ledger_path(run_dir), e)
    status = hpcflow("status", "7")
    assert status.exit_code == 0, status.output
    assert "network: NCCL over EFA (aws-ofi-nccl 1.9.1, 32 NICs)" in status.output
    report = hpcflow("report", "7", "--svg", str(tmp_path / "r.svg"))
    assert report.exit_code == 0, report.output
    assert "attempt 1 network: NCCL over EFA (aws-ofi-nccl 1.9.1, 32 NICs)" in report.output
