"""The run directory's protocol files, by name (docs/protocol.md, "Run directory"): the
state folder, the ledger, and the files and folders of each attempt and each in-job try.
Re-exported by :mod:`hpcflow.protocol`, where every reader finds them."""

from __future__ import annotations

from pathlib import Path

__all__ = ["CHECKPOINT_KEY_FILE", "LEDGER_FILE", "STANDBY_STEP_SUFFIX", "STATE_DIR", "VERSION_FILE",
           "answer_name", "attempt_suffix", "checkpoint_key_path", "committed_name", "done_name",
           "errors_name", "exits_name", "flag_name", "heartbeat_name", "joined_name", "ledger_path",
           "nccl_debug_name", "notice_name", "parse_rank_exit", "signals_name", "stacks_name",
           "standby_go_name", "state_dir", "suspected_stacks_name", "warm_modules_name"]

STATE_DIR = ".hpcflow"
LEDGER_FILE = "events.jsonl"
#: The run's checkpoint key (32 random bytes, mode 0600), made by rank 0 at the first save: the
#: keyed digests of every commit record (docs/checkpoints.md, "What is trusted").
CHECKPOINT_KEY_FILE = "checkpoint.key"

#: File in the state folder that holds the protocol version of the job's batch script
#: (:data:`hpcflow.protocol.PROTOCOL_VERSION`).
VERSION_FILE = "protocol-version"


def state_dir(run_dir: Path) -> Path:
    """``<run_dir>/.hpcflow``: the ledger and the per-attempt protocol files."""
    return Path(run_dir) / STATE_DIR


def ledger_path(run_dir: Path) -> Path:
    """``<run_dir>/.hpcflow/events.jsonl``: one JSON event per line, appended by every attempt."""
    return state_dir(run_dir) / LEDGER_FILE


def checkpoint_key_path(run_dir: Path) -> Path:
    """``<run_dir>/.hpcflow/checkpoint.key``: the run's checkpoint key, outside the checkpoints."""
    return state_dir(run_dir) / CHECKPOINT_KEY_FILE


def attempt_suffix(job_id: str, restart: int) -> str:
    """``<job_id>-<restart>``: names the protocol files of one attempt of one job."""
    return f"{job_id}-{restart}"


def flag_name(job_id: str, restart: int) -> str:
    """File name of the preemption flag the supervisor writes at the warning
    (``preempt-<job>-<restart>.flag``)."""
    return f"preempt-{attempt_suffix(job_id, restart)}.flag"


def signals_name(job_id: str, restart: int) -> str:
    """File where the batch shell records each warning signal it takes, one line ``<name> <unix
    s>`` (``signals-<job>-<restart>``), before it passes the signal on to the supervisor, which
    reads the lines: a signal that came while the supervisor was starting is not lost."""
    return f"signals-{attempt_suffix(job_id, restart)}"


def answer_name(job_id: str, restart: int) -> str:
    """File of the supervisor's last word to the batch script (``answer-<job>-<restart>``):
    ``exit <status>``. Without it the batch script records ``supervisor_error``."""
    return f"answer-{attempt_suffix(job_id, restart)}"


def committed_name(job_id: str, restart: int) -> str:
    """File name of the commit file rank 0 writes (``committed-<job>-<restart>.json``)."""
    return f"committed-{attempt_suffix(job_id, restart)}.json"


def joined_name(job_id: str, restart: int) -> str:
    """Folder name where each rank that joined announces itself (``joined-<job>-<restart>``)."""
    return f"joined-{attempt_suffix(job_id, restart)}"


def warm_modules_name(job_id: str, restart: int) -> str:
    """File where rank 0 lists the installed modules it loaded (``warm-modules-<job>-<restart>``;
    :data:`hpcflow.protocol.ENV_WARM_MODULES`)."""
    return f"warm-modules-{attempt_suffix(job_id, restart)}"


def standby_go_name(job_id: str, restart: int, number: int) -> str:
    """File a warm standby waits for (``standby-<job>-<restart>-<n>.go``): the supervisor
    writes ``{"env": {...}}`` to hand it an in-job restart, or ``{"quit": true}``
    (:class:`hpcflow.contract.GoRecord`)."""
    return f"standby-{attempt_suffix(job_id, restart)}-{number}.go"


#: Suffix of the file beside a standby's go file (``<go>.step``) where its rank 0 writes the
#: standby step's id (``SLURM_STEP_ID``): the supervisor's address for the wake-up and for TERM.
STANDBY_STEP_SUFFIX = ".step"


def notice_name(job_id: str) -> str:
    """File name of a preemption notice (``notice-<job>``): the Unix time, in whole seconds, by
    which the job must be off its nodes. A spot-interruption watcher or ``rehearse`` writes it
    before it sends USR1; the supervisor reads and removes it at the warning. Without one the
    deadline is the time limit."""
    return f"notice-{job_id}"


def heartbeat_name(job_id: str, restart: int, try_: int | str) -> str:
    """Folder of one step's heartbeats (``heartbeat-<job>-<restart>-<try>``)."""
    return f"heartbeat-{attempt_suffix(job_id, restart)}-{try_}"


def errors_name(job_id: str, restart: int, try_: int | str) -> str:
    """Folder where failing ranks of one step leave their exception (``errors-<job>-<restart>-<try>``)."""
    return f"errors-{attempt_suffix(job_id, restart)}-{try_}"


def stacks_name(job_id: str, restart: int, try_: int | str) -> str:
    """File of one step's hang report in the run directory (``hang-<job>-<restart>-<try>.txt``):
    every rank's Python stacks."""
    return f"hang-{attempt_suffix(job_id, restart)}-{try_}.txt"


def suspected_stacks_name(job_id: str, restart: int, try_: int | str, n: int) -> str:
    """File of the ``n``-th (from 1) suspected hang's stacks in one step
    (``hang-<job>-<restart>-<try>-suspected-<n>.txt``)."""
    return f"hang-{attempt_suffix(job_id, restart)}-{try_}-suspected-{n}.txt"


def exits_name(job_id: str, restart: int) -> str:
    """Folder where each rank records its own exit (``exits-<job>-<restart>/<rank>``): one line
    ``<status> <unix time in ms> <reason>`` written by the runtime as the rank leaves its
    :class:`~hpcflow.runtime.run.Run`. A rank killed by a signal leaves no file."""
    return f"exits-{attempt_suffix(job_id, restart)}"


def nccl_debug_name(job_id: str, restart: int, rank: int) -> str:
    """File in the state folder where one rank's NCCL writes its ``NCCL_DEBUG=INFO`` lines
    (``nccl-<job>-<restart>-<rank>.log``) when EFA is expected and the user set no
    ``NCCL_DEBUG_FILE`` of their own; the runtime reads the network choice from it."""
    return f"nccl-{attempt_suffix(job_id, restart)}-{int(rank)}.log"


def done_name(job_id: str, restart: int) -> str:
    """File rank 0 writes once the final checkpoint is committed and every rank has finished
    training (``done-<job>-<restart>.json``, ``{"step": N, "time": T}``): with it, the
    supervisor ends the job ``completed`` whatever status a rank's teardown gave srun."""
    return f"done-{attempt_suffix(job_id, restart)}.json"


def parse_rank_exit(text: str) -> tuple[int, int, str] | None:
    """One rank's exit record (see :func:`exits_name`) -> ``(status, time_ms, reason)``, or
    ``None`` when it is not one (a torn write)."""
    status, _, rest = text.strip().partition(" ")
    time_ms, _, reason = rest.partition(" ")
    if not (status.isdigit() and time_ms.isdigit()):
        return None
    return int(status), int(time_ms), reason.strip()
