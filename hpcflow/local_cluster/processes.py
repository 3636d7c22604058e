"""Process bookkeeping for the local cluster: which daemons hpcflow started, by pid.

A pid alone can be reused by another process after a reboot or a long time; each record also
keeps the process start time (``/proc/<pid>/stat`` field 22, clock ticks since boot; proc(5)),
so ``down`` never signals a process that hpcflow did not start.
"""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from hpcflow.fsutil import write_json_atomic


@dataclass(frozen=True)
class DaemonRecord:
    """One daemon hpcflow started.

    Attributes:
        name: ``munged``, ``slurmctld`` or ``slurmd:<node>``.
        pid: its process id.
        start_ticks: its start time in clock ticks since boot (proc(5) ``stat`` field 22).
    """

    name: str
    pid: int
    start_ticks: int


def start_ticks(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot, or None if it does not exist."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: split after it.
    after = raw[raw.rfind(")") + 2 :].split()
    try:
        return int(after[19])  # field 22 overall; field 3 is after[0]
    except (IndexError, ValueError):
        return None


def is_zombie(pid: int) -> bool:
    """True when ``pid`` has exited but was not yet reaped (state Z)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return raw[raw.rfind(")") + 2 :].startswith("Z")


def is_alive(rec: DaemonRecord) -> bool:
    """True when the recorded process still runs (same pid, same start time, not a zombie)."""
    return start_ticks(rec.pid) == rec.start_ticks and not is_zombie(rec.pid)


def record_for(name: str, pid: int) -> DaemonRecord | None:
    """A record for a running ``pid``, or None when it is not running."""
    ticks = start_ticks(pid)
    return None if ticks is None else DaemonRecord(name, pid, ticks)


def load_records(path: Path) -> dict[str, DaemonRecord]:
    """Read the pid records; a missing or unreadable file means no records."""
    try:
        raw = json.loads(path.read_text())
        return {k: DaemonRecord(**v) for k, v in raw.items()}
    except (OSError, ValueError, TypeError):
        return {}


def save_records(path: Path, records: dict[str, DaemonRecord]) -> None:
    """Write the pid records atomically (temp file + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, {k: asdict(v) for k, v in records.items()}, indent=2)


def stop(rec: DaemonRecord, timeout_s: float = 10.0) -> bool:
    """Stop a recorded daemon: TERM, wait up to ``timeout_s`` seconds, then KILL.

    Returns:
        True if the process was running and is now gone; False if it was not running.
    """
    if not is_alive(rec):
        return False
    try:
        os.kill(rec.pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not is_alive(rec):
            return True
        time.sleep(0.1)
    try:
        os.kill(rec.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return True


def read_pid_file(path: Path, timeout_s: float = 15.0) -> int | None:
    """Wait up to ``timeout_s`` seconds for a daemon's pid file and return its pid."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            pid = int(path.read_text().strip())
            if start_ticks(pid) is not None:
                return pid
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    return None


def environ(pid: int) -> dict[str, str]:
    """The environment ``pid`` started with (``/proc/<pid>/environ``; proc(5)), or ``{}`` when
    the process is gone or not readable."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(kv.split("=", 1) for kv in raw.decode(errors="replace").split("\0") if "=" in kv)


def job_processes(job_id: str, *, node: str | None = None,
                  command_has: str | None = None) -> dict[int, dict[str, str]]:
    """The processes Slurm started for ``job_id`` on this machine, with their environments.

    Every node of the local cluster runs on this host, so a job's batch script, srun and ranks
    are all visible here; Slurm gives each ``SLURM_JOB_ID`` and ``SLURMD_NODENAME`` (and each
    task ``SLURM_PROCID``) in its environment (srun(1), sbatch(1) "OUTPUT ENVIRONMENT VARIABLES").

    Args:
        job_id: the numeric Slurm job id.
        node: only the processes on this emulated node.
        command_has: only the processes whose command line contains this text.

    Returns:
        pid -> environment, for the processes that match (none once the job has ended).
    """
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        env = environ(int(entry.name))
        if env.get("SLURM_JOB_ID") != job_id or (node and env.get("SLURMD_NODENAME") != node):
            continue
        if command_has is not None:
            try:
                if command_has.encode() not in (entry / "cmdline").read_bytes():
                    continue
            except OSError:
                continue
        out[int(entry.name)] = env
    return out


def rank_pid(job_id: str, rank: int, command_has: str) -> int | None:
    """The pid of task ``rank`` (``SLURM_PROCID``) of a step of ``job_id`` whose command line
    contains ``command_has`` (e.g. the training module), or None while there is none.

    Only a step's tasks count (their environment has ``SLURM_STEP_ID``, srun(1)): the batch
    script and hpcflow's supervisor also carry ``SLURM_PROCID=0`` (sbatch(1)), and the
    supervisor's command line names the program too; nor does a warm standby rank still waiting
    (:func:`is_waiting_standby`)."""
    for pid, env in job_processes(job_id, command_has=command_has).items():
        if env.get("SLURM_PROCID") == str(rank) and "SLURM_STEP_ID" in env \
                and not is_waiting_standby(pid):
            return pid
    return None


def is_waiting_standby(pid: int) -> bool:
    """``pid`` is a warm standby rank that has not been handed a step yet: it names itself
    :data:`~hpcflow.runtime.standby.WAITING_NAME` (``/proc/<pid>/comm``, proc(5)) until then."""
    from hpcflow.runtime.standby import WAITING_NAME

    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == WAITING_NAME
    except OSError:
        return False
