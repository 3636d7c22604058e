"""Real gloo ranks for the checkpoint tests: the client and the rank programs.

:class:`Ranks` runs a rank program on ``world`` children of the fork server (fork_server.py, one
torch import for every trial); each child joins a gloo process group on 127.0.0.1
(:func:`run_rank`), runs the program and exits with its code. ``kill_on_bad_exit`` SIGKILLs the
other ranks as soon as one rank ends with a non-zero status or a signal, as
``srun --kill-on-bad-exit=1`` does (srun(1)).

A rank program is ``"<module>:<function>"`` (a module beside this file), called as
``function(rank, world, params)`` after the process group is up; it returns the exit code.

The rank programs record what happens, in order, as JSON lines in ``<work>/events-<rank>.jsonl``
(flushed line by line, so the record survives a SIGKILL), and their findings in
``<work>/result-<rank>.json``.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import socket
import threading
from pathlib import Path
from typing import Any

from fork_server import ForkServer, kill_all

GATE_TIMEOUT_S = 120.0  # guard against a hung test, never an expectation


# ---- client (used by the tests)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Ranks:
    """Runs rank programs on children of the fork server."""

    def __init__(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "HPCFLOW_"))}
        env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        self.server = ForkServer(env, ready_timeout_s=180.0)

    def run(self, program: str, work: Path, params: dict[str, Any], *, world: int = 2,
            kill_on_bad_exit: bool = False, timeout_s: float = 120.0) -> list[int]:
        """Run ``program`` on ``world`` ranks to the end; returns their exit codes
        (negative: killed by that signal)."""
        work.mkdir(parents=True, exist_ok=True)
        port = free_port()
        params = {**params, "work": str(work)}
        children = [{"args": [program, rank, world, port, params], "env": None,
                     "log": str(work / f"rank{rank}.log")} for rank in range(world)]
        print(f"$ {program} x{world} {json.dumps(params, sort_keys=True)} (logs in {work})")
        pids = self.server.start("ckpt_ranks:run_rank", children)
        self.server.request_wait(kill_on_bad_exit)
        try:
            return self.server.read(timeout_s)["returncodes"]
        except TimeoutError:
            kill_all(pids)
            self.server.read(30.0)
            raise AssertionError(f"{program} ran past {timeout_s} s\n{dump(work)}") from None

    def close(self) -> None:
        self.server.close()


def events(work: Path, rank: int) -> list[tuple[str, int]]:
    """Rank ``rank``'s recorded (event, step) pairs, in order."""
    path = work / f"events-{rank}.jsonl"
    if not path.exists():
        return []
    return [tuple(json.loads(line)) for line in path.read_text().splitlines() if line]


def result(work: Path, rank: int) -> dict:
    return json.loads((work / f"result-{rank}.json").read_text())


def dump(work: Path) -> str:
    """Every rank's log and events, for a failure message."""
    parts = []
    for path in sorted(work.glob("rank*.log")) + sorted(work.glob("events-*.jsonl")):
        parts.append(f"--- {path.name} ---\n{path.read_text()[-3000:]}")
    return "\n".join(parts)


# ---- rank programs (run in the forked children)


class Recorder:
    """Appends (event, step) to this rank's events file and acts on the trial's instructions:
    SIGKILL itself at one phase of one save, hold the writer at a gate, slow the writer."""

    def __init__(self, work: Path, rank: int, params: dict[str, Any]) -> None:
        self.rank = rank
        self.handle = open(work / f"events-{rank}.jsonl", "a", buffering=1, encoding="utf-8")  # noqa: SIM115
        self.lock = threading.Lock()
        self.params = params
        self.gate = threading.Event()
        self.held = threading.Event()  # the writer has reached the gate

    def __call__(self, event: str, step: int) -> None:
        with self.lock:
            self.handle.write(json.dumps([event, step]) + "\n")
        p = self.params
        if p.get("kill_rank") == self.rank and p.get("kill_step") == step:
            if event == p.get("kill_at"):
                os.kill(os.getpid(), signal.SIGKILL)
            if event == "write_start" and p.get("kill_after_s") is not None:
                threading.Timer(p["kill_after_s"], os.kill, (os.getpid(), signal.SIGKILL)).start()
        if event == "write_data" and p.get("slow_write_s"):
            threading.Event().wait(p["slow_write_s"])  # a slow disk, in the writer thread
        if event == p.get("hold_at") and step == p.get("hold_step"):
            self.held.set()
            if not self.gate.wait(GATE_TIMEOUT_S):
                self("gate_timeout", step)
                raise RuntimeError(f"the gate at {event} of step {step} was never opened")


def run_rank(program: str, rank: int, world: int, port: int, params: dict[str, Any]) -> int:
    """In a forked child: join the gloo group on 127.0.0.1:``port``, run ``program``, leave."""
    from datetime import timedelta

    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=timedelta(seconds=60))
    module, _, name = program.partition(":")
    code = getattr(importlib.import_module(module), name)(rank, world, params)
    dist.destroy_process_group()
    return code
