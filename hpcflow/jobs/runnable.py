"""Can the ranks run ``program.argv[0]``? The check ``submit`` and ``--dry-run`` make, where the
submitter can see the file, before the job waits in the queue to fail on every rank.

The program is found as slurmstepd finds it (Slurm 22.05 ``src/slurmd/slurmstepd/task.c``,
``_build_path``): a name starting with ``/`` is used as it is; one starting with ``.`` is taken
in the step's folder (``srun --chdir``: ``program.workdir``, else the run directory, where
sbatch starts the batch script); any other name is tried under each folder of ``PATH`` in turn,
the first that exists and is not a folder winning whatever its permissions, and, found nowhere,
is taken in the step's folder. ``execve`` then fails with ``EACCES`` on a file without execute
permission or a folder (execve(2)), and with ``ENOENT`` on a missing one.

:func:`judge_program` decides from the facts (pure); :func:`program_verdict` gathers them for a
spec. A name found nowhere on this host is only a warning: the compute nodes may have another
``PATH``. A program in a container image (``container:``) is not looked at.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from hpcflow.spec.job import JobSpec
from hpcflow.spec.job_fields import MODULE_RE

#: What the submitter sees at a path: nothing, a folder, a file it may execute, a file (or FIFO,
#: device, socket) it may not, or nothing it can tell (``stat`` refused: a folder it cannot
#: search).
FileKind = Literal["missing", "folder", "runnable", "not_runnable", "unseen"]

FIELD = "program.argv[0]"


@dataclass(frozen=True)
class Verdict:
    """The check's answer.

    Attributes:
        level: ``ok``, ``warning`` (submit goes on and says it) or ``error`` (submit refuses).
        message: what was found and the fix; empty when ``ok``.
    """

    level: Literal["ok", "warning", "error"]
    message: str = ""


OK = Verdict("ok")


def file_kind(path: Path) -> FileKind:
    """What ``path`` is for the current user: ``stat`` (symlinks followed, as execve follows
    them) and ``access(X_OK)`` (access(2): root passes it only when some execute bit is set).
    Costs two system calls."""
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return "missing"
    except (OSError, ValueError):
        return "unseen"
    if stat.S_ISDIR(info.st_mode):
        return "folder"
    if stat.S_ISREG(info.st_mode) and os.access(path, os.X_OK):
        return "runnable"
    return "not_runnable"


def resolve_program(name: str, *, cwd: Path, path_env: str,
                    kind: Callable[[Path], FileKind]) -> Path:
    """The file slurmstepd would execute for ``name`` (module docstring), as seen from here.

    Args:
        name: ``program.argv[0]``.
        cwd: the step's folder (``program.workdir``, else the run directory).
        path_env: the job's ``PATH``; a relative folder in it is taken in ``cwd``.
        kind: :func:`file_kind`, or a table of facts in tests.
    """
    if name.startswith("/"):
        return Path(name)
    if not name.startswith("."):
        for folder in (d for d in path_env.split(":") if d):  # strtok skips empty fields
            candidate = cwd / folder / name
            if kind(candidate) in ("runnable", "not_runnable"):
                return candidate
    return cwd / name


def _fixes(name: str) -> str:
    """The ways out, in the user's own words: the interpreter in front, or module:."""
    module = name.removeprefix("./").removesuffix(".py") if name.endswith(".py") else ""
    via_module = (f"program.module: {module} (the rest of argv in program.args)"
                  if MODULE_RE.fullmatch(module) else "program.module: for a Python module")
    interpreter = ("python" if name.endswith(".py") else
                   "INTERPRETER (python for a Python script, bash for a shell script)")
    return f"run it through its interpreter, argv: [{interpreter}, {name}, ...], or use {via_module}"


def judge_program(name: str, *, cwd: Path, cwd_field: str, path_env: str,
                  kind: Callable[[Path], FileKind]) -> Verdict:
    """Whether the ranks can execute ``name`` (``program.argv[0]``), from what this host sees.

    Args:
        name: ``program.argv[0]``.
        cwd: the step's folder; ``cwd_field`` names it in messages (``program.workdir`` or
            ``run_dir``).
        path_env: the job's ``PATH``.
        kind: :func:`file_kind`, or a table of facts in tests.

    Returns:
        ``error`` for a file without execute permission or a folder, and for a missing file
        given as a path (a name with ``/`` or starting with ``.``); ``warning`` for a bare name
        found neither on ``PATH`` nor in ``cwd``; else ``ok`` (also when the file cannot be
        looked at).
    """
    path = resolve_program(name, cwd=cwd, path_env=path_env, kind=kind)
    found = kind(path)
    where = f" (found as {str(path)!r})" if found != "missing" and str(path) != name else ""
    head = f"{FIELD}: {name!r}{where}"
    if found == "not_runnable":
        return Verdict("error", f"{head} is not executable: srun would fail on every rank with "
                       f"'Permission denied'; {_fixes(name)}, or make it executable "
                       f"(chmod +x {str(path)!r})")
    if found == "folder":
        return Verdict("error", f"{head} is a folder, not a program; argv[0] must be the file "
                       f"to run, e.g. argv: [python, {name}/SCRIPT.py, ...], or use "
                       "program.module: for a Python module")
    if found != "missing":
        return OK
    if name.startswith("/"):
        return Verdict("error", f"{head}: no such file on this host; give the program's path, "
                       "or, if it exists only on the compute nodes, start it through env: "
                       f"argv: [env, {name}, ...]")
    if "/" in name or name.startswith("."):
        return Verdict("error", f"{head}: no such file; a relative path is taken in "
                       f"{cwd_field} ({str(cwd)!r}), where the ranks start")
    return Verdict("warning", f"{head}: not found on PATH here, nor in {cwd_field} "
                   f"({str(cwd)!r}); the ranks fail unless the compute nodes' PATH has it")


def program_verdict(spec: JobSpec, *, environ: dict[str, str] | None = None,
                    kind: Callable[[Path], FileKind] = file_kind) -> Verdict:
    """:func:`judge_program` for a spec's ``program.argv``: ``ok`` for ``program.module`` and
    for a program in a container image. The job's ``PATH`` is the spec's ``env.PATH`` when it
    is text, else the submitter's (sbatch exports it by default, sbatch(1) ``--export``).

    Args:
        spec: the validated job spec.
        environ: the submitter's environment (default ``os.environ``).
        kind: :func:`file_kind`, or a table of facts in tests.
    """
    argv = spec.program.argv
    if not argv or spec.container is not None:
        return OK
    environ = os.environ if environ is None else environ
    path_env = spec.env.get("PATH")
    if not isinstance(path_env, str):
        path_env = environ.get("PATH", os.defpath)
    workdir = spec.program.workdir
    cwd, cwd_field = (workdir, "program.workdir") if workdir else (Path(spec.run_dir), "run_dir")
    return judge_program(argv[0], cwd=cwd, cwd_field=cwd_field, path_env=path_env, kind=kind)
