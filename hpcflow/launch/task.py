"""What a submitted function is wrapped in, so that submitit's payload runner and hpcflow's
batch script agree on signals and requeue.

submitit's runner (``python -u -m submitit.core._submit <folder>``, submitit
``core/submission.py::process_job``) installs, in every task, a handler on its preemption signal
that makes rank 0 checkpoint the callable and ``scontrol requeue`` the job itself, and handlers
that ignore TERM and CONT (``core/job_environment.py::JobEnvironment._handle_signals``). Under
hpcflow the batch shell owns the signal and the requeue (docs/protocol.md), so :class:`TaskCall`,
which runs right after those handlers are installed and before the user's function, puts back
hpcflow's rules:

- the preemption signal is recorded and otherwise ignored: it reaches the task only when every
  rank has joined the protocol (``hpcflow.runtime.Run`` then installs its own handler), or when
  someone sends it by hand; it never kills a function and never requeues from inside the task;
- TERM gets its default action again: the batch script stops a function that did not join the
  protocol with TERM shortly before the deadline and requeues the job (the template's
  ``hpcflow_on_deadline``); a TERM that is ignored would only delay that to the KILL;
- the task's result pickle of an earlier attempt is removed, so a requeued job is never read as
  finished (or failed) from a file its previous attempt left.

Imports nothing heavy: it is unpickled on every rank before the function runs.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Mapping
from typing import Any

from hpcflow.protocol import ENV_RUN_DIR


class TaskCall:
    """A picklable wrapper: ``TaskCall(fn, env)(*a, **kw)`` prepares the attempt and returns
    ``fn(*a, **kw)``.

    Args:
        fn: the submitted callable.
        env: variables to set in the task before ``fn`` runs when the batch script did not set
            them (the local executor, which has no batch script: checkpoint settings for
            ``hpcflow.runtime.Run``).
    """

    def __init__(self, fn: Callable[..., Any], env: Mapping[str, str] | None = None) -> None:
        self.fn = fn
        self.env = dict(env or {})

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        for name, value in self.env.items():
            os.environ.setdefault(name, value)
        if os.environ.get("SLURM_JOB_ID") and os.environ.get(ENV_RUN_DIR):
            _prepare_slurm_attempt()
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"TaskCall({self.fn!r})"


def _preemption_signal() -> int:
    name = os.environ.get("HPCFLOW_PREEMPT_SIGNAL", "USR1")
    return int(getattr(signal, "SIG" + name, signal.SIGUSR1))


def _note_signal(signum: int, frame: Any) -> None:  # noqa: ARG001 - signal handler signature
    print(f"hpcflow: {signal.Signals(signum).name} reached a function that has not joined "
          "hpcflow's protocol (hpcflow.runtime.Run): ignored; the batch script stops and "
          "requeues the job before its deadline", file=sys.stderr, flush=True)


def _prepare_slurm_attempt() -> None:
    """Replace submitit's in-task signal handling by hpcflow's, drop a stale result pickle."""
    signal.signal(_preemption_signal(), _note_signal)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGCONT, signal.SIG_DFL)
    try:
        from submitit import JobEnvironment

        JobEnvironment().paths.result_pickle.unlink(missing_ok=True)
    except (ImportError, KeyError, OSError, RuntimeError):
        pass  # not a submitit task (called directly): nothing of submitit's to clean
