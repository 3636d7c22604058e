"""The job verbs behind the CLI: submit, status, logs, cancel, list.

Each takes a :class:`~hpcflow.slurm.client.SlurmClient`, so the CLI, ``hpcflow local-cluster
rehearse`` and the tests (which replay Slurm output captured from a real cluster) drive the same
code.
"""

from __future__ import annotations

import codecs
import errno
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import yaml

from hpcflow import ending_kinds, fsutil
from hpcflow.errors import SlurmQueryError, SlurmUnreachable, SubmitError
from hpcflow.hyperpod.node import hyperpod_node_fact, submit_verdict
from hpcflow.jobs import records, trust
from hpcflow.jobs.fit import fit_warning
from hpcflow.jobs.run_dir import check_run_dir
from hpcflow.jobs.runnable import program_verdict
from hpcflow.jobs.script import job_script
from hpcflow.jobs.status import FINAL_STATES, JobStatus, compose_status
from hpcflow.slurm.client import SlurmClient
from hpcflow.spec.envvalues import shown_env
from hpcflow.spec.job import JobSpec, load_job_spec
from hpcflow.spec.messages import short_value

T = TypeVar("T")

JOB_ID_RE = records.JOB_ID_RE


@dataclass(frozen=True)
class SubmitResult:
    """What ``submit`` did.

    Attributes:
        job_id: the Slurm job id, or None for a dry run.
        run_dir: the run directory.
        script: the rendered batch script.
        script_path: where the script was written, or None for a dry run.
        name: the job name.
        env: the spec's ``env`` as ``--json`` shows it: values read from a file masked
            (:func:`hpcflow.spec.envvalues.shown_env`).
        warnings: what to know before the job runs (:func:`hpcflow.jobs.fit.fit_warning`,
            :func:`hpcflow.jobs.runnable.program_verdict`, :func:`hpcflow.hyperpod.node.
            submit_verdict`).
        notes: what the node is, when that changes the job (a SageMaker HyperPod node, and the
            fact that says so: :func:`hpcflow.hyperpod.node.submit_verdict`).
    """

    job_id: str | None
    run_dir: Path
    script: str
    script_path: Path | None
    name: str = ""
    env: dict[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def log_path(self) -> Path | None:
        return None if self.job_id is None else self.run_dir / f"{self.name}-{self.job_id}.out"


def spec_yaml(spec: JobSpec) -> str:
    """The resolved spec as YAML (what is kept in the run directory)."""
    return yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False)


def submit(spec_path: str | Path, overrides: Sequence[str] = (), *, dry_run: bool = False,
           client: SlurmClient | None = None, python: str | None = None,
           allow_shared_dir: bool = False) -> SubmitResult:
    """Validate, render and (unless ``dry_run``) submit a job.

    Nothing is written before the spec validates, the script renders and the run directory
    passes :func:`check_run_dir` and the ownership checks of :mod:`hpcflow.jobs.trust` (the
    run directory, the checkpoint folder, ``program.workdir`` and their existing parents:
    skipped with ``allow_shared_dir``, which also leaves the mode of an existing run directory
    alone; a symlinked ``.hpcflow`` or ledger is refused whatever it says). A dry run checks
    them too. Then the spec and the script go into the run directory, ``sbatch`` submits the
    script, and the job id is recorded in ``submissions.jsonl`` and in the per-user index.

    Raises:
        SpecError: the spec or an override is invalid, or its layout fits no GPU of the
            instance (:func:`hpcflow.jobs.fit.fit_warning`; nothing written).
        SubmitError: ``program.argv[0]`` cannot be executed where this host sees it
            (:func:`hpcflow.jobs.runnable.program_verdict`; a name found nowhere is only a
            warning), ``hyperpod.auto_resume`` on a node that is not a SageMaker HyperPod
            node (:func:`hpcflow.hyperpod.node.submit_verdict`; a warning with ``dry_run``),
            the run directory or hpcflow's job index cannot be written (nothing
            submitted), or sbatch refused the job (the message carries its stderr). A refused
            submission leaves the run directory as it was: files and folders it created are
            removed, and the spec and script of the job that used it before are put back.
    """
    spec = load_job_spec(spec_path, overrides)
    program = program_verdict(spec)
    if program.level == "error":
        raise SubmitError(program.message)
    node = submit_verdict(auto_resume=bool(spec.hyperpod and spec.hyperpod.auto_resume),
                          fact=hyperpod_node_fact(), dry_run=dry_run)
    if node.error is not None:
        raise SubmitError(node.error)
    warnings = (*(w for w in [fit_warning(spec), program.message] if w), *node.warnings)
    script = job_script(spec, python=python or sys.executable, allow_shared_dir=allow_shared_dir)
    run_dir = Path(spec.run_dir)
    check_run_dir(run_dir)
    if not allow_shared_dir:
        trust.check_trusted_dir("run_dir", run_dir)
        trust.check_trusted_dir("checkpoint.dir", Path(spec.checkpoint_dir))
        if spec.program.workdir is not None:  # the ranks (and a warm standby) import from it
            trust.check_trusted_dir("program.workdir", Path(spec.program.workdir))
    trust.check_state_files(run_dir)
    if dry_run:
        return SubmitResult(None, run_dir, script, None, name=spec.name, env=shown_env(spec.env),
                            warnings=warnings, notes=node.notes)
    try:
        records.check_index_writable()
    except OSError as exc:
        raise SubmitError(f"cannot write hpcflow's job index in {records.hpcflow_home()} "
                          f"({exc.strerror or exc}); set HPCFLOW_HOME to a folder you can write"
                          ) from None
    _check_run_dir_free(run_dir, client)
    previous = records.read_run_files(run_dir)
    # Each level made 0700 and judged as it is reached: nothing checked above can be swapped.
    created = trust.make_private_dirs("run_dir", run_dir, allow_shared_dir=allow_shared_dir)
    try:
        script_path = records.write_run_files(run_dir, resolved := spec_yaml(spec), script,
                                              keep_mode=allow_shared_dir)
    except OSError as exc:
        records.undo_run_files(run_dir, previous, created)
        raise SubmitError(f"run_dir: cannot write the job files into {str(run_dir)!r} "
                          f"({exc.strerror or exc}); run_dir must be a folder you can create and "
                          "write") from None
    client = client or SlurmClient()
    try:
        job_id = client.submit(script_path, chdir=run_dir)
    except SubmitError as exc:
        records.undo_run_files(run_dir, previous, created)
        raise SubmitError(f"{exc}\n(run_dir is left as it was; `hpcflow submit --dry-run` "
                          "with the same spec and --set options prints the script)") from None
    rec = records.JobRecord(job_id, spec.name, str(run_dir), records.now())
    records.record_submission(rec, script, resolved)
    return SubmitResult(job_id, run_dir, script, script_path, name=spec.name,
                        env=shown_env(spec.env), warnings=warnings, notes=node.notes)


def _check_run_dir_free(run_dir: Path, client: SlurmClient | None) -> None:
    """Refuse a run directory whose newest job has not finished: two jobs would write the same
    checkpoints and ledger. A job Slurm no longer knows counts as finished."""
    subs = records.read_jsonl(run_dir / records.SUBMISSIONS_FILE)
    if not subs:
        return
    job_id = str(subs[-1].get("job_id", ""))
    if not JOB_ID_RE.fullmatch(job_id):
        return
    try:
        st = job_status(job_id, client=client)
    except SlurmQueryError:
        return
    if not st.finished and st.state != "UNKNOWN":
        raise SubmitError(f"run_dir: {str(run_dir)!r} belongs to job {job_id}, which is {st.state} "
                          "and not finished; two jobs in one run directory would overwrite each "
                          f"other's checkpoints. Wait for it, cancel it (hpcflow cancel {job_id}), "
                          "or choose another run_dir")


def job_status(job_id: str, *, client: SlurmClient | None = None) -> JobStatus:
    """Status of one job from squeue, scontrol, sacct and hpcflow's ledger.

    Raises:
        SlurmQueryError: Slurm could not be asked (controller down) and hpcflow has no record,
            or no source knows the job at all.
    """
    client = client or SlurmClient()
    rec = records.find_job(job_id)
    queue_row = show = None
    acct_state = acct_exit = None
    errors: list[str] = []
    try:
        rows = _ask(lambda: client.queue([job_id]), errors) or []
        queue_row = next((r.__dict__ for r in rows if r.job_id == job_id), None)
        show = _ask(lambda: client.show_job(job_id), errors)
        acct = _ask(lambda: client.accounting(job_id), errors) if not (queue_row or show) else None
    except SlurmUnreachable as exc:
        # Not "Slurm forgot the job": nobody could ask. Say so rather than guess a state.
        raise SlurmUnreachable(_unreachable(job_id, exc, rec)) from None
    if acct:
        top = acct[0]
        acct_state, acct_exit = top.state, top.exit_code
    run_dir = rec.run_dir if rec else (show or {}).get("WorkDir")
    ledger = records.job_ledger(run_dir, job_id) if run_dir else None
    events = ledger.events if ledger else []
    if errors and rec is None and not events:
        raise SlurmQueryError("; ".join(errors))
    if rec is None and not events and queue_row is None and show is None and acct_state is None:
        raise SlurmQueryError(f"job {job_id}: unknown to Slurm and not submitted with hpcflow by "
                              "this user (a wrong id, or it ended longer ago than MinJobAge on a "
                              "cluster without accounting)")
    return compose_status(job_id, name=rec.name if rec else "", run_dir=run_dir, queue=queue_row,
                          show=show, acct_state=acct_state, acct_exit=acct_exit, events=events,
                          ledger_skipped=ledger.skipped if ledger else 0, now_s=records.now())


def _ask(query: Callable[[], T], errors: list[str]) -> T | None:
    """``query()``, or None with its error kept in ``errors``; an unreachable controller is
    raised, since every other query would wait as long for nothing."""
    try:
        return query()
    except SlurmUnreachable:
        raise
    except SlurmQueryError as exc:
        errors.append(str(exc))
        return None


def _unreachable(job_id: str, exc: SlurmUnreachable, rec: records.JobRecord | None) -> str:
    """The message of a status that could not ask Slurm, with hpcflow's own last record."""
    last = records.job_events(rec.run_dir, job_id)[-1:] if rec else []
    seen = ""
    if last:
        ago = max(0, int(records.now() - float(last[0].get("time", 0))))
        seen = (f"; hpcflow's ledger last recorded '{last[0].get('event')}' of attempt "
                f"{int(last[0].get('restart', 0)) + 1}, {ago} s ago")
    return f"job {job_id}: state unknown, {exc}{seen}. Try again once slurmctld is back"


def list_jobs(limit: int = 20, *, client: SlurmClient | None = None) -> list[JobStatus]:
    """The newest ``limit`` jobs this user submitted with hpcflow, newest first."""
    client = client or SlurmClient()
    recent = list(reversed(records.known_jobs()))[:limit]
    return [job_status(rec.job_id, client=client) for rec in recent]


def latest_job_id() -> str | None:
    """The id of the newest job this user submitted with hpcflow."""
    jobs = records.known_jobs()
    return jobs[-1].job_id if jobs else None


def log_path(job_id: str, *, client: SlurmClient | None = None) -> Path:
    """Where the job's log is: hpcflow's index, else ``StdOut`` from ``scontrol show job``.

    Raises:
        SlurmQueryError: neither knows the job.
    """
    rec = records.find_job(job_id)
    if rec is not None:
        return rec.log_path
    show = (client or SlurmClient()).show_job(job_id)
    if show and show.get("StdOut"):
        return Path(show["StdOut"])
    raise SlurmQueryError(f"job {job_id}: not submitted with hpcflow by this user and unknown to "
                          "Slurm (finished jobs are forgotten after MinJobAge); no log to show")


#: ``hpcflow logs`` prints at most the last 16 MiB of a log (``less`` the file for more).
LOG_TAIL_BYTES = 16 * 1024 * 1024
#: ``hpcflow logs -f`` reads at most this much per read, so memory stays bounded.
FOLLOW_CHUNK_BYTES = 1024 * 1024


def _log_problem(job_id: str, path: Path, exc: OSError) -> SlurmQueryError:
    """The error of a log that cannot be read safely: missing, a symlink, a FIFO, a device."""
    if isinstance(exc, FileNotFoundError):
        return SlurmQueryError(f"job {job_id}: no log yet at {path} (is it still pending?)")
    if isinstance(exc, fsutil.NotRegularFile) or exc.errno == errno.ELOOP:
        what = "a symlink" if exc.errno == errno.ELOOP else "not a regular file"
        return SlurmQueryError(f"job {job_id}: the log path {path} is {what}; hpcflow reads logs "
                               "from regular files only (a FIFO or device would hang the reader)")
    return SlurmQueryError(f"job {job_id}: cannot read the log {path} ({exc.strerror or exc})")


def read_log(job_id: str, *, client: SlurmClient | None = None,
             max_bytes: int = LOG_TAIL_BYTES) -> tuple[Path, str, int]:
    """The job's log (:func:`log_path`): its path, the text of its last ``max_bytes`` and how
    many bytes before them were left out (0: the whole log). Memory is bounded by
    ``max_bytes``.

    Raises:
        SlurmQueryError: the job is unknown, its log is not there yet, or the log path is not a
            regular file (the path of a job not in this user's index comes from ``scontrol``,
            so its owner chooses it: a FIFO or ``/dev/zero`` is refused, never read).
    """
    path = log_path(job_id, client=client)
    try:
        raw, skipped = fsutil.read_tail(path, max_bytes)
    except OSError as exc:
        raise _log_problem(job_id, path, exc) from None
    return path, raw.decode("utf-8", errors="replace"), skipped


def follow_log(path: Path, job_id: str, *, client: SlurmClient | None = None,
               poll_s: float = 1.0, status_every_s: float = 5.0) -> Iterator[str]:
    """Yield the log's text as it grows, until the job has finished and the log is drained.

    A requeued job keeps appending to the same log (``--open-mode=append``), so following
    goes on across requeues. Waits for a log that does not exist yet (job still pending). Ends
    (after draining the log) when the job is held: it will not run until it is released. Reads
    at most :data:`FOLLOW_CHUNK_BYTES` at a time, from a regular file only.

    Raises:
        SlurmQueryError: the log path is a symlink, a FIFO or a device (never read).
    """
    client = client or SlurmClient()
    offset = 0
    next_check = 0.0
    finished = False
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    while True:
        try:
            fd = fsutil.open_regular(path)
        except FileNotFoundError:
            chunk = ""
        except OSError as exc:
            raise _log_problem(job_id, path, exc) from None
        else:
            with os.fdopen(fd, "rb") as fh:
                fh.seek(offset)
                data = fh.read(FOLLOW_CHUNK_BYTES)
                offset = fh.tell()
            chunk = decoder.decode(data)
        if chunk:
            yield chunk
            continue
        if finished:
            return
        if time.monotonic() >= next_check:
            st = job_status(job_id, client=client)
            # A held job does not run until someone releases it: following it would never end.
            finished = st.finished or st.ending == ending_kinds.ENDING_HELD
            next_check = time.monotonic() + status_every_s
            if finished:
                continue  # drain what the last attempt wrote
        time.sleep(poll_s)


def job_id_problem(job_id: str) -> str | None:
    """Why ``job_id`` is not a Slurm job id, or None when it is one (``123`` or ``120_3``).

    Checked before Slurm is asked: ``scontrol show job ''`` lists every job, and ``scancel``
    takes ``1,2`` as two jobs.
    """
    if JOB_ID_RE.fullmatch(job_id):
        return None
    return (f"{short_value(job_id)} is not a Slurm job id; use the number sbatch printed, e.g. 123, or "
            "ARRAYJOB_TASK for an array element, e.g. 120_3")


def cancel(job_id: str, *, client: SlurmClient | None = None) -> str | None:
    """Cancel a job (``scancel``). A cancelled job is never requeued by hpcflow.

    Returns:
        None when the job was cancelled; the job's final state (``COMPLETED``, ...) when it had
        already ended, in which case nothing is done.

    Raises:
        SlurmQueryError: Slurm does not know the job (scancel says nothing for an unknown id),
            or scancel failed.
    """
    client = client or SlurmClient()
    show = client.show_job(job_id)
    if show is None:
        raise SlurmQueryError(f"job {job_id}: unknown to Slurm (a wrong id, or it ended longer "
                              "ago than MinJobAge); nothing to cancel")
    state = str(show.get("JobState", "")).upper()
    whole_array = "_" not in job_id and show.get("ArrayJobId") not in (None, "", "(null)")
    if state in FINAL_STATES and not whole_array:
        return state
    client.cancel(job_id)
    return None
