"""Run the training program as a fake 2-node x 2-task Slurm step on this machine.

Each rank gets the ``SLURM_*`` variables srun would set (srun(1), "OUTPUT ENVIRONMENT
VARIABLES"). The two "nodes" are 127.0.0.1 and 127.0.0.2, both loopback on Linux, so the
rendezvous host (first host of the node list) resolves without /etc/hosts. The job id is chosen so
the port the runtime derives from it is free. Ranks are forked by ``fork_server.py`` (one torch
import for all of them), each running ``hpcflow.examples.train.main`` (what ``python -m
hpcflow.examples.train`` runs); the program itself is run by the tests that do not need several
ranks.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

from fork_server import ForkServer

from hpcflow.protocol import PORT_BASE, PORT_SPAN

NODES = 2
TASKS_PER_NODE = 2
WORLD_SIZE = NODES * TASKS_PER_NODE


def job_id_with_free_port() -> str:
    """A Slurm job id whose derived rendezvous port is free on 127.0.0.1 now."""
    rng = random.Random()
    for _ in range(200):
        port = PORT_BASE + rng.randrange(PORT_SPAN)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        return str(7 * PORT_SPAN + port - PORT_BASE)
    raise RuntimeError(f"no free port in [{PORT_BASE}, {PORT_BASE + PORT_SPAN})")


def base_env() -> dict[str, str]:
    """This process's environment without any Slurm, torchrun or hpcflow variables."""
    drop = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("SLURM_", "HPCFLOW_")) and key not in drop
    }
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    return env


def slurm_env(
    rank: int,
    job_id: str,
    restart: int,
    extra: dict[str, str],
    nodes: int = NODES,
    tasks_per_node: int = TASKS_PER_NODE,
) -> dict[str, str]:
    """The environment srun would give task ``rank`` of a ``nodes x tasks_per_node`` step (node
    i is 127.0.0.<i+1>, loopback on Linux), plus ``extra``."""
    env = base_env()
    env.update(
        SLURM_JOB_ID=job_id,
        SLURM_JOB_NODELIST=f"127.0.0.[1-{nodes}]" if nodes > 1 else "127.0.0.1",
        SLURM_NTASKS=str(nodes * tasks_per_node),
        SLURM_TASKS_PER_NODE=f"{tasks_per_node}(x{nodes})",
        SLURM_PROCID=str(rank),
        SLURM_LOCALID=str(rank % tasks_per_node),
        SLURM_NODEID=str(rank // tasks_per_node),
    )
    if restart:
        env["SLURM_RESTART_COUNT"] = str(restart)
    env.update(extra)
    return env


def torchrun_env(rank: int, port: int, extra: dict[str, str]) -> dict[str, str]:
    """The environment torchrun gives worker ``rank`` of ``--nnodes 2 --nproc-per-node 2``
    (torchrun docs, "Environment Variables"), plus ``extra``."""
    env = base_env()
    env.update(
        RANK=str(rank),
        WORLD_SIZE=str(WORLD_SIZE),
        LOCAL_RANK=str(rank % TASKS_PER_NODE),
        LOCAL_WORLD_SIZE=str(TASKS_PER_NODE),
        GROUP_RANK=str(rank // TASKS_PER_NODE),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    env.update(extra)
    return env


@dataclass
class Step:
    """One fake srun step: its ranks' pids and log files."""

    pids: list[int]
    logs: list[Path]
    argv: list[str]
    returncodes: list[int] = field(default_factory=list)

    def signal(self, signum: int, ranks: list[int] | None = None) -> None:
        """Send ``signum`` to the given ranks (all by default), as srun forwards USR1."""
        for rank in range(len(self.pids)) if ranks is None else ranks:
            os.kill(self.pids[rank], signum)

    def kill(self) -> None:
        """SIGKILL every rank still present (by its own pid)."""
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def rank0_lines(self, tag: str) -> list[dict]:
        """The JSON payloads of rank 0's ``<tag> {...}`` lines, in order."""
        lines = self.logs[0].read_text().splitlines() if self.logs[0].exists() else []
        return [json.loads(line.split(" ", 1)[1]) for line in lines if line.startswith(tag + " ")]

    def dump(self) -> str:
        """Command, exit codes and every rank's log tail, for a failure message."""
        parts = [f"$ {' '.join(self.argv)}  (x{len(self.pids)}) rc={self.returncodes}"]
        for rank, log in enumerate(self.logs):
            text = log.read_text() if log.exists() else "<no log>"
            parts.append(f"--- rank {rank} ({log}) ---\n{text[-3000:]}")
        return "\n".join(parts)


class ForkSrun:
    """Starts steps of ``WORLD_SIZE`` ranks of the training program on the fork server and waits
    for them."""

    def __init__(self, ready_timeout_s: float = 120.0) -> None:
        self.server = ForkServer(base_env(), ready_timeout_s)
        self.step: Step | None = None

    def start(
        self,
        log_dir: Path,
        args: list[str],
        *,
        job_id: str,
        restart: int = 0,
        extra_env: dict[str, str] | None = None,
        torchrun: bool = False,
        nodes: int = NODES,
        tasks_per_node: int = TASKS_PER_NODE,
    ) -> Step:
        """Start every rank of the training program with ``args``; logs go to ``log_dir``.

        With ``torchrun`` the ranks get torchrun's variables instead of Slurm's (the port is
        the one ``job_id`` maps to; only the default 2 x 2 layout). ``nodes`` x
        ``tasks_per_node`` ranks are started."""
        log_dir.mkdir(parents=True, exist_ok=True)
        argv = ["--dist-timeout-s", "60", *args]
        world = nodes * tasks_per_node
        logs = [log_dir / f"rank{rank}-restart{restart}.log" for rank in range(world)]
        if torchrun:
            port = PORT_BASE + int(job_id) % PORT_SPAN
            envs = [torchrun_env(rank, port, extra_env or {}) for rank in range(WORLD_SIZE)]
        else:
            envs = [
                slurm_env(rank, job_id, restart, extra_env or {}, nodes, tasks_per_node)
                for rank in range(world)
            ]
        pids = self.server.start("hpcflow.examples.train:main", [
            {"args": [argv], "env": env, "log": str(log)} for env, log in zip(envs, logs, strict=True)
        ])
        print(f"$ python -m hpcflow.examples.train {' '.join(argv)}  x{len(envs)} "
              f"(job {job_id}, restart {restart}, pids {pids})")
        self.step = Step(pids, logs, ["python -m hpcflow.examples.train", *argv])
        return self.step

    def wait(self, step: Step, timeout_s: float = 60.0) -> list[int]:
        """Exit codes of every rank; on timeout kill them all and fail with their logs."""
        self.server.request_wait()
        try:
            step.returncodes = self.server.read(timeout_s)["returncodes"]
        except TimeoutError:
            step.kill()
            step.returncodes = self.server.read(10.0)["returncodes"]
            raise AssertionError(f"step ran past {timeout_s} s\n{step.dump()}") from None
        return step.returncodes

    def close(self) -> None:
        """End the launcher (killing a step still running)."""
        self.server.close()


def wait_for_line(step: Step, tag: str, predicate, timeout_s: float) -> dict:
    """Poll rank 0's log until a ``tag`` line satisfies ``predicate``; return its payload."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for payload in step.rank0_lines(tag):
            if predicate(payload):
                return payload
        time.sleep(0.05)
    step.kill()
    raise AssertionError(f"no matching {tag} line within {timeout_s} s\n{step.dump()}")
