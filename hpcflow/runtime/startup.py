"""Where an attempt's start-up goes, measured inside the rank: the ``hpcflow-startup`` line.

Rank 0 prints it once per process, at its first step, with the seconds of each phase from the
batch script's start to the end of that first step (docs/protocol.md, "What the runtime prints"):

- ``launch_s``: the batch script's start (``HPCFLOW_ATTEMPT_T0``, bash's ``EPOCHREALTIME``; after
  an in-job restart, the supervisor's start of the new step) to this process's start (the
  kernel's, ``/proc/self/stat`` field 22; proc(5)): the supervisor's start, srun, and any
  wrapper before the interpreter; for a warm standby (:mod:`hpcflow.runtime.standby`), to
  the moment it was handed the step (``HPCFLOW_WARM_T0``);
- ``imports_s``: the process's start to :meth:`Run.from_env`: the interpreter and the program's
  own imports (torch among them);
- ``join_s``: inside :meth:`Run.from_env`: the signal handler, the joined file and the process
  group (``init_process_group`` and its first barrier);
- ``build_s``: from there to :meth:`Run.restore` (the program builds its model, optimizer and
  data), or to the first step when the program does not restore;
- ``restore_s``: inside :meth:`Run.restore` (null without it);
- ``first_step_s``: from there to the end of the first step;
- ``total_s``: the batch script's start (else the process's) to the end of the first step.

A phase that cannot be measured (no ``HPCFLOW_ATTEMPT_T0`` outside an hpcflow job, or no
``/proc``) is null. Times are wall-clock seconds (``time.time()``), so the phases of one line
add up to ``total_s``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

from hpcflow.protocol import ENV_ATTEMPT_T0, ENV_WARM_T0, STARTUP_PHASES

PHASES = STARTUP_PHASES


def process_start_time(stat_path: str | os.PathLike[str] = "/proc/self/stat",
                       now: float | None = None) -> float | None:
    """This process's start as Unix time (seconds), from its age on the boot clock.

    The kernel records the start in clock ticks since boot (proc(5), ``/proc/[pid]/stat`` field
    22, ``starttime``); its age is ``CLOCK_BOOTTIME`` less that. Returns None where ``/proc``
    or the boot clock is missing or the file is garbled.
    """
    try:
        text = Path(stat_path).read_text()
        # Field 2 (the command name) is in parentheses and may hold spaces or parentheses.
        fields = text[text.rindex(")") + 2:].split()
        start_ticks = int(fields[19])  # field 22 overall; fields[0] is field 3
        boot_now = time.clock_gettime(time.CLOCK_BOOTTIME)
        ticks = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    age = boot_now - start_ticks / ticks
    return (time.time() if now is None else now) - max(0.0, age)


def attempt_start_time(environ: Mapping[str, str]) -> float | None:
    """``HPCFLOW_ATTEMPT_T0`` (Unix seconds with a fraction) or None when unset or garbled.

    Bash writes ``EPOCHREALTIME`` with the locale's decimal point (bash(1)), a comma in some."""
    raw = environ.get(ENV_ATTEMPT_T0, "").strip().replace(",", ".")
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if value > 0 else None


class StartupClock:
    """The marks of one process's start-up, in Unix seconds; :meth:`phases` turns them into the
    ``hpcflow-startup`` record. Marks: ``from_env``, ``joined``, ``restore``, ``restored``,
    ``first_step``; each is kept the first time it is set."""

    def __init__(self, attempt_t0: float | None, process_t0: float | None) -> None:
        self.attempt_t0 = attempt_t0
        self.process_t0 = process_t0
        self.marks: dict[str, float] = {}
        self.reported = False

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> StartupClock:
        """The clock of this process: a warm standby (``HPCFLOW_WARM_T0``, set when it was
        handed the step) counts from that hand-over, not from its own earlier start."""
        warm = environ.get(ENV_WARM_T0, "")
        try:
            process_t0 = float(warm) if warm else process_start_time()
        except ValueError:
            process_t0 = process_start_time()
        return cls(attempt_start_time(environ), process_t0)

    def mark(self, name: str, at: float | None = None) -> None:
        self.marks.setdefault(name, time.time() if at is None else at)

    def first_step(self) -> dict[str, float | None] | None:
        """Mark the end of the first step and return the record, once; None on later calls."""
        if self.reported:
            return None
        self.reported = True
        self.mark("first_step")
        return self.phases()

    def phases(self) -> dict[str, float | None]:
        """The record: each of :data:`PHASES` and ``total_s``, in seconds, or None when a mark it
        needs is missing. A negative span (clocks of two sources a little apart) counts as 0."""
        m = self.marks

        def span(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else round(max(0.0, b - a), 3)

        restored = m.get("restored")
        built = m.get("restore", m.get("first_step") if restored is None else None)
        out = {
            "launch_s": span(self.attempt_t0, self.process_t0),
            "imports_s": span(self.process_t0, m.get("from_env")),
            "join_s": span(m.get("from_env"), m.get("joined")),
            "build_s": span(m.get("joined"), built),
            "restore_s": span(m.get("restore"), restored),
            "first_step_s": span(restored, m.get("first_step")) if restored is not None else None,
        }
        start = self.attempt_t0 if self.attempt_t0 is not None else self.process_t0
        out["total_s"] = span(start, m.get("first_step"))
        return out
