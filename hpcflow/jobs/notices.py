"""Spot interruption notices in a job's records: when each came, and how long the job took to
commit its checkpoint after it (``hpcflow report``: "spot notice -> committed in N s").

Sources: the ledger's ``spot_notice`` events (written by ``hpcflow spot-watch``,
:mod:`hpcflow.spot.watcher`) and the commit file rank 0 writes after the preemption checkpoint of
an attempt is committed (``committed-<job>-<restart>.json``: ``{"step", "time"}``,
docs/protocol.md). Reads files; never raises for a missing or torn one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hpcflow import fsutil, protocol
from hpcflow.contract import is_int, is_number, loads_bounded

EVENT = protocol.EVENT_SPOT_NOTICE


@dataclass(frozen=True)
class NoticeOutcome:
    """One spot notice as one attempt of the job received it.

    Attributes:
        restart: the attempt (``SLURM_RESTART_COUNT``).
        action: ``terminate``, ``stop`` or ``hibernate``.
        node: the node whose watcher acted.
        noticed_at: Unix time the watcher handed the notice to the job, in seconds.
        deadline: the notice's time (when EC2 acts), Unix seconds.
        committed_at: Unix time the attempt's preemption checkpoint was committed, or None.
        step: the committed step, or None.
    """

    restart: int
    action: str
    node: str
    noticed_at: float
    deadline: int
    committed_at: float | None
    step: int | None

    @property
    def committed_in_s(self) -> float | None:
        """Seconds from the notice to the commit (None without a commit)."""
        return None if self.committed_at is None else self.committed_at - self.noticed_at

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "committed_in_s": self.committed_in_s}

    def line(self) -> str:
        """``spot notice (terminate, n1) -> committed step 12 in 4 s, 111 s before the
        deadline``, or ``... -> no checkpoint committed``."""
        head = f"attempt {self.restart + 1}: spot notice ({self.action}, {self.node}) -> "
        if self.committed_at is None:
            return head + "no checkpoint committed"
        return (head + f"committed step {self.step} in {self.committed_in_s:.0f} s, "
                f"{self.deadline - self.committed_at:.0f} s before the deadline")


def _commit(run_dir: Path, job_id: str, restart: int) -> tuple[float | None, int | None]:
    path = protocol.state_dir(run_dir) / protocol.committed_name(job_id, restart)
    try:
        doc = loads_bounded(fsutil.read_capped(path, 64 * 1024))  # a few dozen bytes when real
    except (OSError, ValueError):
        return None, None
    if not isinstance(doc, dict) or not is_number(doc.get("time")) or not is_int(doc.get("step")):
        return None, None
    return float(doc["time"]), doc["step"]


def notice_outcomes(run_dir: str | Path, job_id: str,
                    events: Sequence[Mapping[str, Any]]) -> list[NoticeOutcome]:
    """The job's spot notices, oldest first, one per attempt (the first notice an attempt got:
    the watchers of a multi-node job each record theirs)."""
    out: dict[int, NoticeOutcome] = {}
    for ev in events:
        if ev.get("event") != EVENT or str(ev.get("job_id")) != str(job_id):
            continue
        try:
            restart = int(ev.get("restart", 0))
            noticed_at, deadline = float(ev["time"]), int(ev["notice_time"])
        except (KeyError, TypeError, ValueError, OverflowError):
            continue
        if restart in out:
            continue
        committed_at, step = _commit(Path(run_dir), str(job_id), restart)
        out[restart] = NoticeOutcome(restart, str(ev.get("action", "?")), str(ev.get("node", "?")),
                                     noticed_at, deadline, committed_at, step)
    return list(out.values())
