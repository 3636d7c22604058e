"""hpcflow's own records of a job, kept in its run directory and in a per-user index.

Slurm forgets a finished job after ``MinJobAge`` (default 300 s; slurm.conf(5)) and many clusters
have no accounting (``sacct``: "accounting storage is disabled"), so status must also work from
what hpcflow wrote itself: the spec, the rendered script, the submissions, and the ledger the
batch script appends (docs/protocol.md).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hpcflow import fsutil
from hpcflow.protocol import ledger_path, state_dir

SPEC_FILE = "job.yaml"
SCRIPT_FILE = "job.sbatch"
SUBMISSIONS_FILE = "submissions.jsonl"


def hpcflow_home() -> Path:
    """Per-user state folder: ``$HPCFLOW_HOME``, else ``$XDG_STATE_HOME/hpcflow``, else
    ``~/.local/state/hpcflow`` (XDG Base Directory specification)."""
    if env := os.environ.get("HPCFLOW_HOME"):
        return Path(env)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "hpcflow"


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


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (its folder made first) with :func:`hpcflow.fsutil.write_atomic`:
    readers see the old file or the new one, never a half-written one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fsutil.write_atomic(path, text)


def append_jsonl(path: Path, obj: dict[str, Any]) -> None:
    """Append one JSON line: :func:`hpcflow.fsutil.append_jsonl` (one ``O_APPEND`` write)."""
    fsutil.append_jsonl(path, obj)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Read a JSON-lines file, skipping lines that are not JSON objects (a torn last line after
    a crash is ignored, not fatal). A missing file gives an empty list."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def record_submission(record: JobRecord, script_text: str, spec_text: str) -> None:
    """Keep the submission in the run directory and in the per-user index."""
    run_dir = Path(record.run_dir)
    append_jsonl(run_dir / SUBMISSIONS_FILE, {**asdict(record), "script": SCRIPT_FILE})
    append_jsonl(hpcflow_home() / "jobs.jsonl", asdict(record))


def write_run_files(run_dir: Path, spec_text: str, script_text: str) -> Path:
    """Write the resolved spec and the rendered script into the run directory.

    Returns:
        The path of the script (what ``sbatch`` is given).
    """
    state_dir(run_dir).mkdir(parents=True, exist_ok=True)
    write_atomic(run_dir / SPEC_FILE, spec_text)
    script = run_dir / SCRIPT_FILE
    write_atomic(script, script_text)
    script.chmod(0o755)
    return script


def read_run_files(run_dir: Path) -> dict[str, str | None]:
    """The current spec and script of a run directory (``None`` for a file that is absent)."""
    out: dict[str, str | None] = {}
    for name in (SPEC_FILE, SCRIPT_FILE):
        try:
            out[name] = (run_dir / name).read_text(encoding="utf-8")
        except OSError:  # absent, or a run_dir that cannot be read: nothing to put back
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
            write_atomic(path, text)
            if name == SCRIPT_FILE:
                path.chmod(0o755)
    for folder in created:
        try:
            folder.rmdir()
        except OSError:  # not empty (someone else wrote there) or already gone: keep it
            pass


def check_index_writable() -> Path:
    """Make sure the per-user index can be appended to, before anything is submitted.

    Raises:
        OSError: the folder cannot be created or the index cannot be opened for appending.
    """
    path = hpcflow_home() / "jobs.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8"):
        pass
    return path


def known_jobs() -> list[JobRecord]:
    """Every submission in the per-user index, oldest first (a job id listed twice keeps its
    newest record)."""
    by_id: dict[str, JobRecord] = {}
    for row in read_jsonl(hpcflow_home() / "jobs.jsonl"):
        try:
            rec = JobRecord(str(row["job_id"]), str(row["name"]), str(row["run_dir"]),
                            float(row["submitted_at"]))
        except (KeyError, TypeError, ValueError):
            continue
        by_id.pop(rec.job_id, None)
        by_id[rec.job_id] = rec
    return list(by_id.values())


def find_job(job_id: str) -> JobRecord | None:
    """The index record of ``job_id``, or None when this user never submitted it with hpcflow."""
    for rec in reversed(known_jobs()):
        if rec.job_id == job_id:
            return rec
    return None


def job_events(run_dir: str | Path, job_id: str) -> list[dict[str, Any]]:
    """The ledger events of one job (a run directory may hold several jobs over time)."""
    events = read_jsonl(ledger_path(Path(run_dir)))
    return [e for e in events if str(e.get("job_id")) == str(job_id)]


def now() -> float:
    """Unix time in seconds (a seam for tests)."""
    return time.time()
