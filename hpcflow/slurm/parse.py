"""Pure parsers for the output of Slurm's commands (sbatch, squeue, scontrol, sacct).

Each parser is tested against output captured from a real Slurm 22.05 cluster
(``tests/unit/slurm/slurm_output/``). The command lines that produce the parsed formats live
here too, so the client and the parsers cannot drift apart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# ---- squeue ---------------------------------------------------------------------------------

#: squeue ``-O`` fields (squeue(1), ``--Format``). ``:0`` means "no padding, no truncation";
#: the text after the width is a suffix, used here as the delimiter. Name goes last because a job
#: name may itself hold the delimiter.
SQUEUE_FIELDS = (
    "JobArrayID",
    "JobID",
    "State",
    "Reason",
    "NumNodes",
    "NodeList",
    "TimeUsed",
    "RestartCnt",
    "Name",
)
SQUEUE_FORMAT = ",".join(f"{field}:0|" for field in SQUEUE_FIELDS[:-1]) + f",{SQUEUE_FIELDS[-1]}:0"


@dataclass(frozen=True)
class QueueEntry:
    """One line of squeue: a job, or one element of a job array.

    Attributes:
        job_id: the id to use with scontrol/scancel: ``"123"``, or ``"120_3"`` for an array element.
        raw_job_id: the element's own numeric id (``SLURM_JOB_ID`` inside it).
        name: the job name.
        state: the long state name, e.g. ``RUNNING``, ``PENDING``, ``COMPLETED``, ``REQUEUED``.
        reason: why it is pending or ended (``BeginTime``, ``Resources``, ``NonZeroExitCode``);
            ``None`` when Slurm says ``None``.
        nodes: node count (requested while pending, allocated once running).
        nodelist: allocated nodes as a hostlist expression; ``""`` while pending.
        time_used_s: run time of the current attempt, in seconds.
        restart_count: times the job was requeued (squeue ``RestartCnt``).
    """

    job_id: str
    raw_job_id: str
    name: str
    state: str
    reason: str | None
    nodes: int
    nodelist: str
    time_used_s: int
    restart_count: int


def parse_squeue(text: str) -> list[QueueEntry]:
    """Parse ``squeue --noheader -O SQUEUE_FORMAT`` output (one job per line).

    Raises:
        ValueError: a line does not have the expected fields (the message quotes it).
    """
    entries = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("|", len(SQUEUE_FIELDS) - 1)
        if len(parts) != len(SQUEUE_FIELDS):
            raise ValueError(f"unexpected squeue line (want {len(SQUEUE_FIELDS)} fields): {line!r}")
        array_id, raw_id, state, reason, nodes, nodelist, used, restarts, name = parts
        try:
            entries.append(
                QueueEntry(
                    job_id=array_id.strip(),
                    raw_job_id=raw_id.strip(),
                    name=name,
                    state=state.strip(),
                    reason=None if reason.strip() in ("", "None") else reason.strip(),
                    nodes=int(nodes),
                    nodelist=nodelist.strip(),
                    time_used_s=parse_duration_s(used),
                    restart_count=int(restarts),
                )
            )
        except ValueError as exc:
            raise ValueError(f"unexpected squeue line {line!r}: {exc}") from None
    return entries


_DURATION_RE = re.compile(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)")


def parse_duration_s(text: str) -> int:
    """``"1-02:03:04"``, ``"02:03:04"``, ``"3:04"`` -> seconds (squeue ``TimeUsed``, sacct
    ``Elapsed``). ``"INVALID"``, ``"UNLIMITED"`` and ``""`` give 0.

    Raises:
        ValueError: any other text.
    """
    text = text.strip()
    if text in ("", "INVALID", "UNLIMITED", "Partition_Limit", "N/A"):
        return 0
    m = _DURATION_RE.fullmatch(text)
    if not m:
        raise ValueError(f"not a Slurm duration: {text!r}")
    days, hours, minutes, seconds = (int(g) if g else 0 for g in m.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


# ---- sbatch ---------------------------------------------------------------------------------


def parse_sbatch_parsable(text: str) -> str:
    """The job id from ``sbatch --parsable`` output: ``"123"`` or ``"123;cluster"``
    (sbatch(1), ``--parsable``).

    Raises:
        ValueError: no job id in the output.
    """
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    m = re.fullmatch(r"(\d+)(?:;\S+)?", lines[-1]) if lines else None
    if not m:
        raise ValueError(f"no job id in sbatch --parsable output: {text!r}")
    return m.group(1)


# ---- scontrol -------------------------------------------------------------------------------

# A field starts where a space is followed by "Key=" with a capitalised key. Keys may hold '/'
# and ':' ("CPUs/Task", "AllocNode:Sid", "ReqB:S:C:T"). Values such as Command=, WorkDir=,
# StdOut= and Comment= may hold spaces; a space followed by a lower-case "x=" stays in the value.
_FIELD_START_RE = re.compile(r"(?:^| )([A-Z][A-Za-z0-9_/:]*)=")


def parse_scontrol_record(line: str) -> dict[str, str]:
    """Parse one ``scontrol show <entity> -o`` line into ``{key: value}``.

    Values keep their inner spaces (``Command=/a dir/job.sh``); trailing spaces are dropped.
    A value that itself contains `` Word=`` (capitalised) would be split there: scontrol's
    one-line format has no quoting, so that case cannot be told apart.
    """
    return dict(parse_scontrol_fields(line))


def parse_scontrol_fields(line: str) -> list[tuple[str, str]]:
    """Every ``(key, value)`` of one ``scontrol show <entity> -o`` line, in order, repeats
    kept: a value the user chose (``JobName``, ``Comment``, ``WorkDir``) that holds
    `` UserId=...`` shows up as a second ``UserId`` here, which a caller that must trust the
    field can refuse (:func:`parse_scontrol_record` keeps the last)."""
    text = line.rstrip("\n")
    starts = list(_FIELD_START_RE.finditer(text))
    fields: list[tuple[str, str]] = []
    for i, m in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
        fields.append((m.group(1), text[m.end() : end].rstrip(" ")))
    return fields


def parse_scontrol_show_job(text: str) -> list[dict[str, str]]:
    """Parse ``scontrol show job -o`` output: one record per line (an array gives several)."""
    return [parse_scontrol_record(line) for line in text.splitlines() if "=" in line]


def pick_job_record(records: list[dict[str, str]], job_id: str) -> dict[str, str] | None:
    """The record for ``job_id`` (``"123"`` or ``"120_3"``) among ``scontrol show job`` records.

    For an array's own id Slurm lists every element; the one whose ``JobId`` equals the id is
    returned, else the first element of that array. A record of any other job is never
    returned (None instead).
    """
    for record in records:
        if record.get("JobId") == job_id:
            return record
        if f"{record.get('ArrayJobId')}_{record.get('ArrayTaskId')}" == job_id:
            return record
    return next((r for r in records if r.get("ArrayJobId") == job_id), None)


# ---- sacct ----------------------------------------------------------------------------------

#: sacct ``--format`` fields (sacct(1), "Job Accounting Fields"); JobName last as it may hold '|'.
SACCT_FIELDS = (
    "JobID",
    "JobIDRaw",
    "State",
    "ExitCode",
    "ElapsedRaw",
    "Start",
    "End",
    "NNodes",
    "NodeList",
    "JobName",
)


@dataclass(frozen=True)
class AcctRow:
    """One sacct row: a job attempt or one of its steps (``123.batch``, ``123.0``).

    Attributes:
        job_id: sacct ``JobID`` (``123``, ``120_3``, ``123.batch``, ``123.0``).
        job_id_raw: sacct ``JobIDRaw``, the numeric id (plus step suffix).
        state: e.g. ``COMPLETED``, ``FAILED``, ``REQUEUED``, ``CANCELLED by 0``.
        exit_code: the exit status (first half of ``ExitCode`` ``status:signal``).
        exit_signal: the signal that ended it, 0 if none.
        elapsed_s: run time in seconds (``ElapsedRaw``).
        start: start time as Slurm prints it (``Unknown`` or ``None`` when not started).
        end: end time as Slurm prints it.
        nodes: node count.
        nodelist: hostlist expression, ``None assigned`` when none.
        name: job or step name.
    """

    job_id: str
    job_id_raw: str
    state: str
    exit_code: int
    exit_signal: int
    elapsed_s: int
    start: str
    end: str
    nodes: int
    nodelist: str
    name: str


def parse_sacct(text: str) -> list[AcctRow]:
    """Parse ``sacct --parsable2 --noheader --format=<SACCT_FIELDS>`` output.

    Raises:
        ValueError: a line does not have the expected fields.
    """
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("|", len(SACCT_FIELDS) - 1)
        if len(parts) != len(SACCT_FIELDS):
            raise ValueError(f"unexpected sacct line (want {len(SACCT_FIELDS)} fields): {line!r}")
        job_id, raw, state, exit_code, elapsed, start, end, nodes, nodelist, name = parts
        status, _, sig = exit_code.partition(":")
        try:
            rows.append(
                AcctRow(
                    job_id=job_id,
                    job_id_raw=raw,
                    state=state,
                    exit_code=int(status or 0),
                    exit_signal=int(sig or 0),
                    elapsed_s=int(elapsed or 0),
                    start=start,
                    end=end,
                    nodes=int(nodes or 0),
                    nodelist=nodelist,
                    name=name,
                )
            )
        except ValueError as exc:
            raise ValueError(f"unexpected sacct line {line!r}: {exc}") from None
    return rows
