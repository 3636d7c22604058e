"""Real gloo ranks for the checkpoint tests: a fork server, its client, and the rank programs.

Run as a script, this module is a fork server: it imports torch once, then forks one child per
rank for each ``start`` request, so a trial costs no torch import. Each child joins a gloo
process group on 127.0.0.1, runs one of the rank programs below and exits with its code.
``wait`` with ``kill_on_bad_exit`` SIGKILLs the other ranks as soon as one rank ends with a
non-zero status or a signal, as ``srun --kill-on-bad-exit=1`` does (srun(1)).

A rank program is ``"<module>:<function>"`` (a module beside this file), called as
``function(rank, world, params)`` after the process group is up; it returns the exit code.

Protocol (one JSON object per line): ``{"cmd": "start", "program": "<module>:<function>",
"world": W, "port": P, "params": {...}, "logs": [path per rank]}`` → ``{"pids": [...]}``;
``{"cmd": "wait", "kill_on_bad_exit": bool}`` → ``{"returncodes": [...]}``; ``{"cmd": "quit"}``.

The rank programs record what happens, in order, as JSON lines in ``<work>/events-<rank>.jsonl``
(flushed line by line, so the record survives a SIGKILL), and their findings in
``<work>/result-<rank>.json``.
"""

from __future__ import annotations

import importlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

SERVER = Path(__file__)
GATE_TIMEOUT_S = 120.0  # guard against a hung test, never an expectation


# ---- client (used by the tests)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Ranks:
    """Client of the fork server in this module."""

    def __init__(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "HPCFLOW_"))}
        env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen([sys.executable, str(SERVER)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=env, text=True)
        self._read(180.0)

    def _read(self, timeout_s: float) -> dict:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        if not ready:
            raise TimeoutError(f"the fork server gave no answer within {timeout_s} s")
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the fork server ended (rc={self.proc.poll()})")
        return json.loads(line)

    def run(self, program: str, work: Path, params: dict[str, Any], *, world: int = 2,
            kill_on_bad_exit: bool = False, timeout_s: float = 120.0) -> list[int]:
        """Run ``program`` on ``world`` ranks to the end; returns their exit codes
        (negative: killed by that signal)."""
        work.mkdir(parents=True, exist_ok=True)
        logs = [str(work / f"rank{r}.log") for r in range(world)]
        request = {"cmd": "start", "program": program, "world": world, "port": free_port(),
                   "params": {**params, "work": str(work)}, "logs": logs}
        print(f"$ {program} x{world} {json.dumps(params, sort_keys=True)} (logs in {work})")
        self._send(request)
        pids = self._read(30.0)["pids"]
        self._send({"cmd": "wait", "kill_on_bad_exit": kill_on_bad_exit})
        try:
            return self._read(timeout_s)["returncodes"]
        except TimeoutError:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self._read(30.0)
            raise AssertionError(f"{program} ran past {timeout_s} s\n{dump(work)}") from None

    def _send(self, request: dict) -> None:
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self._send({"cmd": "quit"})
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


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


# ---- server


def preload() -> None:
    import numpy  # noqa: F401
    import torch  # noqa: F401
    import torch._dynamo  # noqa: F401 - fully_shard imports it on first use
    import torch.distributed.checkpoint  # noqa: F401
    import torch.distributed.checkpoint.staging  # noqa: F401
    import torch.distributed.checkpoint.state_dict  # noqa: F401
    import torch.distributed.fsdp  # noqa: F401
    import torch.distributed.tensor  # noqa: F401

    import hpcflow.runtime.checkpoint  # noqa: F401


def run_child(request: dict, rank: int) -> None:
    code = 1
    try:
        fd = os.open(request["logs"][rank], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        from datetime import timedelta

        import torch.distributed as dist

        world = request["world"]
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{request['port']}",
                                rank=rank, world_size=world, timeout=timedelta(seconds=60))
        module, _, name = request["program"].partition(":")
        code = getattr(importlib.import_module(module), name)(rank, world, request["params"])
        dist.destroy_process_group()
    except BaseException:  # noqa: BLE001 - report anything, never return into the server
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def wait_all(pids: list[int], kill_on_bad_exit: bool) -> list[int]:
    codes: dict[int, int] = {}
    while len(codes) < len(pids):
        pid, status = os.waitpid(-1, 0)
        if pid not in pids:
            continue
        codes[pid] = os.waitstatus_to_exitcode(status)
        if kill_on_bad_exit and codes[pid] != 0:
            for other in pids:
                if other not in codes:
                    try:
                        os.kill(other, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
    return [codes[pid] for pid in pids]


def main() -> None:
    sys.path.insert(0, str(SERVER.parent))
    preload()
    print(json.dumps({"ready": True}), flush=True)
    pids: list[int] = []
    for line in sys.stdin:
        request = json.loads(line)
        if request["cmd"] == "start":
            pids = []
            for rank in range(request["world"]):
                pid = os.fork()
                if pid == 0:
                    run_child(request, rank)
                pids.append(pid)
            print(json.dumps({"pids": pids}), flush=True)
        elif request["cmd"] == "wait":
            print(json.dumps({"returncodes": wait_all(pids, request["kill_on_bad_exit"])}),
                  flush=True)
        elif request["cmd"] == "quit":
            break


if __name__ == "__main__":
    main()
