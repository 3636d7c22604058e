"""Each rank's own ending, recorded for the batch script and the report (docs/protocol.md,
"Ending kinds"). Torch-free and cheap: one small file per rank, one per attempt.

srun reports one status for the whole step (often the 143 or 137 of a rank it killed after
another one failed), so each rank records its own: the status it leaves with and why, at the
moment it leaves its :class:`~hpcflow.runtime.run.Run`. A rank killed by a signal records
nothing, which is how a killed rank is told apart from one that failed (a full disk: status 5).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from hpcflow.errors import HpcflowError
from hpcflow.fsutil import write_atomic
from hpcflow.protocol import EXIT_PREEMPTED, done_name, exits_name, state_dir

#: Longest reason kept (characters): the first line of the exception, cut.
REASON_MAX = 200


def exit_status_of(exc: BaseException | None) -> tuple[int, str]:
    """The status a rank leaving with ``exc`` ends with, and a one-line reason.

    ``None`` -> ``(0, "closed")``; :class:`SystemExit` -> its code; an :class:`HpcflowError`
    -> its ``exit_code`` (a :class:`~hpcflow.errors.CheckpointError` is 5); anything else -> 1.
    The reason is ``<ExceptionType>: <first line of the message>`` (``... <last line>`` too
    when the message holds a traceback), at most :data:`REASON_MAX` characters, without
    control characters.
    """
    if exc is None:
        return 0, "closed"
    if isinstance(exc, SystemExit):
        code = exc.code
        status = code if isinstance(code, int) else (0 if code is None else 1)
        return status, "preempted" if status == EXIT_PREEMPTED else f"SystemExit: {code}"
    status = exc.exit_code if isinstance(exc, HpcflowError) else 1
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    reason = type(exc).__name__
    if len(lines) == 1:
        reason += f": {lines[0]}"
    elif lines:  # a message with a traceback in it: what failed is on its last line
        reason += f": {lines[0][:REASON_MAX // 2]} ... {lines[-1]}"
    return status, "".join(c if c.isprintable() else " " for c in reason)[:REASON_MAX]


def record_exit(run_dir: Path | None, job_id: str | None, restart: int, rank: int,
                status: int, reason: str) -> Path | None:
    """Write ``<status> <unix ms> <reason>`` to ``<run_dir>/.hpcflow/exits-<job>-<restart>/<rank>``.

    Written by temp file + rename, so the batch script reads a whole line or nothing. Never
    raises: a rank on its way out must not fail because the record could not be written.

    Returns:
        The file written, or ``None`` outside an hpcflow job (no run directory or job id) or
        when the write failed.
    """
    if run_dir is None or not job_id:
        return None
    folder = state_dir(run_dir) / exits_name(job_id, restart)
    path = folder / str(rank)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        write_atomic(path, f"{int(status)} {int(time.time() * 1000)} {reason}\n")
    except OSError:
        return None
    return path


def done_path(run_dir: Path | None, job_id: str | None, restart: int) -> Path | None:
    """``<run_dir>/.hpcflow/done-<job>-<restart>.json``, or ``None`` outside an hpcflow job."""
    if run_dir is None or not job_id:
        return None
    return state_dir(run_dir) / done_name(job_id, restart)


def write_done(run_dir: Path | None, env: Any, step: int) -> bool:
    """Rank 0 writes the done record of ``step`` (``{"step", "time"}``, durably) once the final
    checkpoint is committed; called on every rank (``env``: a
    :class:`~hpcflow.runtime.env.DistEnv`).

    Returns:
        True inside an hpcflow job (the record exists now), False outside one.

    Raises:
        OSError: rank 0 could not write it.
    """
    from hpcflow.fsutil import write_json_atomic

    path = done_path(run_dir, env.job_id, env.restart_count)
    if path is None:
        return False
    if env.is_rank0:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, {"step": step, "time": time.time()}, sort_keys=True)
    return True


def leave_done(env: Any, ckpt: Any) -> None:
    """Leave after the done record, on every rank together and with status 0, as after a
    preemption: free the checkpoint writer, meet at a barrier, exit without tearing the process
    group down (a rank that aborts in that teardown, e.g. "terminate called without an active
    exception", would otherwise make srun report a failure for a finished job). A peer that
    died since cannot fail it: the record is written. Never returns.
    """
    from hpcflow.runtime import dist as hdist
    from hpcflow.runtime.lines import log

    try:
        if ckpt is not None:
            ckpt.close()
        if hdist.is_distributed():
            hdist.barrier()
    except Exception as err:  # noqa: BLE001 - done is done
        log(env, f"leaving after done: {type(err).__name__}: {err}")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
