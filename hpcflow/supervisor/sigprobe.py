"""``python -m hpcflow.supervisor.sigprobe``: on one node, whether the processes of the job's
program step catch the warning signal; one JSON line (:class:`~hpcflow.supervisor.sigcatch.
NodeReport`) on stdout.

The supervisor runs it in a step of its own beside the program (``srun --overlap``, one task per
node) when a warning comes for a program that has not joined hpcflow's protocol
(:func:`hpcflow.supervisor.commands.sigprobe_argv`). On its node it lists the job's processes
with ``scontrol listpids <job> <node>`` (scontrol(1): the processes slurmstepd tracks, the tasks
and everything they started), finds the program step as the one whose processes carry this try's
``HPCFLOW_STEP_TRY`` in their environment, and reads each of that step's processes'
``/proc/<pid>/status`` (proc(5), ``SigCgt``/``SigIgn``). It runs as the job's user, so it reads
only that user's processes, and reads each file bounded in size. Exit status 0, also when a
node could not be read (the report says why).
"""

from __future__ import annotations

import argparse
import os
import signal as signal_module
import subprocess
import sys
from pathlib import Path

from hpcflow import protocol as P
from hpcflow.supervisor.sigcatch import MAX_NAMED, NodeReport, catches, handles, parse_listpids

#: Most bytes read of one ``/proc/<pid>/environ`` or ``status``.
MAX_PROC_BYTES = 256 * 1024
#: Steps that are not the program's (scontrol(1): the batch script's and the extern step).
OTHER_STEPS = ("batch", "extern")


def _read(path: Path) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(MAX_PROC_BYTES)
    except OSError:
        return None


def _has_try(pid: int, job_id: str, try_: str, proc: Path) -> bool:
    data = _read(proc / str(pid) / "environ")
    if data is None:
        return False
    env = set(data.split(b"\0"))
    return (f"{P.ENV_STEP_TRY}={try_}".encode() in env
            and f"SLURM_JOB_ID={job_id}".encode() in env)


def probe(job_id: str, try_: str, signum: int, node: str, listing: str,
          proc: Path = Path("/proc"), own_step: str = "") -> NodeReport:
    """The report of one node from ``scontrol listpids`` output and ``/proc``.

    Args:
        job_id, try_: the job and the program step's in-job try.
        signum: the warning signal's number.
        node: this node's name.
        listing: ``scontrol listpids <job> <node>`` output.
        proc: the proc file system (tests pass a folder of their own).
        own_step: this probe's step id, never the program's.
    """
    listed = [p for p in parse_listpids(listing)
              if p.step not in OTHER_STEPS and p.step != own_step]
    steps = {p.step for p in listed if _has_try(p.pid, job_id, try_, proc)}
    if len(steps) != 1:
        return NodeReport(node)  # the step has no process here (yet), or it cannot be told
    step = steps.pop()
    mine = [p for p in listed if p.step == step]
    ranks = tuple(sorted(p.global_id for p in mine if p.global_id is not None))
    processes = handling = dying = 0
    named: list[tuple[int, str]] = []
    for p in mine:
        status = _read(proc / str(p.pid) / "status")
        if status is None:
            continue  # gone since the listing
        text = status.decode("utf-8", "replace")
        processes += 1
        handling += handles(text, signum)
        if not catches(text, signum):  # False, or None: masks that cannot be read
            dying += 1
            if len(named) < MAX_NAMED:
                comm = next((line.partition(":")[2].strip() for line in text.splitlines()
                             if line.startswith("Name:")), "?")
                named.append((p.pid, comm[:40]))
    return NodeReport(node, ranks, processes, handling, tuple(named), dying)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hpcflow.supervisor.sigprobe")
    parser.add_argument("--job", required=True)
    parser.add_argument("--try", dest="try_", required=True)
    parser.add_argument("--signal", required=True, choices=["USR1", "USR2"])
    args = parser.parse_args(argv)
    node = os.environ.get("SLURMD_NODENAME", "")
    signum = int(getattr(signal_module, f"SIG{args.signal}"))
    try:
        # The node name matters where several slurmd share one host (the local cluster).
        result = subprocess.run(["scontrol", "listpids", args.job, *([node] if node else [])],
                                capture_output=True, text=True, timeout=10, check=False,
                                stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        print(NodeReport(node or "?", error=f"scontrol listpids: {exc}").encode(), flush=True)
        return 0
    if result.returncode != 0:
        why = (result.stderr or "").strip().splitlines()[-1:] or [f"status {result.returncode}"]
        print(NodeReport(node or "?", error=f"scontrol listpids: {why[0][:160]}").encode(),
              flush=True)
        return 0
    report = probe(args.job, args.try_, signum, node or "?", result.stdout,
                   own_step=os.environ.get("SLURM_STEP_ID", ""))
    print(report.encode(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
