"""The network check of a job on an EFA instance: NCCL is asked to log its choice to a per-rank
file, the ranks read it after the first collective, rank 0 records the ``network`` event, and a
fall back to TCP sockets with ``require_efa`` ends every rank with status 78."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpcflow import protocol as P
from hpcflow.nccl.netlog import parse_nccl_info
from hpcflow.runtime.network import NetworkExpectation, nccl_log_settings, verdict

LINE = "n1:10:10 [0] NCCL INFO "
SOCKET_LOG = (f"{LINE}Bootstrap : Using ens5:10.0.0.5<0>\n"
              f"{LINE}NET/Plugin : No plugin found, using internal implementation\n"
              f"{LINE}Using network Socket\n")
EFA_LOG = (f"{LINE}NET/OFI Initializing aws-ofi-nccl 1.9.1-aws\n"
           f"{LINE}NET/OFI Selected Provider is efa (found 32 nics)\n"
           f"{LINE}Using network AWS Libfabric\n")
P5 = NetworkExpectation("p5.48xlarge", 32, True)


@pytest.mark.parametrize("environ, want", [
    pytest.param({}, None, id="not-an-efa-job"),
    pytest.param({P.ENV_EFA_EXPECTED: "0"}, None, id="no-efa-interfaces"),
    pytest.param({P.ENV_EFA_EXPECTED: "32", P.ENV_NETWORK_INSTANCE_TYPE: "p5.48xlarge"},
                 P5, id="required-by-default"),
    pytest.param({P.ENV_EFA_EXPECTED: "4", P.ENV_NETWORK_INSTANCE_TYPE: "p4d.24xlarge",
                  P.ENV_REQUIRE_EFA: "0"}, NetworkExpectation("p4d.24xlarge", 4, False),
                 id="not-required"),
])
def test_the_expectation_comes_from_the_batch_script(environ, want):
    assert NetworkExpectation.from_environ(environ) == want


def test_a_garbled_expectation_names_the_variable():
    with pytest.raises(ValueError, match="HPCFLOW_EFA_EXPECTED='lots' must be a whole number"):
        NetworkExpectation.from_environ({P.ENV_EFA_EXPECTED: "lots"})


@pytest.mark.parametrize("environ, sets, reads", [
    pytest.param({}, {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET",
                      "NCCL_DEBUG_FILE": "{state}/nccl-9-1-3.log"}, "{state}/nccl-9-1-3.log",
                 id="nothing-set"),
    pytest.param({"NCCL_DEBUG": "TRACE", "NCCL_DEBUG_SUBSYS": "ALL"},
                 {"NCCL_DEBUG_FILE": "{state}/nccl-9-1-3.log"}, "{state}/nccl-9-1-3.log",
                 id="user-level-and-subsys-kept"),
    pytest.param({"NCCL_DEBUG": "WARN"}, {}, None, id="user-level-logs-no-choice"),
    pytest.param({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_FILE": "/logs/nccl.%h.%p"}, {},
                 "/logs/nccl.{host}.{pid}", id="user-file-read-where-it-points"),
])
def test_nccl_is_asked_to_log_with_the_users_settings_kept(tmp_path, environ, sets, reads):
    import socket

    fill = {"state": str(P.state_dir(tmp_path)), "host": socket.gethostname(),
            "pid": str(os.getpid())}
    got, path = nccl_log_settings(environ, tmp_path, "9", 1, 3)
    assert got == {k: v.format(**fill) for k, v in sets.items()}
    assert (str(path) if path else None) == (reads.format(**fill) if reads else None)


def _choice(text: str) -> dict:
    return parse_nccl_info(text).to_dict()


@pytest.mark.parametrize("logs, expect, transport, stop, summary", [
    pytest.param([EFA_LOG, EFA_LOG], P5, "efa", False,
                 "NCCL over EFA (aws-ofi-nccl 1.9.1-aws, 32 NICs)", id="efa"),
    pytest.param([EFA_LOG, SOCKET_LOG], P5, "socket", True,
                 "NCCL over TCP sockets: EFA expected on p5.48xlarge", id="one-rank-fell-back"),
    pytest.param([SOCKET_LOG], NetworkExpectation("p5.48xlarge", 32, False), "socket", False,
                 "NCCL over TCP sockets: EFA expected on p5.48xlarge", id="not-required"),
    pytest.param(["", ""], P5, "unknown", False,
                 "NCCL's network choice not logged (no 'Using network' line)",
                 id="nothing-logged-never-stops"),
])
def test_the_verdict(logs, expect, transport, stop, summary):
    result = verdict([_choice(t) for t in logs], expect)
    assert (result.event["transport"], result.stop, result.summary) == (transport, stop, summary)
    assert result.event["event"] == P.EVENT_NETWORK
    assert ("fix" in result.event) is stop


def test_fewer_nics_than_the_instance_has_is_a_problem_not_a_stop():
    log = EFA_LOG.replace("found 32 nics", "found 8 nics")
    result = verdict([_choice(log)], P5)
    assert not result.stop
    assert result.event["problems"] == ["aws-ofi-nccl found 8 NICs, p5.48xlarge has 32"]


PROGRAM = """
from hpcflow.runtime import Run

with Run.from_env() as run:
    print("trained", flush=True)
"""


def run_rank(tmp_path: Path, extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "HPCFLOW_", "NCCL_"))}
    env.update({
        "SLURM_JOB_ID": "82", "SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_LOCALID": "0",
        "SLURM_NNODES": "1", "SLURM_NODEID": "0", "SLURM_JOB_NODELIST": "localhost",
        "SLURM_RESTART_COUNT": "0", P.ENV_RUN_DIR: str(tmp_path), "OMP_NUM_THREADS": "1",
        P.ENV_NETWORK_INSTANCE_TYPE: "p5.48xlarge", P.ENV_EFA_EXPECTED: "32", **extra,
    })
    return subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True,
                          text=True, timeout=120)


def _put_log(tmp_path: Path, text: str) -> None:
    """Where NCCL would write rank 0's log (this CPU test runs gloo, so NCCL writes none)."""
    state = P.state_dir(tmp_path)
    state.mkdir(parents=True, exist_ok=True)
    (state / P.nccl_debug_name("82", 0, 0)).write_text(text)


def _events(tmp_path: Path) -> list[dict]:
    path = P.ledger_path(tmp_path)
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def test_a_fall_back_ends_the_rank_with_its_own_status_and_record(tmp_path):
    _put_log(tmp_path, SOCKET_LOG)
    out = run_rank(tmp_path, {})
    assert out.returncode == P.EXIT_NETWORK_FALLBACK, out.stderr
    assert "trained" not in out.stdout
    assert "NCCL over TCP sockets: EFA expected on p5.48xlarge" in out.stderr
    status, _, reason = P.parse_rank_exit(
        (P.state_dir(tmp_path) / P.exits_name("82", 0) / "0").read_text())
    assert (status, reason) == (78, "network_fallback: NCCL over TCP sockets: EFA expected on "
                                    "p5.48xlarge")
    [event] = _events(tmp_path)
    assert (event["event"], event["transport"], event["stopped"]) == ("network", "socket", True)
    assert event["job_id"] == "82" and "NCCL found no net plugin" in " ".join(event["problems"])


def test_over_efa_the_job_trains_and_the_event_says_so(tmp_path):
    _put_log(tmp_path, EFA_LOG)
    out = run_rank(tmp_path, {})
    assert out.returncode == 0, out.stderr
    assert "trained" in out.stdout
    [event] = _events(tmp_path)
    assert event["summary"] == "NCCL over EFA (aws-ofi-nccl 1.9.1-aws, 32 NICs)"


def test_without_require_efa_a_fall_back_is_only_recorded(tmp_path):
    _put_log(tmp_path, SOCKET_LOG)
    out = run_rank(tmp_path, {P.ENV_REQUIRE_EFA: "0"})
    assert out.returncode == 0, out.stderr
    [event] = _events(tmp_path)
    assert (event["transport"], event["stopped"], event["required"]) == ("socket", False, False)


def test_off_an_efa_instance_nothing_is_checked(tmp_path):
    _put_log(tmp_path, SOCKET_LOG)
    out = run_rank(tmp_path, {P.ENV_EFA_EXPECTED: ""})
    assert out.returncode == 0, out.stderr
    assert _events(tmp_path) == []


def test_no_nccl_log_records_unknown_and_trains(tmp_path):
    out = run_rank(tmp_path, {})  # gloo: no NCCL writes the file
    assert out.returncode == 0, out.stderr
    [event] = _events(tmp_path)
    assert (event["transport"], event["stopped"]) == ("unknown", False)
    assert P.state_dir(tmp_path).is_dir()
