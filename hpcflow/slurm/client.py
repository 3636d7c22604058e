"""Talk to Slurm from outside a job: submit, cancel, requeue and query.

:class:`SlurmClient` runs Slurm's own commands through a *runner* it is given (by default
:func:`run_command`), so tests can replay output captured from a real cluster. The parsing lives
in :mod:`hpcflow.slurm.parse`. Transient controller errors are retried a few times with tenacity;
everything else raises with the evidence (command, exit status, tail of stderr).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from hpcflow.command import Runner, run_command, run_until_line
from hpcflow.command import evidence as _evidence
from hpcflow.errors import (
    HpcflowError,
    SlurmQueryError,
    SlurmTransitionState,
    SlurmUnreachable,
    SubmitError,
)
from hpcflow.slurm.parse import (
    SACCT_FIELDS,
    SQUEUE_FORMAT,
    AcctRow,
    QueueEntry,
    parse_sacct,
    parse_sbatch_parsable,
    parse_scontrol_show_job,
    parse_squeue,
    pick_job_record,
)

#: Messages of a controller that is busy or restarting (Slurm's error table,
#: ``slurm_strerror``): worth a retry.
TRANSIENT_RE = re.compile(
    r"Socket timed out on send/recv operation|Unable to contact slurm controller"
    r"|Slurm backup controller in standby mode|Resource temporarily unavailable",
    re.IGNORECASE,
)
#: Slurm never received the request, so even a submission can be retried without a duplicate.
NOT_SENT_RE = re.compile(r"Unable to contact slurm controller \(connect failure\)", re.IGNORECASE)
INVALID_JOB_RE = re.compile(r"Invalid job id specified", re.IGNORECASE)
NO_ACCOUNTING_RE = re.compile(r"accounting storage is disabled", re.IGNORECASE)
#: The controller cannot be reached at all (slurm_strerror: "Unable to contact slurm controller").
UNREACHABLE_RE = re.compile(r"Unable to contact slurm controller", re.IGNORECASE)
#: What ``scancel -v`` prints before it sleeps 5 s or more and tries again, when the controller
#: answered "Job can not be altered now, try again later" (ESLURM_TRANSITION_STATE_NO_UPDATE;
#: scancel.c, Slurm 22.05 to 25.11). A retry seconds later can reach the job's next attempt
#: (seen on the local cluster: a requeued array element got a second warning), so hpcflow stops
#: scancel there and decides itself (:meth:`SlurmClient.warn_batch`).
SCANCEL_RETRY_RE = re.compile(r"Job is in trans\w*ional state, retrying", re.IGNORECASE)
#: Seconds a read-only query (squeue, scontrol show, sacct) may take, all tries together:
#: ``$HPCFLOW_SLURM_QUERY_TIMEOUT_S``, default 8. Slurm's own client retries a refused connection
#: for about 18 s (measured with slurmctld stopped, Slurm 22.05), so a controller that is down
#: would otherwise cost that much per command.
QUERY_TIMEOUT_ENV = "HPCFLOW_SLURM_QUERY_TIMEOUT_S"
DEFAULT_QUERY_TIMEOUT_S = 8.0


def query_timeout_s() -> float:
    """The query budget from :data:`QUERY_TIMEOUT_ENV` (a positive number), else the default."""
    try:
        value = float(os.environ.get(QUERY_TIMEOUT_ENV, ""))
    except ValueError:
        return DEFAULT_QUERY_TIMEOUT_S
    return value if value > 0 else DEFAULT_QUERY_TIMEOUT_S


class SlurmClient:
    """Slurm's command-line tools as a small typed API.

    Args:
        runner: called as ``runner(argv, input=None, timeout_s=...)``; returns a
            ``CompletedProcess`` with text stdout/stderr. Default :func:`run_command`. With the
            default, a signal goes through :func:`~hpcflow.command.run_until_line` so that
            scancel never retries it (:data:`SCANCEL_RETRY_RE`); a runner given here runs it as
            it is.
        attempts: tries for a command that fails with a transient controller error (>= 1).
        retry_wait_s: first wait between tries in seconds; doubles each time (max 8 s).
        timeout_s: per-command timeout in seconds (submit, cancel, requeue).
        query_timeout_s: seconds a query may take, tries included; default
            :func:`query_timeout_s`. A query that runs out of it, or fails with "Unable to contact
            slurm controller", raises :class:`~hpcflow.errors.SlurmUnreachable`.
    """

    def __init__(
        self,
        runner: Runner = run_command,
        *,
        attempts: int = 3,
        retry_wait_s: float = 1.0,
        timeout_s: float = 60.0,
        query_timeout_s: float | None = None,
    ) -> None:
        self._runner = runner
        self._attempts = max(1, attempts)
        self._retry_wait_s = retry_wait_s
        self._timeout_s = timeout_s
        self._query_timeout_s = query_timeout_s

    # ---- plumbing ---------------------------------------------------------------------------

    def _run(
        self,
        argv: list[str],
        *,
        error: type[HpcflowError] = SlurmQueryError,
        retry_re: re.Pattern[str] = TRANSIENT_RE,
        query: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv``, retrying while it fails with a message matching ``retry_re``.

        A ``query`` has one budget of :attr:`query_timeout_s` seconds for all its tries.

        Raises:
            error: the program is missing or timed out (the last transient failure is returned,
                not raised: callers decide what a non-zero status means).
            SlurmUnreachable: a query ran out of its budget, or its last try could not contact
                the controller.
        """
        budget = (self._query_timeout_s or query_timeout_s()) if query else None
        deadline = time.monotonic() + budget if budget else None

        def timeout() -> float:
            if deadline is None:
                return self._timeout_s
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(argv, budget or 0)
            return left

        def transient(result: subprocess.CompletedProcess[str]) -> bool:
            return result.returncode != 0 and bool(retry_re.search(result.stderr or ""))

        def with_retries() -> subprocess.CompletedProcess[str]:
            first = self._runner(argv, timeout_s=timeout())
            if self._attempts <= 1 or not transient(first):
                return first
            # Only a transient failure pays for importing the retry library.
            from tenacity import Retrying, retry_if_result, stop_after_attempt, wait_exponential

            retrying = Retrying(
                stop=stop_after_attempt(self._attempts - 1),
                wait=wait_exponential(multiplier=self._retry_wait_s, max=8),
                retry=retry_if_result(transient),
                retry_error_callback=lambda state: state.outcome.result(),
                reraise=True,
            )
            return retrying(lambda: self._runner(argv, timeout_s=timeout()))

        try:
            result = with_retries()
        except FileNotFoundError:
            raise error(
                f"{argv[0]} is not installed or not on PATH (Slurm's client commands are needed)"
            ) from None
        except subprocess.TimeoutExpired:
            if query:
                raise SlurmUnreachable(
                    f"the Slurm controller did not answer within {budget:g} s "
                    f"({QUERY_TIMEOUT_ENV}): {' '.join(argv)}") from None
            raise error(f"timed out after {self._timeout_s:g} s: {' '.join(argv)}") from None
        if query and result.returncode != 0 and UNREACHABLE_RE.search(result.stderr or ""):
            raise SlurmUnreachable(f"the Slurm controller is unreachable {_evidence(argv, result)}")
        return result

    def _check(self, argv: list[str], result: subprocess.CompletedProcess[str], what: str) -> None:
        if result.returncode != 0:
            raise SlurmQueryError(f"{what} failed {_evidence(argv, result)}")

    # ---- control ----------------------------------------------------------------------------

    def submit(self, script_path: str | Path, *, chdir: str | Path | None = None) -> str:
        """Submit a batch script with ``sbatch --parsable`` and return the job id.

        Args:
            script_path: the batch script (its ``#SBATCH`` lines carry the options).
            chdir: working directory of the job (sbatch ``--chdir``); default: sbatch's own
                (the current directory).

        Raises:
            SubmitError: sbatch refused the job or printed no job id; the message holds the
                command, its exit status and the tail of its stderr. A submission is retried
                only when the controller could not be reached at all (so never twice).
        """
        argv = ["sbatch", "--parsable"]
        if chdir is not None:
            argv.append(f"--chdir={chdir}")
        argv.append(str(script_path))
        return self._sbatch(argv)

    def submit_wrap(self, command: str, options: Sequence[str] = ()) -> str:
        """Submit a one-line job (``sbatch --parsable <options> --wrap <command>``; sbatch(1)
        ``--wrap``) and return its id: what a rehearsal uses to make Slurm preempt a job.

        Raises:
            SubmitError: as :meth:`submit`.
        """
        return self._sbatch(["sbatch", "--parsable", *options, "--wrap", command])

    def _sbatch(self, argv: list[str]) -> str:
        result = self._run(argv, error=SubmitError, retry_re=NOT_SENT_RE)
        if result.returncode != 0:
            raise SubmitError(f"sbatch refused the job {_evidence(argv, result)}")
        try:
            return parse_sbatch_parsable(result.stdout)
        except ValueError as exc:
            raise SubmitError(f"{exc} {_evidence(argv, result)}") from None

    def cancel(self, job_id: str, *, signal: str | None = None, batch_only: bool = False) -> None:
        """Cancel a job, or send it a signal once (scancel(1) ``--signal``, ``--batch``).

        A signal is sent with ``scancel -v`` and scancel is stopped when it says it will retry
        (:data:`SCANCEL_RETRY_RE`): a retry 5 s or more later could reach the job's next attempt.

        Args:
            job_id: ``"123"`` or ``"120_3"``.
            signal: e.g. ``"USR1"``; ``None`` cancels the job.
            batch_only: signal only the batch shell (how a test sends the preemption signal).

        Raises:
            SlurmTransitionState: the controller could not signal the job now (it is starting,
                requeueing or ending); nothing was retried.
            SlurmQueryError: scancel failed or reported an error (e.g. an unknown job id).
        """
        argv = ["scancel"]
        if signal is not None:
            argv += ["-v", f"--signal={signal}"]
        if batch_only:
            argv.append("--batch")
        argv.append(job_id)
        if signal is not None and self._runner is run_command:
            try:
                result = run_until_line(argv, SCANCEL_RETRY_RE, timeout_s=self._timeout_s)
            except FileNotFoundError:
                raise SlurmQueryError("scancel is not installed or not on PATH (Slurm's client "
                                      "commands are needed)") from None
            except subprocess.TimeoutExpired:
                raise SlurmQueryError(f"timed out after {self._timeout_s:g} s: "
                                      f"{' '.join(argv)}") from None
        else:
            result = self._run(argv)
        if signal is not None and SCANCEL_RETRY_RE.search(result.stderr or ""):
            raise SlurmTransitionState(
                f"Slurm could not send {signal} to job {job_id} now: the job is in a "
                "transitional state (starting, requeueing or ending); scancel was stopped "
                f"before its own retry {_evidence(argv, result)}")
        # scancel's exit status does not always reflect per-job errors: 22.05 exits 0 and prints
        # nothing for an unknown id (seen here), so an "error:" line on stderr counts too.
        if result.returncode != 0 or "error:" in (result.stderr or ""):
            raise SlurmQueryError(f"scancel failed {_evidence(argv, result)}")

    def warn_batch(self, job_id: str, signal: str, *, patience_s: float = 60.0,
                   poll_s: float = 1.0) -> None:
        """Send ``signal`` to the batch shell of the job's current attempt, as Slurm's
        ``--signal=B:<sig>@<lead>`` does: tried again while the controller says the job is in
        a transitional state, as long as the same attempt (``Restarts`` and ``StartTime`` of
        ``scontrol show job``) is the one running. A running array element is never signalled
        twice: Slurm answers "can not be altered now" for it while the array has pending
        elements, yet signals it.

        Args:
            job_id: ``"123"`` or ``"120_3"``.
            signal: e.g. ``"USR1"``.
            patience_s: seconds to keep trying (0: one try).
            poll_s: seconds between tries.

        Raises:
            SlurmTransitionState: still in a transitional state after ``patience_s``.
            SlurmQueryError: the attempt changed or ended before the signal was sent, or
                scancel failed.
        """
        def attempt() -> tuple[str, str, str, str] | None:
            record = self.show_job(job_id)
            if record is None:
                return None
            return (record.get("Restarts", ""), record.get("StartTime", ""),
                    record.get("JobState", ""), record.get("ArrayJobId", ""))

        first = attempt()
        deadline = time.monotonic() + patience_s
        while True:
            try:
                self.cancel(job_id, signal=signal, batch_only=True)
                return
            except SlurmTransitionState:
                if first is not None and first[3] and first[2] == "RUNNING":
                    # Measured (Slurm 22.05): the batch shell of a running element of an array
                    # that still has pending elements gets the signal, and the answer is "Job
                    # can not be altered now" all the same (its own id or <array>_<task>).
                    # Sending again would signal it twice.
                    return
                if time.monotonic() + poll_s > deadline:
                    raise
            time.sleep(poll_s)
            now = attempt()
            if first is None or now is None or now[:2] != first[:2] or now[2] not in (
                    "RUNNING", "CONFIGURING"):
                raise SlurmQueryError(
                    f"job {job_id}: the attempt that was to get {signal} is no longer the one "
                    f"running (Restarts, StartTime, JobState were {first and first[:3]}, now "
                    f"{now and now[:3]}); the signal was not sent to the next attempt")

    def requeue(self, job_id: str) -> None:
        """``scontrol requeue <job_id>`` (needs ``--requeue`` or ``JobRequeue=1``).

        Raises:
            SlurmQueryError: scontrol refused (unknown job, not requeueable, ...).
        """
        argv = ["scontrol", "requeue", job_id]
        self._check(argv, self._run(argv), "scontrol requeue")

    # ---- queries ----------------------------------------------------------------------------

    def queue(self, job_ids: Sequence[str] | None = None) -> list[QueueEntry]:
        """Jobs the controller knows: pending, running, and recently finished (kept for
        MinJobAge), one entry per array element.

        Args:
            job_ids: only these jobs; ``None`` lists every job.

        Returns:
            The entries, in squeue's order; ``[]`` when none of ``job_ids`` is known any more.

        Raises:
            SlurmQueryError: squeue failed, or its output could not be parsed.
        """
        argv = ["squeue", "--noheader", "--array", "--states=all", f"--Format={SQUEUE_FORMAT}"]
        if job_ids:
            argv.append("--jobs=" + ",".join(job_ids))
        result = self._run(argv, query=True)
        if result.returncode != 0 and job_ids and INVALID_JOB_RE.search(result.stderr or ""):
            return []
        self._check(argv, result, "squeue")
        try:
            return parse_squeue(result.stdout)
        except ValueError as exc:
            raise SlurmQueryError(f"{exc} {_evidence(argv, result)}") from None

    def show_job(self, job_id: str) -> dict[str, str] | None:
        """``scontrol show job -o <job_id>`` as ``{key: value}``.

        Returns:
            The record (for an array's own id: the element whose JobId is that id), or ``None``
            when Slurm says "Invalid job id" (unknown, or finished longer ago than MinJobAge).

        Raises:
            SlurmQueryError: scontrol failed for another reason.
        """
        argv = ["scontrol", "show", "job", "-o", job_id]
        result = self._run(argv, query=True)
        if result.returncode != 0 and INVALID_JOB_RE.search(result.stderr or ""):
            return None
        self._check(argv, result, "scontrol show job")
        return pick_job_record(parse_scontrol_show_job(result.stdout), job_id)

    def accounting(self, job_id: str) -> list[AcctRow] | None:
        """Every attempt and step of a job from ``sacct --duplicates`` (requeued attempts too).

        Returns:
            The rows, or ``None`` when the cluster keeps no accounting ("accounting storage is
            disabled": no slurmdbd, as on the local cluster).

        Raises:
            SlurmQueryError: sacct failed for another reason, or printed an unexpected line.
        """
        argv = [
            "sacct",
            "--parsable2",
            "--noheader",
            "--duplicates",
            f"--format={','.join(SACCT_FIELDS)}",
            f"--jobs={job_id}",
        ]
        result = self._run(argv, query=True)
        if NO_ACCOUNTING_RE.search((result.stderr or "") + (result.stdout or "")):
            return None
        self._check(argv, result, "sacct")
        try:
            return parse_sacct(result.stdout)
        except ValueError as exc:
            raise SlurmQueryError(f"{exc} {_evidence(argv, result)}") from None
