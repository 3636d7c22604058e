"""How a rank leaves an hpcflow job: the done record, the preemption exit and the teardown of
the process group. :class:`~hpcflow.runtime.run.Run`'s ``finish``, ``close``, ``__exit__`` and
``leave_preempted`` call these functions with what they need; nothing here reads a ``Run``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from hpcflow.protocol import ENV_EXIT_AFTER_DONE, EXIT_PREEMPTED, TAG_CHECKPOINT, TAG_PREEMPTED
from hpcflow.runtime import dist as hdist
from hpcflow.runtime.env import DistEnv
from hpcflow.runtime.heartbeat import Heartbeat, record_error
from hpcflow.runtime.lines import emit

#: Seconds :func:`teardown` leaves the GIL to the process group's threads before teardown.
_SETTLE_S = 0.25


class Preempted(SystemExit):
    """Raised by :meth:`Run.step_done` once the preemption checkpoint of ``step`` is committed.

    A ``SystemExit`` with code 75: uncaught, the process exits 75, which the batch script reads
    together with the commit file. Inside ``with Run...`` the block's exit ends the process at
    once (no interpreter teardown), so every rank leaves within milliseconds of the others.
    """

    def __init__(self, step: int) -> None:
        super().__init__(EXIT_PREEMPTED)
        self.step = step


def report_async(env: DistEnv, result: Any) -> None:
    """The ``hpcflow-checkpoint`` line of a background save that completed (``result``: an
    ``AsyncResult`` with ``step``, ``blocked_s`` and ``total_s`` in seconds; None: nothing)."""
    if result is not None:
        emit(env, TAG_CHECKPOINT, {
            "step": result.step, "reason": "interval", "save_s": result.blocked_s,
            "total_s": result.total_s, "async": True,
        })


def write_done_and_meet(run_dir: Path | None, env: DistEnv, step: int) -> bool:
    """Rank 0 writes the done record of ``step`` (docs/protocol.md, "Ending kinds"); then every
    rank meets the others (collective), so each knows it is written before any leaves.

    Returns:
        True when the record was written (inside an hpcflow job).
    """
    from hpcflow.runtime.exits import write_done

    done = write_done(run_dir, env, step)
    if done and hdist.is_distributed():
        hdist.barrier()
    return done


def teardown(env: DistEnv, ckpt: Any, heartbeat: Heartbeat | None, *, together: bool) -> None:
    """Wait for any background save of ``ckpt`` (a ``CheckpointManager`` or None), then leave
    the process group.

    Args:
        together: meet the other ranks first (a barrier: collective), then let the collective
            threads finish. With gloo, a process group torn down right after a collective can
            deadlock: its destructor joins the worker threads while holding the GIL, and a
            worker that still has to free a collective's Python tensors waits for the GIL
            (seen here with torch 2.13 when a DDP module outlives the group, on a loaded
            machine). False after an exception, when other ranks may be gone.
    """
    if ckpt is not None:
        report_async(env, ckpt.wait())
        ckpt.close()
    if together and hdist.is_distributed():
        hdist.barrier()
        time.sleep(_SETTLE_S)  # the GIL is free: a worker that needs it takes it now
    hdist.shutdown()
    if heartbeat is not None:
        heartbeat.close()


#: Seconds a rank that raised in a job of several ranks waits for Slurm's TERM before it leaves
#: the usual way: the collective that found a dead peer fails at once, and srun TERMs the step's
#: other tasks about 60 ms after one died (``strace -ttt`` on this cluster, bench/README.md).
TERM_WAIT_S = 0.3


def slurm_ending(terminated: Callable[[], bool], world_size: int,
                 wait_s: float = TERM_WAIT_S) -> bool:
    """True once TERM has come (``terminated()``), waiting up to ``wait_s`` seconds for it when
    the job has more than one rank; a rank alone has no peer whose death Slurm would act on."""
    deadline = time.monotonic() + (wait_s if world_size > 1 else 0.0)
    while not terminated():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)  # the handler runs between two sleeps: it only sets a flag
    return True


def leave_block(run_dir: Path | None, env: DistEnv, ckpt: Any, *, step: int, done: bool,
                exc: BaseException | None,
                terminated: Callable[[], bool] = lambda: False) -> None:
    """What leaving the ``with Run...`` block does before the teardown: record this rank's exit,
    then end the process at once after the done record (every rank together, status 0) or
    after a committed preemption (status 75), or record the exception a rank raised.

    An exception with TERM (``terminated()``, now or within :data:`TERM_WAIT_S`) also ends the
    process at once, with the status the exception gives, once the exit and the error are
    recorded: Slurm is ending the step (it TERMs every task when one of them fails under
    ``--kill-on-bad-exit``, at ``scancel``, and at the start of its own preemption's
    ``GraceTime``, where a rank that could still save leaves through :class:`Preempted`
    instead; srun(1), slurm.conf(5) ``KillWait``), the exception is most often a collective
    that found a peer gone, and nothing is left to save.
    The teardown and the interpreter's exit with torch loaded would only hold the step's end,
    and with it an in-job restart, for most of a second (measured in bench/README.md). Not
    under ``HPCFLOW_EXIT_AFTER_DONE=0`` (``hpcflow.launch``): submitit's own handler must still
    pickle the exception for the caller.

    Only returns when the teardown is still to do (no done record, no preemption, no exception
    with TERM)."""
    from hpcflow.runtime.exits import exit_status_of, leave_done, record_exit

    status, reason = (0, "done") if exc is None and done else exit_status_of(exc)
    record_exit(run_dir, env.job_id, env.restart_count, env.rank, status, reason)
    if exc is None and done and os.environ.get(ENV_EXIT_AFTER_DONE) != "0":
        leave_done(env, ckpt)  # never returns
    if isinstance(exc, Preempted):
        # Leave now: under srun --kill-on-bad-exit the first rank out makes srun kill the
        # others, so the ranks must leave within milliseconds of each other (srun(1)).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_PREEMPTED)
    if exc is not None and not isinstance(exc, SystemExit):
        record_error(os.environ, env.rank, step, exc)
        if os.environ.get(ENV_EXIT_AFTER_DONE) != "0" and slurm_ending(terminated,
                                                                        env.world_size):
            _print_exception(exc)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)


def _print_exception(exc: BaseException) -> None:
    """The traceback the interpreter would print on its way out, which ``os._exit`` skips."""
    import traceback

    try:
        traceback.print_exception(exc, file=sys.stderr)
    except Exception:  # noqa: BLE001 - the rank is leaving whatever the log says
        pass


def leave_preempted(env: DistEnv, committed: Path | None, step: int) -> NoReturn:
    """After the preemption checkpoint of ``step`` is committed: rank 0 writes the commit file
    the batch script reads (``committed``: ``HPCFLOW_PREEMPT_COMMITTED``, None outside a job),
    every rank waits for it (collective), then :class:`Preempted` is raised.

    Raises:
        Preempted: always.
    """
    from hpcflow.runtime.commit import write_preemption_commit

    if env.is_rank0 and committed is not None:
        write_preemption_commit(committed, step)
    emit(env, TAG_PREEMPTED, {"step": step})
    hdist.barrier()
    raise Preempted(step)
