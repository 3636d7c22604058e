"""Notice a preemption request and agree on it across ranks (docs/protocol.md, steps 3-4).

A request reaches a rank three ways: SIGUSR1 (at the batch script's warning the supervisor
forwards it through srun, which passes USR1 to its tasks unchanged, srun(1) "SIGNALS"), the flag
file the supervisor writes then, or
SIGTERM: Slurm's own preemption sends TERM to every task of the job's steps at the start of
``GraceTime`` (slurm.conf(5) GraceTime; preempt.html; seen on Slurm 22.05 with and without
``preempt_send_user_signal``), and a rank that died of it would lose the grace time. So TERM is a
warning like any other: the ranks checkpoint at the next step boundary and leave with status 75.
(``scancel`` also sends TERM, then KILL after ``KillWait``: the supervisor never requeues a
cancelled job, whatever was saved.)
The flag file also works through a launcher that dies on USR1 (torchrun) or a library that takes
the signal for itself. The handler only sets a flag: nothing unsafe runs inside a signal handler.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from hpcflow.runtime import sigstate


class PreemptionMonitor:
    """Watches for SIGUSR1 and a flag file; decides together with the other ranks when to stop.

    Use as a context manager (or call :meth:`close`) so the previous SIGUSR1 handler comes back.
    The handler can only be installed from the main thread (Python ``signal`` docs); elsewhere
    the monitor relies on the flag file alone.

    Args:
        flag_path: file whose existence means "checkpoint and stop"
            (``HPCFLOW_PREEMPT_FLAG``); ``None`` watches the signal only.
        signum: the signal to watch.
    """

    def __init__(
        self, flag_path: str | os.PathLike[str] | None, signum: int = signal.SIGUSR1
    ) -> None:
        self.flag_path = Path(flag_path) if flag_path else None
        self.signum = signum
        self._signalled = False
        self._previous: Any = None
        self._installed = False
        self._warned = False
        self._term_previous: Any = None
        self._term = signum != signal.SIGTERM
        self._c_address: int | None = None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signum, self._on_signal)
            if self._term:
                self._term_previous = signal.signal(signal.SIGTERM, self._on_signal)
            self._installed = True
            self._c_address = sigstate.handler_address(signum)

    @property
    def installed(self) -> bool:
        """True while this monitor's signal handler is installed (only from the main thread)."""
        return self._installed

    def announce(self, joined_dir: str | os.PathLike[str] | None, rank: int,
                 node: str | None = None) -> bool:
        """Tell the batch script that this rank has joined the protocol (docs/protocol.md).

        Creates ``<joined_dir>/<rank>`` holding ``<pid> <node>``: the node is Slurm's name for
        it (``SLURMD_NODENAME``, set in every task's environment; srun(1)), else the host
        name; the supervisor blames a rank that died without an exit record on that node
        (``resilience.exclude_after_failures``). The supervisor forwards the signal to the step
        only once every rank has done so, so it never reaches a process that would die of it. Nothing is
        announced when the handler could not be installed (not the main thread).

        Args:
            joined_dir: ``HPCFLOW_JOINED_DIR``; ``None`` (outside an hpcflow job) does nothing.
            rank: this process's global rank.
            node: the node's name; default ``SLURMD_NODENAME`` from the environment.

        Returns:
            True if the file was written.
        """
        if joined_dir is None or not self._installed:
            return False
        try:
            Path(joined_dir).mkdir(parents=True, exist_ok=True)
            node = node or os.environ.get("SLURMD_NODENAME") or socket.gethostname()
            (Path(joined_dir) / str(rank)).write_text(f"{os.getpid()} {node}\n")
        except OSError:
            return False  # the flag file still reaches this rank; only the signal is not forwarded
        return True

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signalled = True
        if signum == signal.SIGTERM:
            self._by_term = True

    _by_term = False

    @property
    def signalled(self) -> bool:
        """True once the watched signal (or TERM) has arrived."""
        return self._signalled

    @property
    def terminated(self) -> bool:
        """True once TERM has arrived (Slurm's preemption, ``scancel``, or ``kill``)."""
        return self._by_term

    def handler_replaced(self) -> bool:
        """True when something (a library, a framework) installed its own handler for the
        watched signal after this monitor did; the flag file still reaches the rank. Warns on
        stderr the first time it is seen."""
        if not self._installed or threading.current_thread() is not threading.main_thread():
            return False
        replaced = signal.getsignal(self.signum) != self._on_signal
        if replaced and not self._warned:
            self._warned = True
            name = signal.Signals(self.signum).name
            print(f"hpcflow-runtime: warning: another handler replaced hpcflow's {name} handler "
                  f"({signal.getsignal(self.signum)!r}); the preemption flag file still works, "
                  f"but {name} may now be taken by that code (set preemption.signal to the other "
                  "of USR1/USR2)", file=sys.stderr, flush=True)
        return replaced

    def foreign_use(self) -> str | None:
        """Why the watched signal may not reach this monitor although Python still shows its
        handler: ignored or blocked (``/proc/self/status``), a handler installed from C, or
        ``NCCL_PROXY_DUMP_SIGNAL`` naming it (:mod:`hpcflow.runtime.sigstate`). Warns on
        stderr once, with the fix; the flag file still reaches the rank. Costs one small
        ``/proc`` read and one ``sigaction`` call, until it has warned."""
        if self._warned:
            return None
        current = signal.getsignal(self.signum) if \
            threading.current_thread() is threading.main_thread() else None
        reason = sigstate.foreign_use(
            self.signum, sigstate.read_masks(), python_handler=callable(current),
            our_address=self._c_address,
            now_address=sigstate.handler_address(self.signum) if self._c_address else None)
        if reason is not None:
            self._warned = True
            name = signal.Signals(self.signum).name
            other = "USR2" if self.signum == signal.SIGUSR1 else "USR1"
            print(f"hpcflow-runtime: warning: {name} may not reach hpcflow: {reason}; the "
                  f"preemption flag file still works. Fix: set preemption.signal: {other} in "
                  "the job spec (or unset NCCL_PROXY_DUMP_SIGNAL / stop the library that takes "
                  f"{name})", file=sys.stderr, flush=True)
        return reason

    def local_requested(self) -> bool:
        """This rank's own view: the signal arrived or the flag file exists (one ``stat``)."""
        if self._signalled:
            return True
        return self.flag_path is not None and self.flag_path.exists()

    def should_stop(self) -> bool:
        """Whether any rank saw a request (collective: every rank calls it at each step boundary).

        All-reduces (MAX) the local bit so all ranks stop at the same step. Without a process
        group (world size 1) it is :meth:`local_requested`.

        Returns:
            True on every rank if at least one rank saw a request.
        """
        if not self.handler_replaced():
            self.foreign_use()
        local = self.local_requested()
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return local
        import torch

        from hpcflow.runtime.dist import collective_device

        bit = torch.tensor([1 if local else 0], dtype=torch.int32, device=collective_device())
        dist.all_reduce(bit, op=dist.ReduceOp.MAX)
        return bool(bit.item())

    def close(self) -> None:
        """Put the previous signal handler back (idempotent)."""
        if self._installed:
            previous = signal.SIG_DFL if self._previous is None else self._previous
            signal.signal(self.signum, previous)
            if self._term:
                previous = signal.SIG_DFL if self._term_previous is None else self._term_previous
                signal.signal(signal.SIGTERM, previous)
            self._installed = False

    def __enter__(self) -> PreemptionMonitor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
