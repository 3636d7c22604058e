"""hpcflow's own records of a job, kept in its run directory and in a per-user index.

Slurm forgets a finished job after ``MinJobAge`` (default 300 s; slurm.conf(5)) and many clusters
have no accounting (``sacct``: "accounting storage is disabled"), so status must also work from
what hpcflow wrote itself: the spec, the rendered script, the submissions, and the ledger the
batch script appends (docs/protocol.md).
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hpcflow import fsutil
from hpcflow.contract import Decoded, is_number, loads_bounded
from hpcflow.ledger import read_ledger, read_lines
from hpcflow.protocol import ledger_path, state_dir

SPEC_FILE = "job.yaml"
SCRIPT_FILE = "job.sbatch"
SUBMISSIONS_FILE = "submissions.jsonl"
#: The run directory and its state folder: only the user may list or enter them (the log, the
#: ledger and the checkpoints inside are the user's alone).
DIR_MODE = 0o700
#: ``job.sbatch``: the user's alone, and executable (it holds the ``env:`` values).
SCRIPT_MODE = 0o700
#: ``job.yaml``, the resolved spec: the user's alone (it holds the ``env:`` values).
SPEC_MODE = 0o600


#: A Slurm job id as hpcflow's verbs take it and as an index row must hold it: ``123``, or
#: ``120_3`` for an array element.
JOB_ID_RE = re.compile(r"[1-9][0-9]*(?:_[0-9]+)?")


def hpcflow_home() -> Path:
    """Per-user state folder: ``$HPCFLOW_HOME``, else ``$XDG_STATE_HOME/hpcflow``, else
    ``~/.local/state/hpcflow`` (XDG Base Directory specification)."""
    if env := os.environ.get("HPCFLOW_HOME"):
        return Path(env)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "hpcflow"


#: What the state folder's checks say about whoever else could write it.
HOME_RISK = ("whoever can write there can change hpcflow's job index and the SSH host keys it "
             "pinned (set HPCFLOW_HOME to another folder)")


def private_home(*, create: bool = True) -> Path:
    """:func:`hpcflow_home`, absolute, made 0700 one level at a time (each missing level) and
    checked: the user's, not writable by others nor by a group other than the user's private
    one, nor any folder above it (:func:`hpcflow.jobs.trust.make_private_dirs`); then mode
    0700. ``create=False``: a missing folder is left missing (a reader has nothing to read).

    Raises:
        SubmitError: the folder, or one above it, is not safe or cannot be made.
    """
    from hpcflow.jobs.trust import make_private_dirs

    home = Path(os.path.abspath(hpcflow_home().expanduser()))
    if create or os.path.lexists(home):
        make_private_dirs("hpcflow's state folder", home, state=False, risk=HOME_RISK)
    return home


@dataclass(frozen=True)
class JobRecord:
    """One submission, as the per-user index keeps it.

    Attributes:
        job_id: the Slurm job id (a string: array jobs look like ``123_4``).
        name: the job name.
        run_dir: absolute run directory.
        submitted_at: Unix time of the submission, in seconds.
    """

    job_id: str
    name: str
    run_dir: str
    submitted_at: float

    @property
    def log_path(self) -> Path:
        """The job log: ``<run_dir>/<name>-<job_id>.out`` (sbatch ``--output=%x-%j.out``)."""
        return Path(self.run_dir) / f"{self.name}-{self.job_id}.out"


def write_atomic(path: Path, text: str, *, mode: int | None = None) -> None:
    """Write ``text`` to ``path`` (its folder made first) with :func:`hpcflow.fsutil.write_atomic`:
    readers see the old file or the new one, never a half-written one. ``mode``: the file's exact
    permissions (default: ``0o666`` less the umask)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fsutil.write_atomic(path, text, mode=mode)


def open_append(path: Path) -> int:
    """Open (create, mode 0600) the regular file ``path`` for appending and return the
    descriptor. A symlink (``O_NOFOLLOW``), a FIFO (``O_NONBLOCK``: no wait for a reader) or
    any other non-regular file is refused, so an append never lands where a planted link points.

    Raises:
        OSError: the file cannot be opened, or is not a regular file
            (:class:`hpcflow.fsutil.NotRegularFile`).
    """
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(path, flags, 0o600)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise fsutil.NotRegularFile(errno.EINVAL, "not a regular file", str(path))
    return fd


def append_jsonl(path: Path, obj: dict[str, Any]) -> None:
    """Append one JSON line (a single ``write`` of a short line, so concurrent appenders do not
    interleave on a local filesystem) to a regular file only (:func:`open_append`).

    Raises:
        OSError: as :func:`open_append`, or the write failed.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = open_append(path)
    try:
        os.write(fd, (json.dumps(obj, sort_keys=True) + "\n").encode("utf-8"))
    finally:
        os.close(fd)


def read_jsonl(path: Path, max_bytes: int = fsutil.RECORD_MAX_BYTES) -> list[dict[str, Any]]:
    """Read a JSON-lines file, skipping lines that are not JSON objects (a torn last line after
    a crash is ignored, not fatal). A missing file gives an empty list.

    Only a regular file is read, and only its last ``max_bytes`` (the newest records; the cut
    line is dropped): a FIFO, a symlink or ``/dev/zero`` in place of a ledger gives an empty
    list, never a hang or a full memory (the ledger's bounded read,
    :func:`hpcflow.ledger.read_lines`).
    """
    return [obj for _, obj in read_jsonl_lines(path, max_bytes)]


def read_jsonl_lines(path: Path, max_bytes: int = fsutil.RECORD_MAX_BYTES
                     ) -> list[tuple[int, dict[str, Any]]]:
    """:func:`read_jsonl` with each object's line number (1-based; counted from the first line
    read when the file is longer than ``max_bytes``)."""
    lines = read_lines(path, max_bytes=max_bytes)
    out = []
    for number, line in enumerate(lines, start=1):
        try:
            obj = loads_bounded(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append((number, obj))
    return out


def record_submission(record: JobRecord, script_text: str, spec_text: str) -> None:
    """Keep the submission in the run directory and in the per-user index."""
    run_dir = Path(record.run_dir)
    append_jsonl(run_dir / SUBMISSIONS_FILE, {**asdict(record), "script": SCRIPT_FILE})
    append_jsonl(private_home() / "jobs.jsonl", asdict(record))


def write_run_files(run_dir: Path, spec_text: str, script_text: str, *,
                    keep_mode: bool = False) -> Path:
    """Write the resolved spec (mode :data:`SPEC_MODE`) and the rendered script (mode
    :data:`SCRIPT_MODE`) into the run directory (made by :func:`make_private_dirs`, which
    ``keep_mode`` is passed to).

    Returns:
        The path of the script (what ``sbatch`` is given).
    """
    make_private_dirs(run_dir, keep_mode=keep_mode)
    write_atomic(run_dir / SPEC_FILE, spec_text, mode=SPEC_MODE)
    script = run_dir / SCRIPT_FILE
    write_atomic(script, script_text, mode=SCRIPT_MODE)
    return script


def make_private_dirs(run_dir: Path, *, keep_mode: bool = False) -> None:
    """Create ``run_dir`` and its state folder, both mode :data:`DIR_MODE` whatever the umask.

    Args:
        run_dir: the run directory.
        keep_mode: leave the mode of an ``run_dir`` that exists already as it is (a shared
            project folder, ``--allow-shared-dir``); the state folder is made private anyway.

    Raises:
        OSError: a folder cannot be created or its mode set.
    """
    existed = run_dir.is_dir()
    run_dir.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    if not (existed and keep_mode):
        os.chmod(run_dir, DIR_MODE)
    state = state_dir(run_dir)
    if state.is_symlink():  # the ledger would be written wherever it points
        raise OSError(errno.ELOOP, "the state folder is a symlink", str(state))
    state.mkdir(exist_ok=True, mode=DIR_MODE)
    os.chmod(state, DIR_MODE)


def read_run_files(run_dir: Path) -> dict[str, str | None]:
    """The current spec and script of a run directory (``None`` for a file that is absent, or is
    not a regular file: a FIFO or a link is never read, and is replaced, not followed)."""
    out: dict[str, str | None] = {}
    for name in (SPEC_FILE, SCRIPT_FILE):
        try:
            raw = fsutil.read_capped(run_dir / name)
            out[name] = raw.decode("utf-8", errors="replace")
        except OSError:  # absent, not a file, or a run_dir that cannot be read: nothing to put back
            out[name] = None
    return out


def missing_dirs(path: Path) -> list[Path]:
    """The folders of ``path`` that do not exist yet, deepest first (what a ``mkdir -p`` of it
    would create, and so what undoing it removes)."""
    out = []
    while not path.exists() and path.parent != path:
        out.append(path)
        path = path.parent
    return out


def undo_run_files(run_dir: Path, previous: dict[str, str | None], created: list[Path]) -> None:
    """Undo :func:`write_run_files` after a refused submission: the run directory is left as it
    was. The spec and script of the job that used it before are put back, files that were not
    there are removed, and so are the (empty) folders in ``created`` (from :func:`missing_dirs`).
    """
    for name, text in previous.items():
        path = run_dir / name
        if text is None:
            path.unlink(missing_ok=True)
        else:
            write_atomic(path, text, mode=SCRIPT_MODE if name == SCRIPT_FILE else SPEC_MODE)
    for folder in created:
        try:
            folder.rmdir()
        except OSError:  # not empty (someone else wrote there) or already gone: keep it
            pass


def check_index_writable() -> Path:
    """Make sure the per-user index can be appended to, before anything is submitted.

    Raises:
        OSError: the index cannot be opened for appending (also when it is a symlink, a FIFO
            or not a regular file).
        SubmitError: the state folder is not safe or cannot be made (:func:`private_home`).
    """
    path = private_home() / "jobs.jsonl"
    os.close(open_append(path))
    return path


def known_jobs() -> list[JobRecord]:
    """Every submission in the per-user index, oldest first (a job id listed twice keeps its
    newest record)."""
    by_id: dict[str, JobRecord] = {}
    index = private_home(create=False) / "jobs.jsonl"
    for number, row in read_jsonl_lines(index):
        at = row.get("submitted_at")
        fields = [row.get(name) for name in ("job_id", "name", "run_dir")]
        rec = JobRecord(*map(str, fields), float(at)) if is_number(at) and all(
            isinstance(f, (str, int)) and not isinstance(f, bool) for f in fields) else None
        if rec is None or not JOB_ID_RE.fullmatch(rec.job_id):
            why = "no valid record" if rec is None else f"job id {rec.job_id!r} is not a Slurm id"
            print(f"hpcflow: warning: {index}:{number}: {why}; this row is skipped",
                  file=sys.stderr)
            continue
        by_id.pop(rec.job_id, None)
        by_id[rec.job_id] = rec
    return list(by_id.values())


def index_problem() -> str | None:
    """Why the per-user index cannot be read although it is there (a FIFO, a folder, a device
    in its place), or None (a regular file, or none yet)."""
    index = private_home(create=False) / "jobs.jsonl"
    try:
        info = os.lstat(index)
    except OSError:
        return None
    if stat.S_ISREG(info.st_mode):
        return None
    kind = ("a symlink" if stat.S_ISLNK(info.st_mode) else "a FIFO" if stat.S_ISFIFO(info.st_mode)
            else "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file")
    return f"the job index {index} is {kind}, so it is not read (it must be a regular file)"


def find_job(job_id: str) -> JobRecord | None:
    """The index record of ``job_id``, or None when this user never submitted it with hpcflow."""
    for rec in reversed(known_jobs()):
        if rec.job_id == job_id:
            return rec
    return None


def job_events(run_dir: str | Path, job_id: str) -> list[dict[str, Any]]:
    """The ledger events of one job (a run directory may hold several jobs over time), typed
    (:func:`hpcflow.ledger.read_ledger`; lines that do not decode are skipped)."""
    return job_ledger(run_dir, job_id).events


def job_ledger(run_dir: str | Path, job_id: str) -> Decoded:
    """:func:`job_events` and how many of the ledger's lines were skipped (not an event, or a
    member of the wrong kind: :mod:`hpcflow.contract`)."""
    return read_ledger(ledger_path(Path(run_dir)), job_id=str(job_id))


def now() -> float:
    """Unix time in seconds (a seam for tests)."""
    return time.time()
