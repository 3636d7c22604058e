"""The one fork server of the runtime tests: pay torch's import cost once, fork one child per rank.

Importing torch with DCP and FSDP2 costs about 5 CPU-seconds; four ranks on two cores would spend
most of a test importing. Run as a script, this module imports everything a rank imports, then
for each ``start`` request forks one child per entry; each child sends its output to its own log
file, takes the environment it is given (when one is), calls ``target(*args)`` (a function
``"<module>:<function>"``: hpcflow's, or a module beside this file) and exits with its return
code. The server itself never starts a process group or a thread, so every fork starts clean.
``wait`` with ``kill_on_bad_exit`` SIGKILLs the other children as soon as one ends with a
non-zero status or a signal, as ``srun --kill-on-bad-exit=1`` does (srun(1)).

Protocol (one JSON object per line): ``{"cmd": "start", "target": "<module>:<function>",
"children": [{"args": [...], "env": {...} or null, "log": path}, ...]}`` → ``{"pids": [...]}``;
``{"cmd": "wait", "kill_on_bad_exit": bool}`` → ``{"returncodes": [...]}`` (negative: killed by
that signal); ``{"cmd": "quit"}``. :class:`ForkServer` is the client.
"""

from __future__ import annotations

import importlib
import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

SERVER = Path(__file__)


# ---- client (used by the tests)


class ForkServer:
    """Client of the fork server: start children, wait for them, quit."""

    def __init__(self, env: dict[str, str], ready_timeout_s: float = 180.0) -> None:
        self.proc = subprocess.Popen([sys.executable, str(SERVER)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=env, text=True)
        self.read(ready_timeout_s)

    def read(self, timeout_s: float) -> dict:
        """The server's next answer.

        Raises:
            TimeoutError: none within ``timeout_s`` seconds.
            RuntimeError: the server ended.
        """
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        if not ready:
            raise TimeoutError(f"the fork server gave no answer within {timeout_s} s")
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the fork server ended (rc={self.proc.poll()})")
        return json.loads(line)

    def send(self, request: dict) -> None:
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()

    def start(self, target: str, children: list[dict[str, Any]]) -> list[int]:
        """Fork one child per ``{"args", "env", "log"}`` running ``target``; their pids."""
        self.send({"cmd": "start", "target": target, "children": children})
        return self.read(30.0)["pids"]

    def request_wait(self, kill_on_bad_exit: bool = False) -> None:
        """Ask for the exit codes of the children; :meth:`read` returns them when all ended."""
        self.send({"cmd": "wait", "kill_on_bad_exit": kill_on_bad_exit})

    def close(self) -> None:
        """End the server (killing children still running)."""
        if self.proc.poll() is None:
            try:
                self.send({"cmd": "quit"})
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


def kill_all(pids: list[int]) -> None:
    """SIGKILL every pid still present."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# ---- server


def preload() -> None:
    """Import everything a rank imports lazily, so children start warm."""
    import numpy  # noqa: F401
    import torch  # noqa: F401
    import torch._dynamo  # noqa: F401 - fully_shard imports it on first use (1.4 s)
    import torch.distributed.checkpoint  # noqa: F401
    import torch.distributed.checkpoint.staging  # noqa: F401
    import torch.distributed.checkpoint.state_dict  # noqa: F401
    import torch.distributed.fsdp  # noqa: F401
    import torch.distributed.pipelining  # noqa: F401
    import torch.distributed.tensor  # noqa: F401
    import torch.distributed.tensor.parallel  # noqa: F401

    import hpcflow.examples.data  # noqa: F401
    import hpcflow.examples.lm  # noqa: F401
    import hpcflow.examples.metrics  # noqa: F401
    import hpcflow.examples.parallelize  # noqa: F401
    import hpcflow.examples.tasks  # noqa: F401
    import hpcflow.examples.toy  # noqa: F401
    import hpcflow.examples.train  # noqa: F401
    import hpcflow.examples.trainstate  # noqa: F401
    import hpcflow.runtime.checkpoint  # noqa: F401
    import hpcflow.runtime.digest  # noqa: F401
    import hpcflow.runtime.sampler  # noqa: F401


def run_child(target: str, child: dict[str, Any]) -> None:
    """In the forked child: log to the child's file, take its environment, run ``target``,
    exit with its code (1 after an exception, which goes to the log)."""
    code = 1
    try:
        fd = os.open(child["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        if child.get("env") is not None:
            os.environ.clear()
            os.environ.update(child["env"])
        module, _, name = target.partition(":")
        code = getattr(importlib.import_module(module), name)(*child["args"])
    except SystemExit as exc:  # argparse errors
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - report anything, never return into the server
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def wait_all(pids: list[int], kill_on_bad_exit: bool) -> list[int]:
    """Exit codes of ``pids`` in their order; with ``kill_on_bad_exit`` the first bad exit
    kills the others."""
    codes: dict[int, int] = {}
    while len(codes) < len(pids):
        pid, status = os.waitpid(-1, 0)
        if pid not in pids:
            continue
        codes[pid] = os.waitstatus_to_exitcode(status)
        if kill_on_bad_exit and codes[pid] != 0:
            kill_all([other for other in pids if other not in codes])
    return [codes[pid] for pid in pids]


def main() -> None:
    """Serve start/wait requests on stdin until ``quit`` or end of input."""
    sys.path.insert(0, str(SERVER.parent))
    preload()
    print(json.dumps({"ready": True}), flush=True)
    pids: list[int] = []
    for line in sys.stdin:
        request = json.loads(line)
        if request["cmd"] == "start":
            pids = []
            for child in request["children"]:
                pid = os.fork()
                if pid == 0:
                    run_child(request["target"], child)
                pids.append(pid)
            print(json.dumps({"pids": pids}), flush=True)
        elif request["cmd"] == "wait":
            print(json.dumps({"returncodes": wait_all(pids, request["kill_on_bad_exit"])}),
                  flush=True)
        elif request["cmd"] == "quit":
            break


if __name__ == "__main__":
    main()
