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
  finished (or failed) from a file its previous attempt left;
- a submitit ``Checkpointable`` callable (one with a ``checkpoint`` method) joins the protocol on
  every rank: on the warning, rank 0 calls ``checkpoint(*args, **kwargs)`` as submitit would,
  stores the call it returns in place of the submitted one, writes the commit file the batch
  script reads and leaves with status 75; the batch script then requeues the job and the next
  attempt runs the stored call. A callable that also uses ``hpcflow.runtime.Run`` is
  Run's: Run installs its own handler when it starts, after this one;
- once the function has returned (or raised), the warning signal is ignored: the attempt is over
  on this rank, and a warning then must not kill the process while it exits.

Imports nothing heavy: it is unpickled on every rank before the function runs.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
from collections.abc import Callable, Mapping
from typing import Any

from hpcflow.protocol import (
    ENV_EXIT_AFTER_DONE,
    ENV_JOINED_DIR,
    ENV_PREEMPT_COMMITTED,
    ENV_RUN_DIR,
    EXIT_PREEMPTED,
)


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
        in_slurm = bool(os.environ.get("SLURM_JOB_ID") and os.environ.get(ENV_RUN_DIR))
        if in_slurm:
            _prepare_slurm_attempt()
            # After Run.finish's done record the ranks must still return here: submitit's runner
            # writes the result once the function returns (docs/protocol.md, "Ending kinds").
            os.environ[ENV_EXIT_AFTER_DONE] = "0"
            if hasattr(self.fn, "checkpoint"):
                self._join_for_checkpoint(args, kwargs)
        try:
            return self.fn(*args, **kwargs)
        finally:
            if in_slurm:
                # The function is over on this rank: a warning now has nothing to save. Ignored
                # rather than handled, because Python puts back the default action (death) of a
                # signal it handles while the interpreter shuts down, after the result is
                # written; a late warning would turn a finished job into a failed one.
                signal.signal(_preemption_signal(), signal.SIG_IGN)

    def _join_for_checkpoint(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Install the checkpoint-on-warning handler and announce this rank (module doc)."""
        rank = int(os.environ.get("SLURM_PROCID", "0"))

        def on_warning(signum: int, frame: Any) -> None:  # noqa: ARG001
            if rank != 0:
                return  # rank 0 checkpoints the callable (submitit's rule); srun ends the rest
            _checkpoint_and_leave(self, args, kwargs)

        signal.signal(_preemption_signal(), on_warning)
        joined = os.environ.get(ENV_JOINED_DIR)
        if joined:
            try:
                os.makedirs(joined, exist_ok=True)
                with open(os.path.join(joined, str(rank)), "w") as f:
                    # "<pid> <node>", as hpcflow.runtime writes it (docs/protocol.md)
                    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
                    f.write(f"{os.getpid()} {node}\n")
            except OSError:
                pass  # not announced: the signal is not forwarded, the deadline stop still is

    def __repr__(self) -> str:
        return f"TaskCall({self.fn!r})"


def _checkpoint_and_leave(call: TaskCall, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Rank 0 of a Checkpointable: store ``checkpoint()``'s call, commit, exit 75."""
    from submitit import JobEnvironment
    from submitit.core import utils

    delayed = call.fn.checkpoint(*args, **kwargs)
    if delayed is None:
        print("hpcflow: checkpoint() returned None: the job is not requeued from a checkpoint",
              file=sys.stderr, flush=True)
        return
    stored = utils.DelayedSubmission(TaskCall(delayed.function, call.env), *delayed.args,
                                     **delayed.kwargs)
    paths = JobEnvironment().paths
    with utils.temporary_save_path(paths.submitted_pickle) as tmp:
        stored.dump(tmp)
    committed = os.environ.get(ENV_PREEMPT_COMMITTED)
    if committed:
        from pathlib import Path

        from hpcflow.runtime.commit import write_preemption_commit

        write_preemption_commit(Path(committed), None, checkpoint="submitit")
    print("hpcflow: checkpoint() stored; leaving for the requeue", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(EXIT_PREEMPTED)


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
