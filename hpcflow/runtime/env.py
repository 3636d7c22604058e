"""Where this process sits in the job: rank, world size and rendezvous address.

:func:`dist_env_from` turns a process environment into a :class:`DistEnv` and nothing else: no
torch, no network, no global state, so it is tested with plain tables. Three cases:

- torchrun launched the process: ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``,
  ``GROUP_RANK``, ``MASTER_ADDR``, ``MASTER_PORT`` (torch ``torchrun`` docs, "Environment
  Variables") win over the Slurm ones.
- srun launched one task per rank: ``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_LOCALID``,
  ``SLURM_NODEID``, the step's tasks per node, and ``SLURM_JOB_NODELIST`` (srun(1), "OUTPUT
  ENVIRONMENT VARIABLES"). The rendezvous host is the first host of the step's node list (rank 0
  runs there with srun's default block distribution); the port is derived from ``SLURM_JOB_ID`` so
  two jobs sharing a node do not collide, or, where a container set-up drops the job id, from
  the step (``SLURM_STEP_ID``, the node list, ``SLURM_STEP_LAUNCHER_PORT``).
- a SageMaker training container without torchrun (the ``sagemaker-training`` toolkit runs the
  program once per host): one rank per host, placed by the resource config
  (:mod:`hpcflow.runtime.sagemaker_env`), the first host as rendezvous on the toolkit's port.
- none of these: a single process, a world of 1 on the loopback address with a free port.

``MASTER_ADDR`` / ``MASTER_PORT`` set in the environment always win, so a batch script can pin them.
``SLURM_RESTART_COUNT`` is unset on a job's first run (sbatch(1), "OUTPUT ENVIRONMENT VARIABLES"),
hence it defaults to 0.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from hpcflow.hostlist import expand_hostlist
from hpcflow.protocol import port_for_job_number, port_for_step
from hpcflow.runtime.sagemaker_env import rendezvous, resource_config_from

LOOPBACK = "127.0.0.1"

# "2(x3),1" = three nodes with 2 tasks, then one node with 1 task (srun(1), SLURM_TASKS_PER_NODE).
_DECIMAL = re.compile(r"[0-9]+")
_TASKS_PER_NODE_ITEM = re.compile(r"^(\d+)(?:\(x(\d+)\))?$")


@dataclass(frozen=True)
class DistEnv:
    """The place of one process in a distributed job.

    Attributes:
        rank: global rank, ``0 <= rank < world_size``.
        local_rank: rank among the processes of this node; the GPU index on a GPU node.
        world_size: number of processes in the job.
        local_world_size: number of processes on this node.
        node_rank: index of this node among the job's nodes.
        master_addr: host of the rendezvous store (rank 0's node).
        master_port: TCP port of the rendezvous store.
        job_id: Slurm job id, or ``None`` outside Slurm.
        restart_count: ``SLURM_RESTART_COUNT``: how often Slurm requeued this job (0 on the first
            run).
        launcher: where the facts came from: ``"torchrun"``, ``"slurm"``, ``"sagemaker"`` or
            ``"single"``.
    """

    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    node_rank: int
    master_addr: str
    master_port: int
    job_id: str | None = None
    restart_count: int = 0
    launcher: str = "single"

    @property
    def is_rank0(self) -> bool:
        """True on global rank 0, the rank that commits checkpoints and prints progress."""
        return self.rank == 0

    def torchrun_variables(self) -> dict[str, str]:
        """This place as torchrun's variables (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
        ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``; torch's ``torchrun`` docs),
        for libraries that read only those (Hugging Face accelerate)."""
        return {"RANK": str(self.rank), "WORLD_SIZE": str(self.world_size),
                "LOCAL_RANK": str(self.local_rank),
                "LOCAL_WORLD_SIZE": str(self.local_world_size),
                "MASTER_ADDR": self.master_addr, "MASTER_PORT": str(self.master_port)}


def port_for_job(job_id: str) -> int:
    """The rendezvous port of a Slurm job: ``PORT_BASE + job_id % PORT_SPAN``.

    Consecutive job ids get different ports, and every rank of a job computes the same one.

    Args:
        job_id: ``SLURM_JOB_ID``, a decimal number.

    Returns:
        A port in ``[PORT_BASE, PORT_BASE + PORT_SPAN)``.

    Raises:
        ValueError: ``job_id`` is not a non-negative decimal number.
    """
    return port_for_job_number(_parse_int("SLURM_JOB_ID", job_id, minimum=0))


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port that was free on ``host`` a moment ago (the OS picks it; a race is possible)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def dist_env_from(
    environ: Mapping[str, str], *, pick_port: Callable[[], int] = free_port
) -> DistEnv:
    """Build the :class:`DistEnv` of this process from its environment.

    Args:
        environ: the process environment, e.g. ``os.environ``.
        pick_port: returns a free port; called only for a single process outside Slurm and
            torchrun when ``MASTER_PORT`` is unset.

    Returns:
        The process's rank, world and rendezvous address.

    Raises:
        ValueError: a variable needed is missing or garbled, or the values contradict each other
            (e.g. a rank not below the world size); the message names the variable and its value.
    """
    restart_count = _parse_int(
        "SLURM_RESTART_COUNT", environ.get("SLURM_RESTART_COUNT", "0"), minimum=0
    )
    # SLURM_JOBID: Slurm's older name, still exported (srun(1), OUTPUT ENVIRONMENT VARIABLES).
    job_id = environ.get("SLURM_JOB_ID") or environ.get("SLURM_JOBID") or None
    if "RANK" in environ or "WORLD_SIZE" in environ:
        env = _from_torchrun(environ, job_id, restart_count)
    elif "SLURM_PROCID" in environ:
        env = _from_slurm(environ, job_id, restart_count)
    elif (sagemaker := resource_config_from(environ)) is not None:
        addr, port = rendezvous(environ, sagemaker)
        env = DistEnv(rank=sagemaker.node_rank, local_rank=0, world_size=len(sagemaker.hosts),
                      local_world_size=1, node_rank=sagemaker.node_rank, master_addr=addr,
                      master_port=port, job_id=job_id, restart_count=restart_count,
                      launcher="sagemaker")
    else:
        env = DistEnv(
            rank=0,
            local_rank=0,
            world_size=1,
            local_world_size=1,
            node_rank=0,
            master_addr=environ.get("MASTER_ADDR") or LOOPBACK,
            master_port=_port_from(environ) or pick_port(),
            job_id=job_id,
            restart_count=restart_count,
            launcher="single",
        )
    _check_consistent(env)
    return env


def _from_torchrun(environ: Mapping[str, str], job_id: str | None, restart: int) -> DistEnv:
    rank = _parse_int("RANK", _need(environ, "RANK"), minimum=0)
    world_size = _parse_int("WORLD_SIZE", _need(environ, "WORLD_SIZE"), minimum=1)
    port = _port_from(environ)
    if port is None:
        raise ValueError("MASTER_PORT is not set; torchrun sets it together with RANK")
    return DistEnv(
        rank=rank,
        local_rank=_parse_int("LOCAL_RANK", environ.get("LOCAL_RANK", "0"), minimum=0),
        world_size=world_size,
        local_world_size=_parse_int(
            "LOCAL_WORLD_SIZE", environ.get("LOCAL_WORLD_SIZE", "1"), minimum=1
        ),
        node_rank=_parse_int("GROUP_RANK", environ.get("GROUP_RANK", "0"), minimum=0),
        master_addr=_need(environ, "MASTER_ADDR"),
        master_port=port,
        job_id=job_id,
        restart_count=restart,
        launcher="torchrun",
    )


def _from_slurm(environ: Mapping[str, str], job_id: str | None, restart: int) -> DistEnv:
    node_rank = _parse_int("SLURM_NODEID", _need(environ, "SLURM_NODEID"), minimum=0)
    nodelist_var = "SLURM_STEP_NODELIST" if environ.get("SLURM_STEP_NODELIST") else (
        "SLURM_JOB_NODELIST"
    )
    nodelist = _need(environ, nodelist_var)
    try:
        hosts = expand_hostlist(nodelist)
    except ValueError as exc:
        raise ValueError(f"{nodelist_var}={nodelist!r} is not a Slurm hostlist: {exc}") from None
    port = _port_from(environ)
    if port is None:
        port = _derived_port(environ, job_id, nodelist)
    return DistEnv(
        rank=_parse_int("SLURM_PROCID", _need(environ, "SLURM_PROCID"), minimum=0),
        local_rank=_parse_int("SLURM_LOCALID", _need(environ, "SLURM_LOCALID"), minimum=0),
        world_size=_parse_int("SLURM_NTASKS", _need(environ, "SLURM_NTASKS"), minimum=1),
        local_world_size=_local_world_size(environ, node_rank, len(hosts)),
        node_rank=node_rank,
        master_addr=environ.get("MASTER_ADDR") or hosts[0],
        master_port=port,
        job_id=job_id,
        restart_count=restart,
        launcher="slurm",
    )


def _derived_port(environ: Mapping[str, str], job_id: str | None, nodelist: str) -> int:
    """The rendezvous port every rank of the step agrees on: from the job id
    (:func:`port_for_job`); without one, from the step (:func:`hpcflow.protocol.port_for_step`:
    its node list, ``SLURM_STEP_ID`` and ``SLURM_STEP_LAUNCHER_PORT``).

    Raises:
        ValueError: neither a job id nor a step id is set; the message names the variables and
            why one is needed.
    """
    if job_id is not None:
        return port_for_job(job_id)
    step = environ.get("SLURM_STEP_ID") or environ.get("SLURM_STEPID")
    if step is None:
        raise ValueError(
            "SLURM_JOB_ID is not set (nor SLURM_JOBID), and neither is SLURM_STEP_ID: every "
            "rank must derive the same MASTER_PORT from something they all share, and without "
            "a job or step id there is nothing; pass SLURM_JOB_ID (or SLURM_STEP_ID) into the "
            "container, or set MASTER_PORT"
        )
    _parse_int("SLURM_STEP_ID", step, minimum=0)
    return port_for_step(nodelist, step, environ.get("SLURM_STEP_LAUNCHER_PORT", ""))


def _local_world_size(environ: Mapping[str, str], node_rank: int, num_nodes: int) -> int:
    """Tasks on this node, from the step's (else the job's) tasks-per-node list."""
    for var in ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"):
        value = environ.get(var)
        if value:
            counts = parse_tasks_per_node(value, var)
            if node_rank >= len(counts):
                raise ValueError(
                    f"SLURM_NODEID={node_rank} but {var}={value!r} lists only {len(counts)} nodes"
                )
            return counts[node_rank]
    ntasks = _parse_int("SLURM_NTASKS", _need(environ, "SLURM_NTASKS"), minimum=1)
    if ntasks % num_nodes:
        raise ValueError(
            f"SLURM_TASKS_PER_NODE is not set and SLURM_NTASKS={ntasks} does not divide evenly "
            f"over {num_nodes} nodes; set SLURM_TASKS_PER_NODE"
        )
    return ntasks // num_nodes


def parse_tasks_per_node(value: str, var: str = "SLURM_TASKS_PER_NODE") -> list[int]:
    """Expand Slurm's tasks-per-node notation: ``"2(x3),1"`` -> ``[2, 2, 2, 1]``.

    Raises:
        ValueError: the value does not follow the notation (the message names ``var``).
    """
    counts: list[int] = []
    for item in value.split(","):
        match = _TASKS_PER_NODE_ITEM.match(item.strip())
        if not match:
            raise ValueError(f"{var}={value!r}: expected items like '2' or '2(x3)'")
        counts.extend([int(match.group(1))] * int(match.group(2) or 1))
    return counts


def _check_consistent(env: DistEnv) -> None:
    if env.rank >= env.world_size:
        raise ValueError(f"rank {env.rank} is not below the world size {env.world_size}")
    if env.local_rank >= env.local_world_size:
        raise ValueError(
            f"local rank {env.local_rank} is not below the local world size {env.local_world_size}"
        )
    if env.local_world_size > env.world_size:
        raise ValueError(
            f"local world size {env.local_world_size} exceeds the world size {env.world_size}"
        )


def _port_from(environ: Mapping[str, str]) -> int | None:
    value = environ.get("MASTER_PORT")
    if not value:
        return None
    port = _parse_int("MASTER_PORT", value, minimum=1)
    if port > 65535:
        raise ValueError(f"MASTER_PORT={value!r} is not a TCP port (1-65535)")
    return port


def _need(environ: Mapping[str, str], name: str) -> str:
    value = environ.get(name)
    if value is None or not value.strip():
        raise ValueError(f"{name} is not set (or empty); it is needed to place this process")
    return value.strip()


def _parse_int(name: str, value: str, *, minimum: int) -> int:
    text = value.strip()
    if not _DECIMAL.fullmatch(text):
        raise ValueError(f"{name}={value!r} is not a non-negative integer")
    number = int(text)
    if number < minimum:
        raise ValueError(f"{name}={value!r} must be at least {minimum}")
    return number
