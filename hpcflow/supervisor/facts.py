"""Gather what the rules decide on, from the run directory and Slurm (the supervisor's input edge).

Reads the protocol files of one attempt (docs/protocol.md, "The run directory"), the ledger,
the checkpoint folder and ``scontrol show job``. Every read is bounded and takes regular files
only; a file that is missing or malformed reads as "not there", never as an error, because a
rank killed mid-write leaves exactly that.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from hpcflow import protocol as P
from hpcflow.command import Runner, run_command
from hpcflow.slurm.parse import parse_duration_s, parse_scontrol_fields
from hpcflow.supervisor.model import RankExit

__all__ = ["Paths", "SlurmJob", "error_sigs", "latest_checkpoint", "rank_exits", "ranks_joined",
           "read_small", "slurm_job"]

#: Most bytes read from one protocol file (exit records, joined files, commit files are tens
#: of bytes).
SMALL_BYTES = 64 * 1024
def read_small(path: Path, limit: int = SMALL_BYTES) -> str | None:
    """The text of a small regular file, or None (missing, not regular, unreadable)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, limit).decode("utf-8", errors="replace")
    except OSError:
        return None
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Paths:
    """The protocol files of one attempt, named by :mod:`hpcflow.protocol`.

    Attributes:
        run_dir: the job's run directory (``HPCFLOW_RUN_DIR``).
        checkpoint_dir: ``HPCFLOW_CHECKPOINT_DIR``.
        job_id: ``SLURM_JOB_ID`` (names the per-attempt files).
        restart: ``SLURM_RESTART_COUNT``.
    """

    run_dir: Path
    checkpoint_dir: Path
    job_id: str
    restart: int

    @property
    def state(self) -> Path:
        return P.state_dir(self.run_dir)

    @property
    def ledger(self) -> Path:
        return P.ledger_path(self.run_dir)

    @property
    def flag(self) -> Path:
        return self.state / P.flag_name(self.job_id, self.restart)

    @property
    def committed(self) -> Path:
        return self.state / P.committed_name(self.job_id, self.restart)

    @property
    def joined(self) -> Path:
        return self.state / P.joined_name(self.job_id, self.restart)

    @property
    def exits(self) -> Path:
        return self.state / P.exits_name(self.job_id, self.restart)

    @property
    def done(self) -> Path:
        return self.state / P.done_name(self.job_id, self.restart)

    @property
    def notice(self) -> Path:
        return self.state / P.notice_name(self.job_id)

    @property
    def version(self) -> Path:
        return self.state / P.VERSION_FILE

    @property
    def warm_modules(self) -> Path:
        return self.state / P.warm_modules_name(self.job_id, self.restart)

    def errors(self, try_: int) -> Path:
        return self.state / P.errors_name(self.job_id, self.restart, try_)

    def heartbeat(self, try_: int) -> Path:
        return self.state / P.heartbeat_name(self.job_id, self.restart, try_)


def rank_exits(folder: Path, ntasks: int) -> list[RankExit | None]:
    """Each rank's exit record (index = rank), None where a rank left none."""
    out: list[RankExit | None] = []
    for rank in range(ntasks):
        text = read_small(folder / str(rank))
        parsed = P.parse_rank_exit(text) if text is not None else None
        out.append(RankExit(*parsed) if parsed else None)
    return out


_NODE = re.compile(r"[A-Za-z0-9._-]+")


def ranks_joined(folder: Path, ntasks: int) -> list[str | None]:
    """Per rank, the node its joined file names (``<pid> <node>``), ``""`` for a joined file
    without a well-formed node, None for a rank that did not join."""
    out: list[str | None] = []
    for rank in range(ntasks):
        text = read_small(folder / str(rank))
        if text is None:
            out.append(None)
            continue
        words = text.split()
        node = words[1] if len(words) >= 2 else ""
        out.append(node if _NODE.fullmatch(node) else "")
    return out


def error_sigs(folder: Path) -> tuple[str, ...]:
    """The ``<type>@<step>`` signatures of ranks that raised (``<rank>.sig``), sorted, unique."""
    try:
        names = sorted(p for p in folder.iterdir() if p.suffix == ".sig")
    except OSError:
        return ()
    sigs = {line.strip() for p in names for line in (read_small(p) or "").splitlines()
            if line.strip()}
    return tuple(sorted(sigs))


def committed_step(path: Path) -> int | None:
    """The step of the preemption commit file, None without one, ``-1`` when it names none."""
    text = read_small(path)
    if text is None:
        return None
    try:
        step = json.loads(text).get("step")
    except (ValueError, AttributeError):
        return -1
    return step if isinstance(step, int) and not isinstance(step, bool) else -1


def latest_checkpoint(checkpoint_dir: Path) -> int | None:
    """The highest step of a committed checkpoint in the checkpoint folder, in any of the forms
    the runtime and its adapters write (:data:`hpcflow.protocol.STEP_DIR_RE` and its
    neighbours): a ``step_<N>/`` or ``checkpoint-<N>/`` folder that holds a commit record, or a
    ``step_<N>.ckpt`` file. A link is never followed."""
    best: int | None = None
    try:
        entries = list(os.scandir(checkpoint_dir))
    except OSError:
        return None
    for entry in entries:
        step = _committed_step(entry)
        if step is not None and (best is None or step > best):
            best = step
    return best


def _committed_step(entry: os.DirEntry[str]) -> int | None:
    if entry.is_dir(follow_symlinks=False):
        m = P.STEP_DIR_RE.fullmatch(entry.name) or P.HF_CHECKPOINT_RE.fullmatch(entry.name)
        if m and (Path(entry.path) / P.COMMIT_RECORD).is_file():
            return int(m.group(1))
    elif entry.is_file(follow_symlinks=False):
        m = P.LIGHTNING_CHECKPOINT_RE.fullmatch(entry.name)
        if m:
            return int(m.group(1))
    return None


@dataclass(frozen=True)
class SlurmJob:
    """The few fields of ``scontrol show job`` the supervisor needs.

    Attributes:
        state: JobState (``RUNNING``, ``CANCELLED``, ...); ``""`` when Slurm did not answer.
        end_time_s: EndTime as Unix seconds, or None.
        reason: Reason (``None``, ``TimeLimit``, ...); ``""`` when Slurm did not answer.
        restarts: Restarts (how often the job was requeued), or None.
        limit_end_s: StartTime + TimeLimit as Unix seconds: where the job's time limit, as it is
            now, puts its end (a limit changed by ``scontrol update TimeLimit=`` moves it, a
            preemption does not); None when either is unknown or the limit is UNLIMITED.
    """

    state: str = ""
    end_time_s: int | None = None
    reason: str = ""
    restarts: int | None = None
    limit_end_s: int | None = None


def _parse_time(text: str) -> int | None:
    try:
        return int(datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").timestamp())
    except ValueError:
        return None


#: The ``scontrol show job -o`` fields the supervisor decides on.
JOB_KEYS = ("JobState", "EndTime", "Reason", "Restarts", "StartTime", "TimeLimit")


def limit_end_s(start_time: str, time_limit: str) -> int | None:
    """StartTime (local time) + TimeLimit (``[D-]HH:MM:SS``) of ``scontrol show job`` as Unix
    seconds; None when either does not parse or the limit is ``UNLIMITED``. Pure."""
    start = _parse_time(start_time)
    try:
        limit = parse_duration_s(time_limit)
    except ValueError:
        return None
    return start + limit if start is not None and limit > 0 else None


def job_fields(line: str) -> dict[str, str] | None:
    """The :data:`JOB_KEYS` of one ``scontrol show job -o`` line, or None when one of them shows
    up twice: a value the user chose (``JobName`` before them, ``Comment``, ``WorkDir`` and
    ``StdOut`` after) that holds `` JobState=...`` would otherwise stand in for Slurm's own
    field, and neither the first nor the last occurrence can be trusted (scontrol's one-line
    format has no quoting). Pure."""
    fields = [(k, v) for k, v in parse_scontrol_fields(line) if k in JOB_KEYS]
    keys = [k for k, _ in fields]
    if len(keys) != len(set(keys)):
        return None
    return {k: v.split(" ", 1)[0] if v else "" for k, v in fields}


def slurm_job(job_id: str, runner: Runner = run_command, timeout_s: float = 10.0) -> SlurmJob:
    """``scontrol show job -o <id>``'s JobState, EndTime (local time, scontrol(1)), Reason,
    Restarts, and the end its StartTime and TimeLimit give; an empty answer when scontrol fails
    or is slow, so a controller that is down never blocks a decision, and when one of those
    fields repeats (:func:`job_fields`).
    """
    try:
        result = runner(["scontrol", "show", "job", "-o", job_id], timeout_s=timeout_s)
    except (OSError, ValueError, TimeoutError, Exception):  # noqa: BLE001 - any failure: no answer
        return SlurmJob()
    if result.returncode != 0:
        return SlurmJob()
    fields = job_fields((result.stdout or "").split("\n", 1)[0])
    if fields is None:
        return SlurmJob()
    return SlurmJob(state=fields.get("JobState", ""),
                    end_time_s=_parse_time(fields.get("EndTime", "")),
                    reason=fields.get("Reason", ""),
                    restarts=int(fields["Restarts"]) if fields.get("Restarts", "").isdigit()
                    else None,
                    limit_end_s=limit_end_s(fields.get("StartTime", ""),
                                            fields.get("TimeLimit", "")))
