"""SlurmClient against a runner that replays output captured from a real Slurm 22.05 cluster."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from hpcflow.errors import SlurmQueryError, SlurmTransitionState, SlurmUnreachable, SubmitError
from hpcflow.slurm.client import SlurmClient, run_command

OUTPUT = Path(__file__).parent / "slurm_output"
TIMED_OUT = "slurm_load_jobs error: Socket timed out on send/recv operation\n"
NO_CONTACT = "sbatch: error: Batch job submission failed: Unable to contact slurm controller " \
             "(connect failure)\n"


def completed(argv: Sequence[str], rc: int, stdout: str = "", stderr: str = "") -> Any:
    return subprocess.CompletedProcess(list(argv), rc, stdout, stderr)


class Replay:
    """A runner that answers with captured records and checks the command matches."""

    def __init__(self, *names: str) -> None:
        self.records = [json.loads((OUTPUT / f"{n}.json").read_text()) for n in names]
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str], *, input: str | None = None, timeout_s: float = 60):
        self.calls.append(list(argv))
        rec = self.records[len(self.calls) - 1]
        assert list(argv) == rec["argv"], "the client no longer runs the captured command"
        return completed(argv, rec["returncode"], rec["stdout"], rec["stderr"])


class Scripted:
    """A runner that returns the given (rc, stdout, stderr) answers in turn."""

    def __init__(self, *answers: tuple[int, str, str] | BaseException) -> None:
        self.answers = list(answers)
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str], *, input: str | None = None, timeout_s: float = 60):
        self.calls.append(list(argv))
        answer = self.answers[len(self.calls) - 1]
        if isinstance(answer, BaseException):
            raise answer
        return completed(argv, *answer)


def client(runner: Any) -> SlurmClient:
    return SlurmClient(runner, attempts=3, retry_wait_s=0)


# ---- replayed real output --------------------------------------------------------------------


def test_submit_returns_the_job_id() -> None:
    runner = Replay("sbatch_ok")
    assert client(runner).submit("/scratch/capture/run.sh", chdir="/scratch/capture") == "32"


def test_submit_wrap_passes_the_command_as_one_word_and_refusals_raise() -> None:
    runner = Scripted((0, "41\n", ""), (1, "", "sbatch: error: invalid partition specified: x"))
    assert client(runner).submit_wrap("sleep 1", ["--partition", "urgent"]) == "41"
    assert runner.calls[0] == ["sbatch", "--parsable", "--partition", "urgent", "--wrap", "sleep 1"]
    with pytest.raises(SubmitError, match="invalid partition"):
        client(runner).submit_wrap("sleep 1", ["--partition", "x"])


def test_submit_path_with_spaces_is_one_argument() -> None:
    runner = Replay("sbatch_spaces")
    job_id = client(runner).submit(
        "/scratch/capture/dir with space/my job.sh", chdir="/scratch/capture/dir with space"
    )
    assert job_id == "33"


def test_refused_submission_raises_submit_error_with_evidence() -> None:
    runner = Replay("sbatch_bad_partition")
    with pytest.raises(SubmitError) as info:
        client(runner).submit("/scratch/capture/bad.sh")
    message = str(info.value)
    assert "exit 1" in message
    assert "sbatch --parsable /scratch/capture/bad.sh" in message
    assert "Invalid partition name specified" in message
    assert len(runner.calls) == 1


def test_queue_of_known_jobs() -> None:
    runner = Replay("squeue_mine")
    entries = client(runner).queue(["32", "33", "34", "35", "36", "37", "40", "41"])
    assert len(entries) == 10
    assert {e.job_id: e.restart_count for e in entries}["37"] == 1


def test_queue_of_unknown_job_is_empty() -> None:
    assert client(Replay("squeue_unknown")).queue(["99999"]) == []


def test_queue_of_everything() -> None:
    assert len(client(Replay("squeue_all")).queue()) > 10


def test_show_job_with_spaces() -> None:
    job = client(Replay("scontrol_show_spaces")).show_job("33")
    assert job is not None and job["WorkDir"] == "/scratch/capture/dir with space"


def test_show_job_for_array_id_picks_the_element_with_that_id() -> None:
    job = client(Replay("scontrol_show_array")).show_job("34")
    assert job is not None and job["JobId"] == "34" and job["ArrayTaskId"] == "3"


def test_show_job_unknown_is_none() -> None:
    assert client(Replay("scontrol_show_invalid")).show_job("99999") is None


def test_requeue_ok_and_refused() -> None:
    client(Replay("scontrol_requeue_ok")).requeue("37")
    with pytest.raises(SlurmQueryError, match="Invalid job id specified for job 99999"):
        client(Replay("scontrol_requeue_invalid")).requeue("99999")


def test_accounting_disabled_is_none() -> None:
    assert client(Replay("sacct_disabled")).accounting("32") is None


@pytest.mark.parametrize(("record", "job_id", "options"), [
    pytest.param("scancel_ok", "41", {}, id="cancel"),
    pytest.param("scancel_signal_batch", "1180", {"signal": "USR1", "batch_only": True},
                 id="signal-the-batch-shell"),
    # Slurm 22.05 says nothing and exits 0 for an unknown id (captured): nothing to raise on.
    pytest.param("scancel_unknown", "99999", {}, id="unknown-id"),
])
def test_cancel_runs_the_captured_scancel_once_and_accepts_its_answer(record, job_id, options):
    runner = Replay(record)  # it also fails the test if the command differs from the capture
    assert client(runner).cancel(job_id, **options) is None
    assert runner.calls == [runner.records[0]["argv"]]


def test_a_signal_the_controller_cannot_send_now_is_not_retried() -> None:
    # A held job, captured: scancel -v said it would retry and was stopped there.
    runner = Replay("scancel_signal_transition")
    with pytest.raises(SlurmTransitionState, match="transitional state") as info:
        client(runner).cancel("1181", signal="USR1", batch_only=True)
    assert "scancel -v --signal=USR1 --batch 1181" in str(info.value)
    assert len(runner.calls) == 1


def _show(restarts: str, start: str, state: str = "RUNNING", job: str = "JobId=7",
          ) -> tuple[int, str, str]:
    return 0, f"{job} JobName=x JobState={state} Restarts={restarts} StartTime={start}\n", ""


TRANSITION = (-9, "", "scancel: Job is in transitional state, retrying\n")


def test_warn_batch_tries_again_while_the_same_attempt_runs() -> None:
    runner = Scripted(_show("0", "2026-12-06T10:00:00"), TRANSITION,
                      _show("0", "2026-12-06T10:00:00"), (0, "", ""))
    client(runner).warn_batch("7", "USR1", poll_s=0)
    assert [c[0] for c in runner.calls] == ["scontrol", "scancel", "scontrol", "scancel"]
    assert runner.calls[-1] == ["scancel", "-v", "--signal=USR1", "--batch", "7"]


@pytest.mark.parametrize("now", [
    pytest.param(_show("1", "2026-12-06T10:00:00"), id="requeued"),
    pytest.param(_show("0", "2026-12-06T10:05:00"), id="started-again"),
    pytest.param(_show("0", "2026-12-06T10:00:00", "COMPLETING"), id="ending"),
    pytest.param((1, "", "slurm_load_jobs error: Invalid job id specified\n"), id="gone"),
])
def test_warn_batch_never_signals_an_attempt_other_than_the_one_it_meant(now) -> None:
    runner = Scripted(_show("0", "2026-12-06T10:00:00"), TRANSITION, now)
    with pytest.raises(SlurmQueryError, match="no longer the one running"):
        client(runner).warn_batch("7", "USR1", poll_s=0)
    assert [c[0] for c in runner.calls].count("scancel") == 1


def test_warn_batch_signals_a_running_array_element_once() -> None:
    # Slurm 22.05 (measured): "can not be altered now" for an element of an array with pending
    # elements, and the element's batch shell got the signal all the same.
    element = "JobId=1363 ArrayJobId=1361 ArrayTaskId=1"
    runner = Scripted(_show("0", "t", job=element), TRANSITION)
    client(runner).warn_batch("1361_1", "USR1", poll_s=0)
    assert runner.calls == [["scontrol", "show", "job", "-o", "1361_1"],
                            ["scancel", "-v", "--signal=USR1", "--batch", "1361_1"]]


def test_warn_batch_gives_up_after_its_patience() -> None:
    runner = Scripted(_show("0", "t"), TRANSITION)
    with pytest.raises(SlurmTransitionState):
        client(runner).warn_batch("7", "USR1", patience_s=0, poll_s=0.5)


# ---- errors and retries (message texts from Slurm's error table) ---------------------------


def test_cancel_reporting_an_error_raises() -> None:
    runner = Scripted((0, "", "scancel: error: Kill job error on job id 5: Access/permission denied\n"))
    with pytest.raises(SlurmQueryError, match="permission denied"):
        client(runner).cancel("5")


def test_transient_errors_are_retried_then_succeed() -> None:
    runner = Scripted((1, "", TIMED_OUT), (1, "", TIMED_OUT), (0, "", ""))
    assert client(runner).queue() == []
    assert len(runner.calls) == 3


def test_transient_errors_give_up_after_the_bound_with_evidence() -> None:
    runner = Scripted(*[(1, "", TIMED_OUT)] * 3)
    with pytest.raises(SlurmQueryError, match="Socket timed out") as info:
        client(runner).show_job("7")
    assert "scontrol show job -o 7" in str(info.value)
    assert len(runner.calls) == 3


def test_submit_is_not_retried_when_the_request_may_have_arrived() -> None:
    runner = Scripted((1, "", "sbatch: error: " + TIMED_OUT))
    with pytest.raises(SubmitError, match="Socket timed out"):
        client(runner).submit("job.sbatch")
    assert len(runner.calls) == 1


def test_submit_is_retried_when_the_controller_was_not_reached() -> None:
    runner = Scripted((1, "", NO_CONTACT), (0, "88\n", ""))
    assert client(runner).submit("job.sbatch") == "88"
    assert len(runner.calls) == 2


def test_other_failures_are_not_retried() -> None:
    runner = Scripted((1, "", "squeue: error: Invalid user: nobody\n"))
    with pytest.raises(SlurmQueryError, match="Invalid user"):
        client(runner).queue()
    assert len(runner.calls) == 1


def test_accounting_rows_are_parsed() -> None:
    runner = Scripted((0, "5|5|COMPLETED|0:0|12|t0|t1|1|n1|job\n", ""))
    (row,) = client(runner).accounting("5")
    assert (row.job_id, row.state, row.elapsed_s) == ("5", "COMPLETED", 12)
    assert "--duplicates" in runner.calls[0] and "--jobs=5" in runner.calls[0]


def test_missing_slurm_tools_are_named() -> None:
    runner = Scripted(FileNotFoundError("sbatch"))
    with pytest.raises(SubmitError, match="sbatch is not installed"):
        client(runner).submit("job.sbatch")


def test_timeout_is_a_query_error() -> None:
    runner = Scripted(subprocess.TimeoutExpired(["squeue"], 60))
    with pytest.raises(SlurmUnreachable, match="did not answer within 8 s"):
        client(runner).queue()
    assert issubclass(SlurmUnreachable, SlurmQueryError)
    runner = Scripted(subprocess.TimeoutExpired(["scancel"], 60))
    with pytest.raises(SlurmQueryError, match="timed out after 60 s"):
        client(runner).cancel("5")


# What squeue and scontrol print after ~18 s when slurmctld is stopped (Slurm 22.05, seen here).
DOWN = (1, "", "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n")


def test_a_query_has_one_time_budget_for_all_its_tries(monkeypatch) -> None:
    class Clocked(Scripted):
        timeouts: list[float] = []

        def __call__(self, argv, *, input=None, timeout_s=60):  # noqa: ANN001, ANN204
            self.timeouts.append(timeout_s)
            clock[0] += 3.0  # each try takes 3 s
            return super().__call__(argv, input=input, timeout_s=timeout_s)

    clock = [0.0]
    monkeypatch.setattr("hpcflow.slurm.client.time.monotonic", lambda: clock[0])
    runner = Clocked(DOWN, DOWN, DOWN)
    slow = SlurmClient(runner, attempts=3, retry_wait_s=0, query_timeout_s=5)
    with pytest.raises(SlurmUnreachable, match="did not answer within 5 s"):
        slow.show_job("5")
    # The first try may use the whole budget, the second what is left; there is no third.
    assert runner.timeouts == [5.0, 2.0] and len(runner.calls) == 2


def test_an_unreachable_controller_is_not_an_unknown_job(monkeypatch) -> None:
    runner = Scripted(DOWN)
    with pytest.raises(SlurmUnreachable, match="unreachable"):
        SlurmClient(runner, attempts=1).queue(["5"])
    from hpcflow.slurm.client import query_timeout_s

    monkeypatch.setenv("HPCFLOW_SLURM_QUERY_TIMEOUT_S", "2.5")
    assert query_timeout_s() == 2.5
    monkeypatch.setenv("HPCFLOW_SLURM_QUERY_TIMEOUT_S", "soon")
    assert query_timeout_s() == 8.0


def test_run_command_uses_no_shell() -> None:
    result = run_command([sys.executable, "-c", "import sys; print(sys.argv[1])", "$(echo hi) `x`"])
    assert result.returncode == 0
    assert result.stdout == "$(echo hi) `x`\n"
    failed = run_command([sys.executable, "-c", "import sys; sys.exit(4)"])
    assert failed.returncode == 4
