"""A stand-in for srun that pays torch's import cost once: fork one process per rank.

Importing torch with DCP and FSDP2 costs about 5 CPU-seconds; four ranks on two cores would spend
most of a test importing. This launcher imports the training program once, then for every step it
is asked to start forks ``world_size`` children; each child sets the ``SLURM_*`` variables srun
would give that task, sends its output to its own log file and runs
``hpcflow.examples.train.main`` — the function ``python -m hpcflow.examples.train`` runs — then exits
with its return code. The launcher itself never starts a process group or a thread, so every fork
starts clean.

Protocol (one JSON object per line): the test writes
``{"cmd": "start", "argv": [...], "env": [{...} per rank], "logs": [path per rank]}`` and reads
``{"pids": [...]}``; it writes ``{"cmd": "wait"}`` and reads ``{"returncodes": [...]}``;
``{"cmd": "quit"}`` ends the launcher.
"""

from __future__ import annotations

import json
import os
import sys


def preload() -> None:
    """Import everything a rank imports lazily, so children start warm."""
    import numpy  # noqa: F401
    import torch  # noqa: F401
    import torch._dynamo  # noqa: F401 - fully_shard imports it on first use (1.4 s)
    import torch.distributed.checkpoint  # noqa: F401
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
    import hpcflow.runtime.digest  # noqa: F401
    import hpcflow.runtime.sampler  # noqa: F401


def run_child(argv: list[str], env: dict[str, str], log: str) -> None:
    """In the forked child: become one rank, run the program, exit with its code."""
    code = 1
    try:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        os.environ.clear()
        os.environ.update(env)
        from hpcflow.examples import train

        code = train.main(argv)
    except SystemExit as exc:  # argparse errors
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException as exc:  # noqa: BLE001 - report anything, never return into the launcher
        print(f"fork_srun child failed: {exc!r}", file=sys.stderr)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main() -> None:
    """Serve start/wait requests on stdin until ``quit`` or end of input."""
    preload()
    print(json.dumps({"ready": True}), flush=True)
    pids: list[int] = []
    for line in sys.stdin:
        request = json.loads(line)
        if request["cmd"] == "start":
            pids = []
            for env, log in zip(request["env"], request["logs"], strict=True):
                pid = os.fork()
                if pid == 0:
                    run_child(request["argv"], env, log)
                pids.append(pid)
            print(json.dumps({"pids": pids}), flush=True)
        elif request["cmd"] == "wait":
            codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
            print(json.dumps({"returncodes": codes}), flush=True)
        elif request["cmd"] == "quit":
            break


if __name__ == "__main__":
    main()
