"""Who catches the warning signal: the kernel's signal masks of a step's processes, and the rule
that forwards the warning to a program that handles it itself (docs/your-training-loop.md,
"Programs that catch the warning themselves").

srun passes a signal on to its step, and slurmstepd delivers it to every process of the step's
container, not only to the task it started (seen on the local cluster, Slurm 22.05: a ``bash -c
'python ...'`` task died of USR1 while its Python child caught it). So the warning may go to a
step only when no process of it would die of it. Whether a process catches or ignores a signal
is a fact the kernel keeps, whatever installed the handler (Python's ``signal.signal``, C's
``sigaction``): ``SigCgt`` and ``SigIgn`` in ``/proc/<pid>/status``, hex masks in which bit
``n-1`` stands for signal ``n`` (proc(5)).

Pure: the masks and ``scontrol listpids`` output are parsed from text, and the per-node reports
are typed records encoded and decoded here; :mod:`hpcflow.supervisor.sigprobe` reads them on each
node.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["CatchVerdict", "ListedPid", "NodeReport", "catches", "forward_verdict", "masks",
           "parse_listpids"]

#: Most processes a node report names as not catching the signal (the job log shows them).
MAX_NAMED = 8


def masks(status_text: str) -> tuple[int, int] | None:
    """``(SigCgt, SigIgn)`` of a ``/proc/<pid>/status`` text as integers, or None when either
    line is missing or is not a hex mask (proc(5): ``SigCgt: 0000000000004a02``)."""
    found: dict[str, int] = {}
    for line in status_text.splitlines():
        key, _, value = line.partition(":")
        if key in ("SigCgt", "SigIgn"):
            try:
                found[key] = int(value.strip(), 16)
            except ValueError:
                return None
    if len(found) != 2:
        return None
    return found["SigCgt"], found["SigIgn"]


def catches(status_text: str, signum: int) -> bool | None:
    """Whether the process survives signal ``signum`` (1-64): it catches it (a handler) or
    ignores it. None when the masks cannot be read."""
    if not 1 <= signum <= 64:
        raise ValueError(f"signal number {signum} is outside 1-64")
    pair = masks(status_text)
    if pair is None:
        return None
    bit = 1 << (signum - 1)
    return bool((pair[0] | pair[1]) & bit)


def handles(status_text: str, signum: int) -> bool:
    """Whether the process has a handler for ``signum`` (``SigCgt``), not merely ignores it."""
    pair = masks(status_text)
    return pair is not None and bool(pair[0] & (1 << (signum - 1)))


@dataclass(frozen=True)
class ListedPid:
    """One line of ``scontrol listpids``: the pid, its step (``0``, ``batch``, ``extern``), and
    the task's local and global ids (None for a process the task started, ``-`` in the
    output)."""

    pid: int
    step: str
    local_id: int | None
    global_id: int | None


def parse_listpids(text: str) -> list[ListedPid]:
    """``scontrol listpids <job> <node>`` output (``PID JOBID STEPID LOCALID GLOBALID``,
    scontrol(1)); lines that do not parse are skipped."""
    out: list[ListedPid] = []
    for line in text.splitlines():
        cols = line.split()
        if len(cols) != 5 or not cols[0].isdigit():
            continue
        ids = [int(c) if c.isdigit() else None for c in cols[3:5]]
        out.append(ListedPid(int(cols[0]), cols[2], ids[0], ids[1]))
    return out


@dataclass(frozen=True)
class NodeReport:
    """What the probe found on one node (one JSON line on its stdout).

    Attributes:
        node: the node's name (``SLURMD_NODENAME``).
        ranks: the global task ids of the step's tasks on the node.
        processes: processes of the step on the node (tasks and their children).
        handling: of those, processes with a handler for the signal.
        not_catching: ``(pid, command name)`` of processes that would die of it (at most
            :data:`MAX_NAMED`).
        not_catching_count: how many would die of it.
        error: why the node could not be read (``""`` when it was).
    """

    node: str
    ranks: tuple[int, ...] = ()
    processes: int = 0
    handling: int = 0
    not_catching: tuple[tuple[int, str], ...] = ()
    not_catching_count: int = 0
    error: str = ""

    def encode(self) -> str:
        """The report as one JSON line."""
        return json.dumps({"node": self.node, "ranks": list(self.ranks),
                           "processes": self.processes, "handling": self.handling,
                           "not_catching": [list(p) for p in self.not_catching],
                           "not_catching_count": self.not_catching_count, "error": self.error})

    @classmethod
    def decode(cls, line: str) -> NodeReport | None:
        """A report from one line, or None for a line that is not one (any other output)."""
        try:
            raw = json.loads(line)
        except ValueError:
            return None
        if not isinstance(raw, dict) or not isinstance(raw.get("node"), str):
            return None
        try:
            ranks = tuple(int(r) for r in raw.get("ranks", ()) if type(r) is int)
            named = tuple((int(p[0]), str(p[1])) for p in raw.get("not_catching", ())
                          if isinstance(p, list) and len(p) == 2 and type(p[0]) is int)
            counts = [raw.get(k, 0) for k in ("processes", "handling", "not_catching_count")]
            if any(type(c) is not int or c < 0 for c in counts):
                return None
            return cls(raw["node"], ranks, counts[0], counts[1], named[:MAX_NAMED], counts[2],
                       str(raw.get("error", ""))[:200])
        except (TypeError, ValueError):
            return None


@dataclass(frozen=True)
class CatchVerdict:
    """Whether the warning goes to the step (:func:`forward_verdict`).

    Attributes:
        forward: every task of the step has started and no process of it would die of the
            signal, and at least one has a handler for it.
        why: the job log's words for the choice.
        ranks_found: tasks found on all nodes.
        not_catching: ``(node, pid, command)`` of processes that would die of it.
    """

    forward: bool
    why: str
    ranks_found: int = 0
    not_catching: tuple[tuple[str, int, str], ...] = ()


def forward_verdict(reports: Sequence[NodeReport], *, tasks: int, signal: str) -> CatchVerdict:
    """The forward rule for a program that has not joined hpcflow's protocol.

    Args:
        reports: one per node the probe reached.
        tasks: the step's srun tasks (ranks with srun; one torchrun per node with torchrun).
        signal: the signal's name, for the words.

    Forward only when every task has started (a rank whose handler is not installed yet would
    die of it: the warning is held and asked again), every process of the step on every node
    catches or ignores the signal (srun delivers it to all of them: a launcher or a shell
    wrapper that does not catch it would die), and some process has a handler for it (a
    program that only ignores it gains nothing).
    """
    errors = [f"{r.node}: {r.error}" for r in reports if r.error]
    if errors:
        return CatchVerdict(False, f"the step's processes could not be read ({'; '.join(errors)})")
    found = len({rank for r in reports for rank in r.ranks})
    named = tuple((r.node, pid, comm) for r in reports for pid, comm in r.not_catching)
    dying = sum(r.not_catching_count for r in reports)
    if found < tasks:
        return CatchVerdict(False, f"{found} of {tasks} task(s) of the step have started",
                            found, named)
    if dying:
        shown = ", ".join(f"{comm} (pid {pid} on {node})" for node, pid, comm in named)
        return CatchVerdict(False, f"{dying} process(es) of the step would die of {signal}: "
                            f"{shown}", found, named)
    if not any(r.handling for r in reports):
        return CatchVerdict(False, f"no process of the step has a handler for {signal}", found)
    return CatchVerdict(True, f"every process of the step catches {signal} itself", found)
