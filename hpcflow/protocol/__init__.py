"""The contract between the batch script and the ranks, in one torch-free place (docs/protocol.md).

The sbatch template (through :mod:`hpcflow.slurm.render`), the in-job runtime
(:mod:`hpcflow.runtime`), the job records and report (:mod:`hpcflow.jobs`) and the benchmarks all
read these names; none of them spells a name of its own. Pure: no torch, no file access.

What crosses the boundary:

- environment variables the batch script and its supervisor export to every rank (``ENV_*``);
- files in the run directory's state folder: the ledger, and per attempt the signals file
  (written by the batch script's trap), the preemption flag (written by the supervisor at the
  warning), the commit file (written by rank 0 after the preemption checkpoint is committed)
  and the joined folder (one file per rank that installed its signal handler, so the
  supervisor knows the ranks can take the signal);
- unless ``resilience: false``: each rank's heartbeat file and stacks file (read by the hang
  watchdog, :mod:`hpcflow.watchdog`), the exception record of a rank that raised, and the
  ledger events of hangs and in-job restarts;
- the exit status of a rank that stopped after a committed preemption checkpoint;
- the tags of the machine-readable lines rank 0 prints (``hpcflow-step {...}``);
- the rendezvous port rule.
"""

from __future__ import annotations

import re

# The run directory's file names (files.py) and the port rule (ports.py) are read from here too:
# each module's __all__ is re-exported whole.
from hpcflow.protocol.files import *  # noqa: F403
from hpcflow.protocol.ports import *  # noqa: F403

#: Exit status after a committed preemption checkpoint: ``EX_TEMPFAIL`` (sysexits.h, "try again").
EXIT_PREEMPTED = 75

# ---- Environment the batch script and the supervisor export to the program.
ENV_RUN_DIR = "HPCFLOW_RUN_DIR"
ENV_CHECKPOINT_DIR = "HPCFLOW_CHECKPOINT_DIR"
ENV_CHECKPOINT_INTERVAL = "HPCFLOW_CHECKPOINT_INTERVAL"
#: The value of ``HPCFLOW_CHECKPOINT_INTERVAL`` that lets the runtime choose the interval
#: (``checkpoint.interval: auto``), and the failure rate it plans with (per node-hour).
CHECKPOINT_INTERVAL_AUTO = "auto"
ENV_FAILURES_PER_NODE_HOUR = "HPCFLOW_FAILURES_PER_NODE_HOUR"
#: The failure rate ``auto`` plans with unless told another (the spec's
#: ``checkpoint.failures_per_node_hour`` default, and the runtime's when
#: ``HPCFLOW_FAILURES_PER_NODE_HOUR`` is unset): Llama 3's unexpected interruptions per
#: node-hour, 419 / (2,048 nodes x 54 days x 24 h) (arXiv:2407.21783, section 3.3.4). The planned
#: ones (47 more) are left out: they come with a warning, and a warned stop loses no steps.
DEFAULT_FAILURES_PER_NODE_HOUR = 419 / (2048 * 54 * 24)
ENV_CHECKPOINT_KEEP = "HPCFLOW_CHECKPOINT_KEEP"
ENV_MAX_REQUEUES = "HPCFLOW_MAX_REQUEUES"
ENV_PREEMPT_FLAG = "HPCFLOW_PREEMPT_FLAG"
ENV_PREEMPT_COMMITTED = "HPCFLOW_PREEMPT_COMMITTED"
ENV_JOINED_DIR = "HPCFLOW_JOINED_DIR"
#: The warning signal's name, ``USR1`` (default) or ``USR2`` (the spec's ``preemption.signal``).
ENV_PREEMPT_SIGNAL = "HPCFLOW_PREEMPT_SIGNAL"
#: The job spec's ``parallelism`` as ``"dp,pp,tp"`` (dp may be -1: the remaining ranks).
ENV_PARALLELISM = "HPCFLOW_PARALLELISM"
#: Folder of this step's heartbeats: one ``<rank>.json`` per rank (not with ``resilience: false``).
ENV_HEARTBEAT_DIR = "HPCFLOW_HEARTBEAT_DIR"
#: Least seconds between two heartbeats of one rank inside one section (a new section always
#: writes one).
ENV_HEARTBEAT_INTERVAL_S = "HPCFLOW_HEARTBEAT_INTERVAL_S"
#: Folder where a rank that fails with an exception leaves ``<rank>.json`` (type, step, traceback)
#: and ``<rank>.sig`` (``<type>@<step>``), so the supervisor can tell a repeated error.
ENV_ERROR_DIR = "HPCFLOW_ERROR_DIR"
#: The in-job try of this step: 0 for the first ``srun`` of an attempt, 1 after one in-job restart.
ENV_STEP_TRY = "HPCFLOW_STEP_TRY"
#: ``0`` keeps a rank's process alive after the done record (``Run`` leaves its ``with`` block and
#: returns as usual): set by ``hpcflow.launch`` around a submitted function, whose return value
#: submitit's runner must still write. Unset (or anything else): every rank exits together at once.
ENV_EXIT_AFTER_DONE = "HPCFLOW_EXIT_AFTER_DONE"
#: The batch script's start, Unix seconds with a fraction (bash's ``EPOCHREALTIME``; empty
#: before bash 5); after an in-job restart, the supervisor's start of the new step: the start
#: of the ``launch_s`` phase of ``hpcflow-startup``.
ENV_ATTEMPT_T0 = "HPCFLOW_ATTEMPT_T0"
#: With ``resilience.warm_standby``: the file where rank 0 lists, at its first step, the
#: installed modules it has loaded, for the next warm standby to import ahead
#: (:mod:`hpcflow.runtime.standby`).
ENV_WARM_MODULES = "HPCFLOW_WARM_MODULES"
#: Set by a warm standby when it is handed the step (Unix seconds with a fraction): the start of
#: the ``imports_s`` phase of ``hpcflow-startup`` in place of the process's own start.
ENV_WARM_T0 = "HPCFLOW_WARM_T0"

# ---- Resilience (docs/protocol.md, "Hangs and in-job restarts").
#: The commit record inside a committed ``step_<N>/`` (the same name as
#: ``hpcflow.runtime.commit.COMMIT_NAME``); the supervisor looks for it before an in-job restart.
COMMIT_RECORD = "hpcflow-commit.json"
#: The committed checkpoints the supervisor counts in a job's checkpoint folder, by name (the
#: step is the group): the runtime's ``step_<N>/`` and the Hugging Face adapter's
#: ``checkpoint-<N>/`` (hpcflow.runtime.hf), each holding :data:`COMMIT_RECORD`; the Lightning
#: adapter's ``step_<N>.ckpt`` file (hpcflow.runtime.lightning), complete once it has that name.
STEP_DIR_RE = re.compile(r"step_(\d+)")
HF_CHECKPOINT_RE = re.compile(r"checkpoint-(\d+)")
LIGHTNING_CHECKPOINT_RE = re.compile(r"step_(\d+)\.ckpt")
#: Signal on which a rank's ``faulthandler`` writes every thread's Python stack to its stacks
#: file. Its default action is to ignore it (signal(7)), so it harms no process that did not
#: register it, and it differs from the preemption signals (USR1/USR2).
STACKS_SIGNAL = "URG"
#: Sections a heartbeat names: start-up and restore, a training step, a checkpoint save.
SECTION_STARTUP = "startup"
SECTION_STEP = "step"
SECTION_CHECKPOINT = "checkpoint"
#: Written when a rank leaves (``Run.close``); timed like start-up.
SECTION_END = "end"
SECTIONS = (SECTION_STARTUP, SECTION_STEP, SECTION_CHECKPOINT, SECTION_END)
#: Ledger event the watchdog appends when ranks stopped reporting: ``section``, ``ranks``
#: (those whose heartbeat is stale), ``timeout_s``, ``stacks`` (file under the run directory).
EVENT_HANG = "hang"
#: Ledger event the watchdog appends when ranks first stop reporting and ``kill_after_s`` is
#: not 0: the stacks are written (``stacks``), the step goes on. Members as :data:`EVENT_HANG`,
#: plus ``kill_after_s``.
EVENT_HANG_SUSPECTED = "hang_suspected"
#: Ledger event the watchdog appends when every rank reports in time again after a suspected
#: hang: ``after_s`` (seconds the suspicion lasted), ``stacks`` (the suspicion's file).
EVENT_HANG_CLEARED = "hang_cleared"
#: Marker the watchdog leaves in the step's heartbeat folder once it handled a hang (the
#: ``hang`` event as JSON): the supervisor reads the step's cause from it.
HANG_MARKER = "hang.json"
#: Ledger event the supervisor appends before it starts a new step in the same allocation:
#: ``try``, ``rc``, ``cause`` (``hang``, ``rank_failure``, ``program_error``), ``step``.
EVENT_STEP_RESTART = "step_restart"
#: Ledger event the supervisor appends when a rank failed with an exception: ``exception``
#: (``<type>@<step>``), ``traceback`` (file under the run directory), ``repeated``.
EVENT_PROGRAM_ERROR = "program_error"
#: Ledger event rank 0 appends when ``checkpoint.interval: auto`` chose an interval (after the
#: warm-up of each program start): ``reason`` (:data:`INTERVAL_REASONS`), ``step``,
#: ``interval_steps``, ``interval_s``, ``save_s``, ``step_time_s``, ``restart_s``,
#: ``failures_per_node_hour``, ``nodes``, ``mtbf_s``, ``formula``, ``expected_goodput``.
EVENT_INTERVAL_CHOSEN = "interval_chosen"
INTERVAL_REASON_WARMUP = "warmup"
INTERVAL_REASON_RESTART = "restart"
INTERVAL_REASONS = (INTERVAL_REASON_WARMUP, INTERVAL_REASON_RESTART)
#: Ledger event the supervisor appends when it excludes a node from the job's steps after
#: ``resilience.exclude_after_failures`` rank failures were blamed on it: ``node``,
#: ``failures``, ``excluded`` (every node excluded so far, comma-separated), ``spare`` (true:
#: the next step runs on a spare node of the allocation; false: the job is requeued without it).
EVENT_NODE_EXCLUDED = "node_excluded"
#: ``cause`` of a ``requeue`` event after a node was excluded with no spare node left (a
#: failure: counted against ``resilience.max_failures``, not ``preemption.max_requeues``).
REASON_NODE_EXCLUDED = "node_excluded"
#: Job-end reason: the same exception at the same step ended two steps in a row.
REASON_PROGRAM_ERROR = "program_error"
#: Job-end reason: the step failed and ``resilience.max_failures`` restarts were used.
REASON_FAILURE_LIMIT = "failure_limit"

# ---- The network NCCL chose (docs/protocol.md, "The network check").
#: The instance type of the job's nodes (the spec's ``network.instance_type``).
ENV_NETWORK_INSTANCE_TYPE = "HPCFLOW_NETWORK_INSTANCE_TYPE"
#: EFA interfaces an instance of that type has (``NetworkInfo.EfaInfo.MaximumEfaInterfaces``);
#: set only when the type has EFA: then NCCL is expected to run over it.
ENV_EFA_EXPECTED = "HPCFLOW_EFA_EXPECTED"
#: ``1``: a job on an EFA instance whose NCCL falls back to TCP sockets stops at once
#: (``network.require_efa``); ``0``: it only records the ``network`` event.
ENV_REQUIRE_EFA = "HPCFLOW_REQUIRE_EFA"
#: Ledger event rank 0 appends after the first collective on an EFA instance: ``transport``
#: (``efa``, ``socket``, ``other``, ``unknown``), ``net``, ``provider``, ``plugin_version``,
#: ``nics``, ``bootstrap_if``, ``instance_type``, ``expected_nics``, ``required``, ``summary``,
#: ``problems`` and ``ranks`` (per rank: ``transport``).
EVENT_NETWORK = "network"
#: Exit status of every rank after NCCL fell back to TCP sockets on an EFA instance with
#: ``network.require_efa``: ``EX_CONFIG`` (sysexits.h, "configuration error"), distinct from
#: the preemption status and from a program's own error.
EXIT_NETWORK_FALLBACK = 78
#: The exit-record reason of those ranks begins with this word (then ``: <summary>``), and it
#: is the job-end reason the supervisor writes for them.
REASON_NETWORK_FALLBACK = "network_fallback"

# ---- Tags of rank 0's machine-readable lines (``<tag> <json>`` on stdout).
TAG_START = "hpcflow-start"
TAG_STEP = "hpcflow-step"
TAG_RESTORE = "hpcflow-restore"
TAG_RESUME = "hpcflow-resume"
TAG_CHECKPOINT = "hpcflow-checkpoint"
TAG_PREEMPTED = "hpcflow-preempted"
TAG_DONE = "hpcflow-done"
#: Once per process, at its first step: where the start-up went (:mod:`hpcflow.runtime.startup`):
#: each of :data:`STARTUP_PHASES` and ``total_s``, in seconds.
TAG_STARTUP = "hpcflow-startup"
STARTUP_PHASES = ("launch_s", "imports_s", "join_s", "build_s", "restore_s", "first_step_s")

# ---- Ledger events and job-end reasons the supervisor (:mod:`hpcflow.supervisor`) writes.
#: Version of this contract, recorded in the run directory (:data:`VERSION_FILE`) by the first
#: attempt. A job rendered by another version ends at once with a message (docs/protocol.md,
#: "Version skew") instead of being run by rules it was not written for.
PROTOCOL_VERSION = 5
EVENT_ATTEMPT_START = "attempt_start"
EVENT_SIGNAL = "signal"
EVENT_STEP_END = "step_end"
EVENT_REQUEUE = "requeue"
EVENT_JOB_END = "job_end"
#: The program that did not join the protocol was sent TERM before the deadline.
EVENT_STOP = "stop"
EVENT_MIRROR_ABANDONED = "mirror_abandoned"
#: The S3 mirror's events (hpcflow/mirror/watch.py): an upload started, finished (``step``,
#: ``bytes``, ``lag_s``) or failed; a pull before the first start (``step``, ``bytes``) or its
#: failure.
EVENT_MIRROR_START = "mirror_start"
EVENT_MIRROR_DONE = "mirror_done"
EVENT_MIRROR_FAILED = "mirror_failed"
EVENT_MIRROR_PULL = "mirror_pull"
EVENT_MIRROR_PULL_FAILED = "mirror_pull_failed"
#: The nodes an earlier attempt excluded are in this allocation and too few others are left,
#: so the step runs on them after all (``nodes``, ``nodelist``): Slurm did not keep the
#: exclusion. ``report`` shows it.
EVENT_EXCLUSION_IGNORED = "exclusion_ignored"
#: ``source`` of a ``signal`` event: Slurm's own preemption sent TERM (its EndTime moved to now
#: + GraceTime; slurm.conf(5) GraceTime, preempt.html), or the warning signal came (``--signal``,
#: a spot notice or ``scancel --signal``).
SOURCE_SLURM_PREEMPT = "slurm_preempt"
SOURCE_WARNING = "warning"
REASON_COMPLETED = "completed"
REASON_COMPLETED_AFTER_DONE = "completed_after_done"
REASON_REQUEUE = "requeue"
REASON_FAILED = "failed"
REASON_RANK_KILLED = "rank_killed"
REASON_REQUEUE_LIMIT = "requeue_limit"
REASON_REQUEUE_FAILED = "requeue_failed"
REASON_REQUEUE_DISABLED = "requeue_disabled"
REASON_PREEMPTED_NO_CHECKPOINT = "preempted_no_checkpoint"
#: The job was cancelled (``scancel``) while it ran: never requeued.
REASON_CANCELLED = "cancelled"
#: Slurm ended the job at its time limit (TERM to every process of the job, the supervisor
#: included; ``scontrol show job`` says ``Reason=TimeLimit``): never requeued.
REASON_TIME_LIMIT = "time_limit"
#: The job was rendered for another protocol version than this hpcflow's (see
#: :data:`PROTOCOL_VERSION`).
REASON_VERSION_SKEW = "version_skew"
#: The supervisor itself failed; the batch script's last-resort record.
REASON_SUPERVISOR_ERROR = "supervisor_error"
#: The job was requeued after the preemption warning although no hpcflow checkpoint was
#: committed: the program did not join the protocol and resumes from its own checkpoints.
REASON_REQUEUED_NO_CHECKPOINT = "requeued_no_checkpoint"
#: Ledger event of a spot interruption notice, appended by ``hpcflow spot-watch`` (not the
#: batch script) before it sends the warning signal.
EVENT_SPOT_NOTICE = "spot_notice"

# ---- Programs that catch the warning signal themselves (docs/your-training-loop.md).
#: ``program.protocol`` value: the program handles the warning signal itself (Lightning's
#: ``SLURMEnvironment(auto_requeue=True)``, submitit, a ``signal.signal(SIGUSR1, ...)``): it is
#: forwarded once every process of the step catches it, as a plain ``sbatch`` would.
PROTOCOL_HANDLES_SIGNAL = "handles_signal"
#: Ledger event of a held warning that went to the program later, once every process of its
#: step caught the signal: ``forwarded``, ``ranks`` (tasks found), ``why``. The first check's
#: verdict is the ``catch`` member of the warning's ``signal`` event (the same members, and
#: ``not_catching``: processes that would die of it, at most 8: ``node``, ``pid``, ``comm``).
EVENT_CATCH_CHECK = "catch_check"
#: ``cause`` of a ``signal`` event (and of the program's own ``requeue``): what brought the
#: warning. The requeue of an attempt a time-limit warning brought (Slurm's ``--signal``, or
#: one sent by hand) counts against ``preemption.max_requeues``; of one a preemption brought
#: (a spot notice, Slurm's own preemption) against ``preemption.max_preemptions``. An attempt
#: without a cause on record (protocol 4) counts as a time-limit one.
CAUSE_TIME_LIMIT = "time_limit"
CAUSE_PREEMPTION = "preemption"
#: ``by`` of a ``requeue`` event: the program requeued the job itself (``scontrol requeue`` from
#: a rank, as Lightning and submitit do); hpcflow did not requeue it a second time.
REQUEUED_BY_PROGRAM = "program"
#: The ending reason ``status`` and ``report`` give an attempt the program requeued itself.
REASON_PROGRAM_REQUEUED = "program_requeued"
#: Exit status of the batch script when the job ends unfinished and the program's own status
#: was 0 (a program that saved on the warning and exited 0 has not finished): Slurm then says
#: FAILED, not COMPLETED, and ``--dependency=afterok`` does not fire.
EXIT_UNFINISHED = 1

def parse_parallelism(text: str) -> dict[str, int]:
    """``"dp,pp,tp"`` (:data:`ENV_PARALLELISM`) -> ``{"dp": .., "pp": .., "tp": ..}``.

    Raises:
        ValueError: not three integers separated by commas; the message quotes the text.
    """
    parts = text.split(",")
    try:
        dp, pp, tp = (int(p) for p in parts)
    except ValueError:
        raise ValueError(
            f"{ENV_PARALLELISM}={text!r} must be three integers 'dp,pp,tp', e.g. '-1,2,2'"
        ) from None
    return {"dp": dp, "pp": pp, "tp": tp}


def format_parallelism(dp: int, pp: int, tp: int) -> str:
    """The inverse of :func:`parse_parallelism`."""
    return f"{dp},{pp},{tp}"
