"""Running an external command: the one runner hpcflow passes to what calls Slurm, munge or apt.

A *runner* is called as ``runner(argv, *, input=None, timeout_s=60.0, env=None)`` and returns a
``subprocess.CompletedProcess`` with text stdout and stderr (:func:`run_command` is the real one;
tests may pass one that replays output captured from a real cluster). Failures are reported
with :func:`evidence`: the exit status, the command and the tail of its stderr.

Standard library only.
"""

from __future__ import annotations

import re
import selectors
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence

__all__ = ["TAIL_LINES", "Runner", "evidence", "run_command", "run_until_line"]

Runner = Callable[..., "subprocess.CompletedProcess[str]"]

#: Lines of stderr (or stdout, when stderr is empty) an error message keeps.
TAIL_LINES = 10


def run_command(
    argv: Sequence[str],
    *,
    input: str | None = None,
    timeout_s: float = 60.0,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a command without a shell and capture its text output. Never raises on exit status.

    Args:
        argv: the command and its arguments.
        input: text fed to its stdin.
        timeout_s: seconds before it is killed.
        env: its whole environment; ``None`` inherits this process's.

    Raises:
        FileNotFoundError: the program is not installed.
        subprocess.TimeoutExpired: it ran longer than ``timeout_s``.
    """
    return subprocess.run(
        list(argv), input=input, capture_output=True, text=True, timeout=timeout_s,
        env=None if env is None else dict(env), check=False,
    )


def run_until_line(
    argv: Sequence[str],
    stop_re: re.Pattern[str],
    *,
    timeout_s: float = 60.0,
) -> subprocess.CompletedProcess[str]:
    """Run a command like :func:`run_command`, but kill it as soon as a line of its stderr
    matches ``stop_re`` (how a caller keeps a command from a retry it must not make).

    Args:
        argv: the command and its arguments (no stdin: it reads ``/dev/null``).
        stop_re: a line of stderr that ends the command.
        timeout_s: seconds before it is killed.

    Returns:
        Its exit status, stdout and stderr; when stopped by a line, the status is ``-9``
        (SIGKILL) and stderr ends with that line.

    Raises:
        FileNotFoundError: the program is not installed.
        subprocess.TimeoutExpired: it ran longer than ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    out: list[bytes] = []
    err = bytearray()
    stopped = False
    with proc, selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ, out)
        sel.register(proc.stderr, selectors.EVENT_READ, None)
        while sel.get_map() and not stopped:
            left = deadline - time.monotonic()
            if left <= 0:
                proc.kill()
                raise subprocess.TimeoutExpired(list(argv), timeout_s)
            for key, _ in sel.select(left):
                chunk = key.fileobj.read1(65536)  # type: ignore[union-attr]
                if not chunk:
                    sel.unregister(key.fileobj)
                elif key.data is out:
                    out.append(chunk)
                else:
                    seen = len(err)
                    err += chunk
                    start = err.rfind(b"\n", 0, seen) + 1
                    lines = err[start:].decode(errors="replace").splitlines()
                    stopped = any(stop_re.search(line) for line in lines)
        if stopped:
            proc.kill()
        rc = proc.wait(max(0.1, deadline - time.monotonic()))
    return subprocess.CompletedProcess(list(argv), rc, b"".join(out).decode(errors="replace"),
                                       err.decode(errors="replace"))


def evidence(argv: Sequence[str], result: subprocess.CompletedProcess[str]) -> str:
    """``"(exit N): <command>"`` and, on the next lines, the last :data:`TAIL_LINES` lines of its
    stderr (or of its stdout when stderr is empty): what an error message about it carries."""
    tail = "\n".join((result.stderr or result.stdout or "").strip().splitlines()[-TAIL_LINES:])
    return f"(exit {result.returncode}): {' '.join(argv)}" + (f"\n{tail}" if tail else "")
