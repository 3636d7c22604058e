"""Every rank's Python stacks when a step hangs: py-spy where it is installed, else the rank's
own ``faulthandler`` (docs/protocol.md, "Hangs and in-job restarts").

A rank on this host is reached directly; a rank on another node through a step of its own that
shares the allocation (``srun --overlap --jobid=<job> --nodelist=<host> -N1 -n1 ...``; srun(1),
``--overlap``). py-spy reads the process without stopping it (``--nonblocking``), so it also
shows a rank that is itself stopped (SIGSTOP). The fallback sends
:data:`hpcflow.protocol.STACKS_SIGNAL` to the rank, on which the runtime's ``faulthandler`` writes
its stacks to ``<rank>.stacks`` beside its heartbeat; a stopped process cannot run it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hpcflow.protocol import STACKS_SIGNAL

#: Seconds one py-spy (or one overlapping srun) may take.
DUMP_TIMEOUT_S = 30.0
#: Seconds the fallback waits for the ranks' faulthandler output.
FAULTHANDLER_WAIT_S = 2.0


def py_spy() -> str | None:
    """The py-spy program: on PATH, else beside the running interpreter (a virtual env's bin),
    else ``None``."""
    found = shutil.which("py-spy")
    if found:
        return found
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else None


def _on_host(host: str, job_id: str, words: Sequence[str]) -> list[str]:
    if not host or host in (socket.gethostname(), socket.getfqdn()):
        return list(words)
    return ["srun", "--overlap", f"--jobid={job_id}", f"--nodelist={host}", "-N1", "-n1",
            "--quiet", *words]


def _run(argv: list[str]) -> tuple[int, str]:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=DUMP_TIMEOUT_S,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 1, f"{argv[0]}: {exc}"
    return done.returncode, done.stdout + done.stderr


def _proc_state(pid: int) -> str:
    """The state letter of a local process (proc(5), /proc/<pid>/stat field 3), or ''."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return text.rsplit(")", 1)[-1].split()[0]


def stopped_ranks(beats: Mapping[int, Mapping[str, Any]], job_id: str) -> list[int]:
    """Ranks on this host whose process is stopped (state ``T``, e.g. by SIGSTOP), ascending.
    Ranks on other nodes are not looked at."""
    return sorted(r for r, b in beats.items()
                  if not _on_host(str(b.get("host", "")), job_id, [])
                  and _proc_state(int(b.get("pid", 0))) in ("T", "t"))


def collect(beats: Mapping[int, Mapping[str, Any]], heartbeat_dir: Path, job_id: str,
            now: float) -> str:
    """One text with every rank's stacks, each under a header naming the rank, host, pid,
    section, step, the age of its heartbeat and how the stacks were taken.

    Cost: one py-spy (or srun) per rank, each at most :data:`DUMP_TIMEOUT_S`; the fallback
    waits :data:`FAULTHANDLER_WAIT_S` once.
    """
    spy = py_spy()
    parts: dict[int, str] = {}
    signalled: list[int] = []
    for rank, beat in sorted(beats.items()):
        pid, host = int(beat.get("pid", 0)), str(beat.get("host", ""))
        state = _proc_state(pid) if _on_host(host, job_id, []) == [] else ""
        head = (f"==== rank {rank} host {host} pid {pid} section {beat.get('section')} step "
                f"{beat.get('step')}: last heartbeat {now - float(beat.get('time', now)):.1f} s ago"
                + (f", process state {state}" if state else ""))
        if spy and pid:
            rc, out = _run(_on_host(host, job_id, [spy, "dump", "--nonblocking", "--pid", str(pid)]))
            if rc == 0:
                parts[rank] = f"{head} (py-spy)\n{out}"
                continue
            head += f"\npy-spy failed ({rc}): {out.strip()[-400:]}"
        parts[rank] = head
        if pid:
            _signal_rank(host, job_id, pid)
            signalled.append(rank)
    if signalled:
        time.sleep(FAULTHANDLER_WAIT_S)
        for rank in signalled:
            try:
                text = (heartbeat_dir / f"{rank}.stacks").read_text(errors="replace")
            except OSError:
                text = ""
            parts[rank] += " (faulthandler)\n" + (text or "(no stacks written: a stopped or "
                                                  "blocked process cannot run its handler)\n")
    return "\n".join(parts[r] for r in sorted(parts)) + "\n"


def _signal_rank(host: str, job_id: str, pid: int) -> None:
    words = _on_host(host, job_id, [])
    if not words:
        try:
            os.kill(pid, int(getattr(signal, "SIG" + STACKS_SIGNAL)))
        except OSError:
            pass
        return
    _run(_on_host(host, job_id, ["kill", f"-{STACKS_SIGNAL}", str(pid)]))
