"""The exception a rank raised, read back for ``hpcflow report`` (docs/protocol.md, "Ending kinds").

Source: the errors folder of one step (``.hpcflow/errors-<job>-<restart>-<try>/``, named in the
ledger's ``program_error`` event; :func:`hpcflow.protocol.errors_name`), where each rank that left
its :class:`~hpcflow.runtime.run.Run` with an exception wrote ``<rank>.json`` (``rank``, ``step``,
``type``, ``message``, ``traceback``, ``peer_failure``; :func:`hpcflow.runtime.heartbeat.record_error`)
and the step's ``step_end`` event, whose ``first_failure`` names the rank that exited first with
an error. Reads files; never raises for a missing or torn one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hpcflow import fsutil
from hpcflow import protocol as P
from hpcflow.contract import loads_bounded

#: Most traceback lines the report keeps: the last ones (where the error was raised).
TRACEBACK_LINES = 30
#: Most characters the report keeps of them, also from the end.
TRACEBACK_CHARS = 4000
#: The most of one traceback record that is read (a real one is a few KiB); a longer one is
#: not JSON once cut, so it is skipped.
RECORD_MAX_BYTES = 1024 * 1024


@dataclass(frozen=True)
class RankError:
    """The exception of the first failing rank of one step.

    Attributes:
        rank: the rank.
        try_: the in-job try of the step (0 for the first ``srun`` of an attempt).
        step: the last step the rank completed before it raised.
        type: the exception's type (``ValueError``).
        message: its message, at most :data:`TRACEBACK_CHARS` characters.
        traceback: the last :data:`TRACEBACK_LINES` lines of the traceback (a first line says
            how many were left out), at most :data:`TRACEBACK_CHARS` characters.
        file: the full record, relative to the run directory.
    """

    rank: int
    try_: int
    step: int | None
    type: str
    message: str
    traceback: str
    file: str

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["try"] = out.pop("try_")
        return out


def error_lines(error: Mapping[str, Any]) -> list[str]:
    """A heading and the indented traceback of :meth:`RankError.to_dict`'s ``error``, for the
    text report."""
    head = (f"traceback of rank {error.get('rank')} (try {error.get('try')}, after step "
            f"{error.get('step')}; {error.get('file')}):")
    return [head, *("  " + line for line in str(error.get("traceback", "")).splitlines())]


def bounded(text: str, max_lines: int = TRACEBACK_LINES, max_chars: int = TRACEBACK_CHARS) -> str:
    """The last ``max_lines`` lines of ``text`` and at most ``max_chars`` characters of them, with
    a first line saying how many lines were left out (none when it fits)."""
    lines = text.rstrip("\n").splitlines()
    kept = lines[-max_lines:]
    while len(kept) > 1 and sum(len(line) + 1 for line in kept) > max_chars:
        kept = kept[1:]
    if kept and len(kept[0]) > max_chars:  # one line longer than the whole bound
        kept = [kept[0][-max_chars:]]
    cut = len(lines) - len(kept)
    return "\n".join(([f"... ({cut} line(s) left out)"] if cut else []) + kept)


def read_step_error(run_dir: Path, folder: str, try_: int,
                    first_rank: int | None = None) -> RankError | None:
    """The first failing rank's exception in ``<run_dir>/<folder>``, or ``None`` (no record).

    The rank is ``first_rank`` (the step_end's first failure) when its record exists and is not
    a peer failure; else the lowest rank whose record is not a peer failure; else the lowest rank
    with a record (every one only saw a peer go away).
    """
    records: dict[int, Mapping[str, Any]] = {}
    base = Path(run_dir) / folder
    try:
        paths = sorted(base.glob("*.json"))
    except OSError:
        return None
    for path in paths:
        if not path.stem.isdigit():
            continue
        try:
            doc = loads_bounded(fsutil.read_capped(path, RECORD_MAX_BYTES).decode(
                "utf-8", errors="replace"), max_chars=RECORD_MAX_BYTES)
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("traceback"), str):
            records[int(path.stem)] = doc
    if not records:
        return None
    own = sorted(r for r, d in records.items() if not d.get("peer_failure"))
    if first_rank in own:
        rank = first_rank
    else:
        rank = own[0] if own else min(records)
    doc = records[rank]
    step = doc.get("step")
    return RankError(rank, try_, step if isinstance(step, int) else None,
                     str(doc.get("type", "?")), str(doc.get("message", ""))[:TRACEBACK_CHARS],
                     bounded(doc["traceback"]), f"{folder}/{rank}.json")


def step_errors(run_dir: str | Path, job_id: str,
                events: Sequence[Mapping[str, Any]]) -> dict[tuple[int, int], RankError]:
    """Every recorded exception of one job, keyed by ``(restart, try)``.

    ``events``: the job's ledger, oldest first. Each attempt's steps are counted by its
    ``step_end`` events (the k-th is try k); a step's folder is the one its ``program_error``
    event names, else :func:`hpcflow.protocol.errors_name` of the job id.
    """
    out: dict[tuple[int, int], RankError] = {}
    named: dict[tuple[int, int], str] = {}
    ends: dict[tuple[int, int], Mapping[str, Any]] = {}
    tries: dict[int, int] = {}
    for ev in events:
        restart = _int(ev.get("restart"), 0)
        if ev.get("event") == P.EVENT_PROGRAM_ERROR and isinstance(ev.get("errors"), str):
            named[(restart, _int(ev.get("try"), 0))] = ev["errors"]
        elif ev.get("event") == P.EVENT_STEP_END:
            ends[(restart, tries.get(restart, 0))] = ev
            tries[restart] = tries.get(restart, 0) + 1
    for (restart, try_), end in ends.items():
        folder = named.get((restart, try_)) or (
            f"{P.STATE_DIR}/{P.errors_name(str(job_id), restart, try_)}")
        first = end.get("first_failure")
        rank = _int(first.get("rank"), -1) if isinstance(first, Mapping) else None
        err = read_step_error(Path(run_dir), folder, try_, rank)
        if err is not None:
            out[(restart, try_)] = err
    return out


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return default
