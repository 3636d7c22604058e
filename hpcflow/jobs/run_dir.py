"""Whether a folder can be a job's run directory at all: never ``/``, a top-level system folder
or a shared sticky scratch folder itself (hpcflow makes a run directory mode 0700), and a folder
hpcflow can create or write, tried without leaving anything behind (DESIGN.md §9)."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from hpcflow.errors import SubmitError

#: Top-level folders of a Linux system (the Filesystem Hierarchy Standard's, and /home): a run
#: directory is a job's own folder below one of them, never one of them itself.
SYSTEM_FOLDERS = frozenset({
    "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32",
    "/media", "/mnt", "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp",
    "/usr", "/var",
})


def system_folder_problem(run_dir: Path) -> str | None:
    """Why ``run_dir`` cannot be a run directory because of what folder it is, or None: ``/``,
    a top-level system folder (:data:`SYSTEM_FOLDERS`), or a folder that is world-writable with
    the sticky bit (a shared scratch folder such as ``/tmp`` or ``/var/tmp``) itself. hpcflow makes
    its run directory mode 0700: that would lock every other user out of such a folder."""
    candidates = {os.path.abspath(run_dir), os.path.realpath(run_dir)}
    for path in sorted(candidates):
        if path in SYSTEM_FOLDERS:
            return (f"is {path!r}, a system folder; a run directory is the job's own folder "
                    f"(hpcflow makes it mode 0700), e.g. {os.path.join(path, 'runs', 'job')!r}")
        try:
            mode = os.stat(path).st_mode
        except OSError:
            continue
        if stat.S_ISDIR(mode) and mode & stat.S_ISVTX and mode & stat.S_IWOTH:
            return (f"is {path!r}, a folder every user may write (world-writable, sticky); a "
                    "run directory is the job's own folder (hpcflow makes it mode 0700, which "
                    "would lock the others out): use a folder below it, e.g. "
                    f"{os.path.join(path, 'runs', 'job')!r}")
    return None


def check_run_dir(run_dir: Path) -> None:
    """Refuse a run directory that cannot be a folder hpcflow writes, leaving nothing behind.

    The deepest existing folder of ``run_dir`` (itself, or the ancestor it would be created
    in) must be a folder in which a folder can be created: it is tried with a temporary folder
    that is removed at once (root passes permission checks, so only trying tells ``/proc/1``
    apart from a writable folder).

    Raises:
        SubmitError: run_dir is ``/``, a top-level system folder or a world-writable sticky
            folder itself (:func:`system_folder_problem`); run_dir or one of its parents is a
            file or device, a symlink loop, a path the system refuses (too long), or a folder
            that cannot be written.
    """
    shown = repr(str(run_dir))
    if problem := system_folder_problem(run_dir):
        raise SubmitError(f"run_dir: {shown}: {problem}")
    path = run_dir
    while True:
        try:
            info = os.stat(path)
            break
        except FileNotFoundError:
            if path.parent == path:
                raise SubmitError(f"run_dir: {shown}: no folder of it exists") from None
            path = path.parent
        except NotADirectoryError:
            raise SubmitError(f"run_dir: {shown}: a part of it is a file, not a folder; run_dir "
                              "must be a folder (it is created when missing)") from None
        except OSError as exc:
            raise SubmitError(f"run_dir: {shown}: cannot use it ({exc.strerror or exc})") from None
    if not stat.S_ISDIR(info.st_mode):
        what = "a file" if stat.S_ISREG(info.st_mode) else "not a folder"
        where = "" if path == run_dir else f" ({str(path)!r})"
        raise SubmitError(f"run_dir: {shown}{where} is {what}; run_dir must be a folder (it is "
                          "created when missing)")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".hpcflow-check-", dir=path))
    except OSError as exc:
        where = "in it" if path == run_dir else f"in {str(path)!r}"
        raise SubmitError(f"run_dir: {shown}: cannot create folders {where} "
                          f"({exc.strerror or exc}); run_dir must be a folder you can write"
                          ) from None
