"""Running an external command: the one runner hpcflow passes to what calls Slurm, munge or apt.

A *runner* is called as ``runner(argv, *, input=None, timeout_s=60.0, env=None)`` and returns a
``subprocess.CompletedProcess`` with text stdout and stderr (:func:`run_command` is the real one;
tests may pass one that replays output captured from a real cluster). Failures are reported
with :func:`evidence`: the exit status, the command and the tail of its stderr.

Standard library only.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping, Sequence

__all__ = ["TAIL_LINES", "Runner", "evidence", "run_command"]

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


def evidence(argv: Sequence[str], result: subprocess.CompletedProcess[str]) -> str:
    """``"(exit N): <command>"`` and, on the next lines, the last :data:`TAIL_LINES` lines of its
    stderr (or of its stdout when stderr is empty): what an error message about it carries."""
    tail = "\n".join((result.stderr or result.stdout or "").strip().splitlines()[-TAIL_LINES:])
    return f"(exit {result.returncode}): {' '.join(argv)}" + (f"\n{tail}" if tail else "")
