"""The mirror process: watch the checkpoint folder and mirror each newly committed checkpoint.

One process per job, started by the batch script beside the program (never inside a rank), so
training never waits for S3: it only shares the CPU and the file system, and the process lowers
its own priority (``os.nice``). Each poll it looks for the newest committed unit not yet on S3
(older ones it skips: keep-last-k would drop them first), uploads and confirms it, writes the S3
record, then prunes S3 to the same k as ``checkpoint.keep``.

End of job: when the batch script creates the stop file (or on TERM) it *drains*: it mirrors the
newest committed unit (e.g. the preemption checkpoint) and exits. When the deadline passes first
(the batch script's KILL, or ``--drain-s`` after TERM) the half-written unit keeps no record:
abandoned, never taken as complete; the next mirror or the pruning removes it.

A refused write (no bucket, access denied, network) is a warning in the job log and a
``mirror_failed`` ledger event; the process carries on, and training is never touched.

Ledger events (``.hpcflow/events.jsonl``, docs/protocol.md): ``mirror_start`` (unit, step,
bytes), ``mirror_done`` (+ ``upload_s``, ``first_byte_s`` = from ``mirror_start`` to the
first bytes sent, the files being hashed before, ``lag_s`` = commit on disk to record on S3),
``mirror_failed`` (+ ``error``), ``mirror_abandoned``, ``mirror_pull`` (bytes, seconds).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcflow import ledger
from hpcflow.mirror import local, store
from hpcflow.spec.s3uri import S3Uri

#: Seconds before a failed unit is tried again (doubling up to 5 min).
RETRY_S = 15.0
MAX_RETRY_S = 300.0


@dataclass
class Ledger:
    """Where the mirror's ledger events go (the job's ``events.jsonl``), or nowhere.

    Attributes:
        path: the ledger file, or None to write no event.
        job_id: the job's id (a JSON string in each event).
        restart: ``SLURM_RESTART_COUNT`` of the attempt.
    """

    path: Path | None
    job_id: str = ""
    restart: int = 0

    def event(self, name: str, **fields: Any) -> None:
        """Append one event through the one ledger writer (:mod:`hpcflow.ledger`); a failed
        write is logged, never raised."""
        if self.path is None:
            return
        ledger.append_event(self.path, name, job_id=self.job_id, restart=self.restart, **fields)


def log(message: str) -> None:
    """One line on stderr (the job log), in the batch script's ``hpcflow:`` format."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    print(f"hpcflow: {stamp} mirror: {message}", file=sys.stderr, flush=True)


def describe(exc: BaseException) -> str:
    """A short, secret-free account of an S3 failure: the error code and message."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict) and response.get("Error"):
        err = response["Error"]
        return f"{err.get('Code', '?')}: {err.get('Message', '')}".strip()
    return f"{type(exc).__name__}: {exc}"


class Mirror:
    """Mirrors the committed units of one checkpoint folder to one S3 prefix.

    Args:
        root: the checkpoint folder.
        uri: the S3 prefix.
        keep: complete mirrors kept on S3 (``checkpoint.keep``).
        client: a boto3 S3 client.
        ledger: where events go.
        settings: transfer settings.
    """

    def __init__(self, root: Path, uri: S3Uri, keep: int, client: Any, ledger: Ledger,
                 settings: store.TransferSettings | None = None) -> None:
        self.root, self.uri, self.keep, self.client, self.ledger = root, uri, keep, client, ledger
        self.settings = settings or store.TransferSettings()
        self._done: set[tuple[str, str]] = set()  # (name, source_id) known complete on S3
        self._failed: dict[tuple[str, str], tuple[int, float]] = {}  # tries, next try (monotonic)
        self.current: local.Unit | None = None

    def pending(self) -> local.Unit | None:
        """The newest committed unit that is not known to be on S3 and not waiting for a retry."""
        units = local.scan_units(self.root)
        if not units:
            return None
        newest = units[-1]
        ident = (newest.name, newest.source_id)
        if ident in self._done:
            return None
        tries = self._failed.get(ident)
        if tries is not None and time.monotonic() < tries[1]:
            return None
        return newest

    def mirror(self, unit: local.Unit) -> bool:
        """Mirror ``unit`` unless S3 has it already; then prune. Never raises for S3 or
        file-system failures: they become a warning and a ``mirror_failed`` event.

        Returns:
            True when the unit is complete on S3.
        """
        ident = (unit.name, unit.source_id)
        self.current = unit
        try:
            existing = store.read_record(self.client, self.uri, unit.name)
            if existing is not None and existing.get("source_id") == unit.source_id:
                self._done.add(ident)
                return True
            total = sum(f.size_bytes for f in unit.files())
            self.ledger.event("mirror_start", unit=unit.name, step=unit.step, bytes=total)
            log(f"{unit.name} ({total} bytes) -> {self.uri}/{unit.name}/")
            started = time.monotonic()
            first_byte: list[float] = []
            record = store.upload_unit(self.client, self.uri, unit, self.settings,
                                       on_first_byte=lambda: first_byte.append(time.monotonic()))
            upload_s = time.monotonic() - started
            lag_s = max(0.0, record["mirrored_at"] - unit.commit_time)
            self._done.add(ident)
            self._failed.pop(ident, None)
            self.ledger.event("mirror_done", unit=unit.name, step=unit.step, bytes=total,
                              upload_s=round(upload_s, 3), lag_s=round(lag_s, 3),
                              first_byte_s=round(first_byte[0] - started, 3)
                              if first_byte else None)
            log(f"{unit.name} complete on S3 ({total} bytes in {upload_s:.1f} s, "
                f"{lag_s:.1f} s after its commit)")
            removed = store.prune(self.client, self.uri, self.keep)
            if removed:
                log(f"removed from S3 (keep {self.keep}): {', '.join(removed)}")
            return True
        except OSError as exc:
            if not unit.path.exists():  # pruned on disk meanwhile: a newer unit exists
                log(f"{unit.name} was removed from {self.root} before it was mirrored; skipped")
                self._done.add(ident)
                return False
            self._fail(unit, exc)
            return False
        except store.errors() as exc:
            self._fail(unit, exc)
            return False
        finally:
            self.current = None

    def _fail(self, unit: local.Unit, exc: BaseException) -> None:
        ident = (unit.name, unit.source_id)
        tries = self._failed.get(ident, (0, 0.0))[0] + 1
        delay = min(MAX_RETRY_S, RETRY_S * 2 ** (tries - 1))
        self._failed[ident] = (tries, time.monotonic() + delay)
        why = describe(exc)
        self.ledger.event("mirror_failed", unit=unit.name, step=unit.step, error=why[:300])
        log(f"WARNING: mirroring {unit.name} to {self.uri} failed ({why}); training goes on and "
            f"the checkpoint stays in {self.root}; next try in {delay:.0f} s")


def run(mirror: Mirror, *, poll_s: float, drain_s: float, stop_file: Path | None = None,
        parent_pid: int | None = None) -> int:
    """Poll and mirror until TERM/INT or until ``stop_file`` exists, then drain; stop at once,
    without a drain, when the process that started it (``parent_pid``, the job's supervisor;
    default the parent at start) is gone: Slurm's process tracking by parentage
    (``proctrack/linuxproc``) would not end an orphan with the job.

    The stop file is how the batch script ends the mirror: unlike a signal, it cannot arrive
    before the handler is installed (Python start-up takes a while), so a job whose program ends
    at once still gets its last commit mirrored. After TERM/INT the drain may take ``drain_s``
    seconds; the stop file sets no limit (the batch script enforces its own deadline).

    Returns:
        0 (a drain that completed or had nothing to do); the process exits with 3 from a
        timer thread when the drain deadline passes mid-upload (abandoned: no record).
    """
    stop = threading.Event()

    def on_term(signum: int, _frame: Any) -> None:
        if not stop.is_set():
            stop.set()
            _abandon_after(mirror, drain_s)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    try:
        store.abort_stale_uploads(mirror.client, mirror.uri)
    except store.errors() as exc:
        log(f"could not list unfinished uploads under {mirror.uri} ({describe(exc)})")
    next_scan = 0.0
    parent = os.getppid() if parent_pid is None else parent_pid
    while not stop.is_set() and not (stop_file is not None and stop_file.exists()):
        if os.getppid() != parent:  # the supervisor is gone: so is the job; never outlive it
            log("the job's supervisor is gone: stopping without a drain")
            return 0
        if time.monotonic() >= next_scan:
            unit = mirror.pending()
            if unit is not None:
                mirror.mirror(unit)
                continue
            next_scan = time.monotonic() + poll_s
        stop.wait(min(poll_s, 0.2))
    unit = mirror.pending()  # the drain: the newest commit (e.g. the preemption checkpoint)
    if unit is not None:
        log(f"the job is ending: mirroring {unit.name}")
        mirror.mirror(unit)
    return 0


def _abandon_after(mirror: Mirror, drain_s: float) -> None:
    """Start a timer that ends the process when the drain takes longer than ``drain_s``."""

    def abandon() -> None:
        unit = mirror.current
        if unit is not None:
            mirror.ledger.event("mirror_abandoned", unit=unit.name, step=unit.step)
            log(f"WARNING: {unit.name} not mirrored before the job ends; its S3 copy has no "
                "record and is never used")
        os._exit(3)

    timer = threading.Timer(max(0.0, drain_s), abandon)
    timer.daemon = True
    timer.start()
