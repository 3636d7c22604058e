"""How a rank leaves an hpcflow job: the end of training, the preemption exit and the
teardown of the process group (the second half of :class:`hpcflow.runtime.run.Run`).

:class:`Leaving` is a mixin: it works on the attributes :class:`~hpcflow.runtime.run.Run` sets
(``env``, ``config``, ``ckpt``, ``step``, ``heartbeat``, ``_last_saved``, ``_done``) and calls its
``save`` and ``_beat``. :class:`Preempted` lives here so that both halves can raise or catch it.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from hpcflow.protocol import (
    ENV_EXIT_AFTER_DONE,
    EXIT_PREEMPTED,
    SECTION_END,
    TAG_CHECKPOINT,
    TAG_PREEMPTED,
)
from hpcflow.runtime import dist as hdist
from hpcflow.runtime.heartbeat import record_error
from hpcflow.runtime.lines import emit

if TYPE_CHECKING:
    from hpcflow.runtime.run import Run

#: Seconds :meth:`Run.close` leaves the GIL to the process group's threads before teardown.
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


class Leaving:
    """The leaving half of :class:`~hpcflow.runtime.run.Run` (see the module docstring)."""

    # ---- leaving

    def finish(self, state: Mapping[str, Any] | None = None) -> None:
        """End of training: wait for a background save and, given ``state``, save the final
        step if it is not saved yet (collective).

        Once the final step is committed, inside an hpcflow job rank 0 writes the done record
        (docs/protocol.md, "Ending kinds") and leaving the ``with`` block then ends every rank
        together with status 0 (a barrier, then exit without tearing the process group down):
        code after the ``with`` block does not run."""
        if self.ckpt is None:
            return
        self._report_async(self.ckpt.wait())
        if state is not None and self._last_saved != self.step:
            self.save(self.step, state, reason="final")
        if self._last_saved == self.step:
            from hpcflow.runtime.exits import write_done

            self._done = write_done(self.config.run_dir, self.env, self.step)
            if self._done and hdist.is_distributed():
                hdist.barrier()  # every rank knows the record is written before any leaves

    def close(self, *, together: bool = True) -> None:
        """Wait for any background save, then leave the process group (idempotent).

        Args:
            together: meet the other ranks first (a barrier: collective), then let the
                collective threads finish. With gloo, a process group torn down right after a
                collective can deadlock: its destructor joins the worker threads while holding
                the GIL, and a worker that still has to free a collective's Python tensors
                waits for the GIL (seen here with torch 2.13 when a DDP module outlives the
                group, on a loaded machine). ``__exit__`` passes False after an exception, when
                other ranks may be gone.
        """
        self._beat(SECTION_END)
        if self.ckpt is not None:
            self._report_async(self.ckpt.wait())
            self.ckpt.close()
        if together and hdist.is_distributed():
            hdist.barrier()
            time.sleep(_SETTLE_S)  # the GIL is free: a worker that needs it takes it now
        hdist.shutdown()
        if self.heartbeat is not None:
            self.heartbeat.close()

    def __enter__(self) -> Run:
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        from hpcflow.runtime.exits import exit_status_of, leave_done, record_exit

        status, reason = (0, "done") if exc is None and self._done else exit_status_of(exc)
        record_exit(self.config.run_dir, self.env.job_id, self.env.restart_count,
                    self.env.rank, status, reason)
        if exc is None and self._done and os.environ.get(ENV_EXIT_AFTER_DONE) != "0":
            leave_done(self.env, self.ckpt)  # every rank together, status 0; never returns
        if isinstance(exc, Preempted):
            # Leave now: under srun --kill-on-bad-exit the first rank out makes srun kill the
            # others, so the ranks must leave within milliseconds of each other (srun(1)).
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(EXIT_PREEMPTED)
        if exc is not None and not isinstance(exc, SystemExit):
            record_error(os.environ, self.env.rank, self.step, exc)
        self.close(together=exc is None)

    def leave_preempted(self, step: int) -> None:
        """After the preemption checkpoint of ``step`` is committed (by :meth:`step_done`, or by
        a framework's own save in an adapter): rank 0 writes the commit file the batch script
        reads, every rank waits for it (collective), then :class:`Preempted` is raised.

        Raises:
            Preempted: always.
        """
        from hpcflow.runtime.commit import write_preemption_commit

        committed = self.config.preempt_committed
        if self.env.is_rank0 and committed is not None:
            write_preemption_commit(committed, step)
        emit(self.env, TAG_PREEMPTED, {"step": step})
        hdist.barrier()
        raise Preempted(step)

    def _report_async(self, result: Any) -> None:
        if result is not None:
            emit(self.env, TAG_CHECKPOINT, {
                "step": result.step, "reason": "interval", "save_s": result.blocked_s,
                "total_s": result.total_s, "async": True,
            })
