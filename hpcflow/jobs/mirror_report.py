"""The S3 mirror's share of a job's report: bytes mirrored and lag, from the ledger events the
mirror process appends (``mirror_done``, ``mirror_failed``, ``mirror_abandoned``,
``mirror_pull``; :mod:`hpcflow.mirror.watch`). Pure: the caller passes the events, decoded
by :func:`hpcflow.ledger.read_ledger` (their members of the kinds :mod:`hpcflow.contract`
gives)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from hpcflow import protocol as P


@dataclass(frozen=True)
class MirrorSummary:
    """What the mirror did for one job (all attempts).

    Attributes:
        mirrored: checkpoints made complete on S3.
        bytes: bytes of those checkpoints.
        last_step: the newest step mirrored, or None.
        last_lag_s: seconds from that checkpoint's commit on disk to its S3 record, or None.
        max_lag_s: the largest such lag, or None.
        failed: failed mirror attempts (refused writes, network), each also a log warning.
        abandoned: uploads cut off at the end of an attempt (never used).
        pulled_step: the step pulled from S3 into an empty checkpoint folder, or None.
        pulled_bytes: bytes of that pull (0 without one).
    """

    mirrored: int = 0
    bytes: int = 0
    last_step: int | None = None
    last_lag_s: float | None = None
    max_lag_s: float | None = None
    failed: int = 0
    abandoned: int = 0
    pulled_step: int | None = None
    pulled_bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        """One line for the report's text output."""
        parts = [f"{self.mirrored} checkpoint(s), {self.bytes / 2**20:.1f} MiB"]
        if self.last_step is not None:
            parts.append(f"last step {self.last_step} lag {self.last_lag_s:.1f} s "
                         f"(max {self.max_lag_s:.1f} s)")
        if self.failed or self.abandoned:
            parts.append(f"{self.failed} failed, {self.abandoned} abandoned")
        if self.pulled_step is not None:
            parts.append(f"pulled step {self.pulled_step} ({self.pulled_bytes / 2**20:.1f} MiB)")
        return "S3 mirror: " + "; ".join(parts)


def summarise(events: Sequence[Mapping[str, Any]]) -> MirrorSummary | None:
    """The mirror summary of a job's ledger events, or None when no mirror ran."""
    done = [e for e in events if e.get("event") == P.EVENT_MIRROR_DONE]
    kinds = {str(e.get("event")) for e in events}
    if not kinds & {P.EVENT_MIRROR_START, P.EVENT_MIRROR_DONE, P.EVENT_MIRROR_FAILED,
                    P.EVENT_MIRROR_ABANDONED, P.EVENT_MIRROR_PULL, P.EVENT_MIRROR_PULL_FAILED}:
        return None
    lags = [float(e.get("lag_s", 0.0)) for e in done]
    pulls = [e for e in events if e.get("event") == P.EVENT_MIRROR_PULL]
    return MirrorSummary(
        mirrored=len(done), bytes=sum(int(e.get("bytes", 0)) for e in done),
        last_step=done[-1].get("step") if done else None,
        last_lag_s=lags[-1] if lags else None, max_lag_s=max(lags) if lags else None,
        failed=sum(1 for e in events
                   if e.get("event") in (P.EVENT_MIRROR_FAILED, P.EVENT_MIRROR_PULL_FAILED)),
        abandoned=sum(1 for e in events if e.get("event") == P.EVENT_MIRROR_ABANDONED),
        pulled_step=pulls[-1].get("step") if pulls else None,
        pulled_bytes=int(pulls[-1].get("bytes", 0)) if pulls else 0,
    )
