"""Environment variable names a job spec may not set, and why.

The batch script exports the spec's ``env`` before it reads Slurm's variables, so a spec that
set ``SLURM_JOB_ID`` would make the script requeue another job, and ``SLURM_RESTART_COUNT``
would defeat ``preemption.max_requeues``. Bash's own variables change the script itself.
"""

from __future__ import annotations

#: sbatch(1), OUTPUT ENVIRONMENT VARIABLES (Slurm 22.05): what Slurm sets in the batch job's
#: environment. SLURM_ARRAY_*, SLURM_JOB_*, SLURM_HET_*, SLURM_STEP_* and SBATCH_* are refused
#: as families (below), so newer Slurm versions' additions are covered too.
SLURM_OUTPUT_VARIABLES = frozenset({
    "SLURMD_NODENAME", "SLURM_CLUSTER_NAME", "SLURM_CONTAINER", "SLURM_CPUS_ON_NODE",
    "SLURM_CPUS_PER_GPU", "SLURM_CPUS_PER_TASK", "SLURM_DISTRIBUTION", "SLURM_DIST_PLANESIZE",
    "SLURM_EXPORT_ENV", "SLURM_GPUS", "SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_NODE",
    "SLURM_GPUS_PER_SOCKET", "SLURM_GPUS_PER_TASK", "SLURM_GPU_BIND", "SLURM_GPU_FREQ",
    "SLURM_GTIDS", "SLURM_JOBID", "SLURM_LOCALID", "SLURM_MEM_PER_CPU", "SLURM_MEM_PER_GPU",
    "SLURM_MEM_PER_NODE", "SLURM_NNODES", "SLURM_NODEID", "SLURM_NODELIST",
    "SLURM_NODE_ALIASES", "SLURM_NPROCS", "SLURM_NTASKS", "SLURM_NTASKS_PER_CORE",
    "SLURM_NTASKS_PER_GPU", "SLURM_NTASKS_PER_NODE", "SLURM_NTASKS_PER_SOCKET",
    "SLURM_OVERCOMMIT", "SLURM_PRIO_PROCESS", "SLURM_PROCID", "SLURM_PROFILE",
    "SLURM_RESTART_COUNT", "SLURM_SHARDS_ON_NODE", "SLURM_SUBMIT_DIR", "SLURM_SUBMIT_HOST",
    "SLURM_TASKS_PER_NODE", "SLURM_TASK_PID", "SLURM_THREADS_PER_CORE", "SLURM_TOPOLOGY_ADDR",
    "SLURM_TOPOLOGY_ADDR_PATTERN",
})
SLURM_OUTPUT_PREFIXES = ("SLURM_ARRAY_", "SLURM_JOB_", "SLURM_HET_", "SLURM_STEP_", "SBATCH_",
                         "SLURMD_")

#: bash(1), "Shell Variables": read-only in every bash; assigning one is an error.
BASH_READONLY = frozenset({"BASHOPTS", "BASH_VERSINFO", "EUID", "PPID", "SHELLOPTS", "UID"})
#: bash(1), "Shell Variables": set by bash itself, or changing how the running script behaves
#: (IFS splits words, POSIXLY_CORRECT switches to posix mode, BASH_COMPAT to older rules).
BASH_SPECIAL = frozenset({
    "BASHPID", "BASH_ALIASES", "BASH_ARGC", "BASH_ARGV", "BASH_ARGV0", "BASH_CMDS",
    "BASH_COMMAND", "BASH_COMPAT", "BASH_EXECUTION_STRING", "BASH_LINENO", "BASH_REMATCH",
    "BASH_SOURCE", "BASH_SUBSHELL", "BASH_VERSION", "BASH_XTRACEFD", "DIRSTACK", "EPOCHREALTIME",
    "EPOCHSECONDS", "FUNCNAME", "GROUPS", "IFS", "LINENO", "OPTARG", "OPTERR", "OPTIND",
    "PIPESTATUS", "POSIXLY_CORRECT", "PS4", "RANDOM", "SECONDS", "SRANDOM",
})

#: The batch script's own names: HPCFLOW_* it exports for the ranks (docs/protocol.md) and
#: hpcflow_* it uses internally. Matched without regard to case.
SCRIPT_PREFIX = "hpcflow_"


def env_name_problem(name: str) -> str | None:
    """Why a job spec may not set the environment variable ``name``, or None when it may.

    The name's shape (``[A-Za-z_][A-Za-z0-9_]*``) is checked elsewhere.
    """
    if name.lower().startswith(SCRIPT_PREFIX):
        return ("names starting with HPCFLOW_ or hpcflow_ are the batch script's own (docs/"
                "protocol.md); setting one would change how hpcflow runs the job")
    if name in SLURM_OUTPUT_VARIABLES or name.startswith(SLURM_OUTPUT_PREFIXES):
        return ("is set by Slurm for the job (sbatch(1), OUTPUT ENVIRONMENT VARIABLES); the batch "
                "script reads Slurm's values (job id, restart count, array task, node list) to "
                "requeue the right job, so the spec may not set them; use the spec's fields "
                "(nodes, tasks_per_node, ...) instead")
    if name in BASH_READONLY:
        return "is a read-only bash variable (bash(1), Shell Variables); it cannot be set"
    if name in BASH_SPECIAL:
        return ("is a bash special variable (bash(1), Shell Variables); setting it would change "
                "how the batch script itself runs")
    return None
