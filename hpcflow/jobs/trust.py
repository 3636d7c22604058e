"""Whose folders a job may use: a run directory or checkpoint folder someone else can write is
refused before anything is written (docs/job-spec.md, "Who can write the run directory").

Whoever can write the run directory or the checkpoint folder can plant ``checkpoints/step_N/``
(loading a DCP checkpoint unpickles its ``.metadata``: code run as the job's user on every rank)
or swap the ledger or ``.hpcflow`` for symlinks. So each folder of the path that exists must be
owned by the user (the folder itself) or by the user or root (a parent), and none may be
writable by group (other than the user's private group) or others unless its sticky bit is set
(``/tmp``: then only an entry's owner may rename or remove it; chmod(2), "S_ISVTX").
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from hpcflow.errors import SubmitError
from hpcflow.jobs.records import DIR_MODE, SCRIPT_FILE, SPEC_FILE, SUBMISSIONS_FILE
from hpcflow.protocol import LEDGER_FILE, STATE_DIR, state_dir

#: What the override flag's help and the errors say about the risk.
SHARED_DIR_RISK = ("whoever can write there can plant a checkpoint, which runs code as you when "
                   "it is loaded, and swap the ledger for a symlink")


def private_group(gid: int, uid: int) -> bool:
    """True when ``gid`` is the user's own private group: the user's primary group, named after
    the user, with no other member (the user-private-group scheme of ``useradd``,
    ``USERGROUPS_ENAB`` in login.defs(5), under which the usual umask is 002). A folder only that
    group can write is the user's alone."""
    import grp
    import pwd

    try:
        user = pwd.getpwuid(uid)
        group = grp.getgrgid(gid)
    except KeyError:
        return False
    return (gid == user.pw_gid and group.gr_name == user.pw_name
            and all(member == user.pw_name for member in group.gr_mem))


def folder_problem(path: Path, *, own: bool, uid: int) -> str | None:
    """Why the existing folder ``path`` is unsafe for a job of user ``uid``, or None.

    Args:
        path: an existing folder (not followed if a symlink: the link itself is judged).
        own: the folder must be the user's (the run directory or checkpoint folder itself);
            else the user or root may own it (a parent).
        uid: the user's uid (``os.getuid()``).

    Raises:
        OSError: ``lstat`` failed.
    """
    info = os.lstat(path)
    owners = {uid} if own else {uid, 0}
    if stat.S_ISLNK(info.st_mode):
        if info.st_uid not in owners:
            return f"it is a symlink owned by uid {info.st_uid}, not by you (uid {uid})"
        info = os.stat(path)  # a symlinked run_dir is the folder it names; judge that one too
    return stat_problem(info, own=own, uid=uid)


def stat_problem(info: os.stat_result, *, own: bool, uid: int) -> str | None:
    """:func:`folder_problem` of a folder already looked at (``fstat`` of an open folder)."""
    owners = {uid} if own else {uid, 0}
    if info.st_uid not in owners:
        return f"it is owned by uid {info.st_uid}, not by you (uid {uid})"
    writers = info.st_mode & stat.S_IWOTH
    if info.st_mode & stat.S_IWGRP and not private_group(info.st_gid, uid):
        writers |= stat.S_IWGRP
    if writers and not info.st_mode & stat.S_ISVTX:
        who = "group and others" if writers == stat.S_IWGRP | stat.S_IWOTH \
            else "its group" if writers & stat.S_IWGRP else "others"
        return f"it is writable by {who} (mode {stat.S_IMODE(info.st_mode):04o}) without the sticky bit"
    return None


def check_trusted_dir(field: str, target: Path, *, uid: int | None = None,
                      override: str | None = "--allow-shared-dir") -> None:
    """Refuse ``target`` (``run_dir`` or ``checkpoint.dir``) when it, or a parent of it that
    exists, is not safe (:func:`folder_problem`).

    Args:
        field: the spec field, for the message.
        target: the absolute folder.
        uid: the user's uid; default ``os.getuid()``.
        override: the flag that accepts such a folder, named in the message (None: there is
            none, as for ``hpcflow.launch.Executor``'s folder).

    Raises:
        SubmitError: naming the field, the folder and why; the fix is another folder or
            ``override``.
    """
    uid = os.getuid() if uid is None else uid
    path = target
    while not os.path.lexists(path) and path.parent != path:
        path = path.parent
    own = path == target
    while True:
        try:
            problem = folder_problem(path, own=own, uid=uid) if path.is_dir() else None
        except OSError:
            problem = None  # what cannot be looked at is refused by check_run_dir's own checks
        if problem:
            where = "" if path == target else f" (its parent {str(path)!r})"
            allow = f", or pass {override} if you trust everyone who can write there" \
                if override else ""
            raise SubmitError(f"{field}: {str(target)!r}{where}: {problem}; {SHARED_DIR_RISK}. "
                              f"Use a folder only you can write{allow}")
        if path.parent == path:
            return
        path, own = path.parent, False


def check_state_files(run_dir: Path, *, uid: int | None = None) -> None:
    """Refuse a run directory whose ``.hpcflow/``, ledger, ``submissions.jsonl``, ``job.yaml`` or
    ``job.sbatch`` is a symlink, not the user's, or not a folder / regular file (or a state folder
    that others can write): the batch script appends to the ledger and ``submit`` to the
    submissions, and would write wherever a planted link points.

    Raises:
        SubmitError: naming the path and why.
    """
    uid = os.getuid() if uid is None else uid
    state = state_dir(run_dir)
    for path, want_dir in ((state, True), (state / LEDGER_FILE, False),
                           (run_dir / SUBMISSIONS_FILE, False), (run_dir / SPEC_FILE, False),
                           (run_dir / SCRIPT_FILE, False)):
        try:
            info = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            raise SubmitError(f"run_dir: cannot look at {str(path)!r} ({exc.strerror or exc})"
                              ) from None
        kind_ok = stat.S_ISDIR(info.st_mode) if want_dir else stat.S_ISREG(info.st_mode)
        # A state folder anyone could write may hold planted files; one only the group can write
        # (umask 002, before submit made it 0700) is made 0700 by submit. Files are reached only
        # through the run directory and the state folder, so their own mode does not matter.
        shared = want_dir and info.st_mode & stat.S_IWOTH
        if stat.S_ISLNK(info.st_mode) or not kind_ok or info.st_uid != uid or shared:
            what = ("a symlink" if stat.S_ISLNK(info.st_mode) else
                    ("not a folder" if want_dir else "not a regular file") if not kind_ok else
                    f"owned by uid {info.st_uid}" if info.st_uid != uid else
                    f"writable by others (mode {stat.S_IMODE(info.st_mode):04o})")
            raise SubmitError(f"run_dir: {str(path)!r} is {what}; hpcflow writes its state there "
                              "and refuses one it does not own outright. Remove it, or choose "
                              "another run_dir")


def make_private_dirs(field: str, target: Path, *, allow_shared_dir: bool = False,
                      state: bool = True, uid: int | None = None,
                      risk: str = SHARED_DIR_RISK) -> list[Path]:
    """Create ``target`` (and, with ``state``, its ``.hpcflow/``) one level at a time, each
    new folder mode :data:`~hpcflow.jobs.records.DIR_MODE` (0700) whatever the umask, judging
    every level as it is reached, so that nothing checked earlier can be swapped in between.

    From ``/`` down, each level is opened relative to the one above (``openat``, ``O_PATH``: a
    folder one may only pass through will do): a missing one is made with ``mkdirat(0700)``;
    each is opened with ``O_NOFOLLOW`` and judged by ``fstat``, the folder itself and not its
    name. A folder it made must be the user's (someone who made it first is caught here); an
    existing one must pass :func:`stat_problem` (skipped with ``allow_shared_dir``); a symlink
    on the way (``/home`` -> ``/export/home``) is followed only when the user or root owns it.
    The folders it made and ``target`` are then ``fchmod``-ed to 0700 (an existing ``target``
    keeps its mode with ``allow_shared_dir``), and so is ``.hpcflow/``, which must be the
    user's, never a symlink nor writable by others, whatever ``allow_shared_dir`` says.

    Args:
        field: the spec field (or argument) for the message.
        target: the absolute folder.
        allow_shared_dir: existing levels above ``.hpcflow/`` are not judged
            (``--allow-shared-dir``).
        state: also make ``target/.hpcflow``.
        uid: the user's uid; default ``os.getuid()``.
        risk: what the message says whoever can write there could do.

    Returns:
        The folders it created, deepest first (what an undo removes).

    Raises:
        SubmitError: a level is not a folder, cannot be made or opened, or is not safe
            (naming the field, the folder and why).
    """
    uid = os.getuid() if uid is None else uid
    created: list[Path] = []
    names = [*target.parts[1:], *([STATE_DIR] if state else [])]
    fd = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    path = Path("/")
    try:
        for depth, name in enumerate(names):
            path = path / name
            level = _Level(last=depth == len(target.parts) - 2,
                           inner=depth == len(target.parts) - 1)
            try:
                child = _open_level(fd, name, level, uid=uid, allow_shared_dir=allow_shared_dir)
            except _Unsafe as exc:
                raise _refused(field, target, path, str(exc), risk) from None
            except OSError as exc:
                raise _refused(field, target, path, _os_problem(exc), risk) from None
            if level.made:
                created.insert(0, path)
            parent, fd = fd, child
            try:
                problem = _level_problem(os.fstat(fd), level, uid=uid,
                                         allow_shared_dir=allow_shared_dir)
                if problem:
                    raise _refused(field, target, path, problem, risk)
                if level.made or level.inner or (level.last and not allow_shared_dir):
                    _chmod_private(parent, name, os.fstat(fd), level.follow)
            except OSError as exc:
                raise _refused(field, target, path, _os_problem(exc), risk) from None
            finally:
                os.close(parent)
    except BaseException:
        for folder in created:  # deepest first; one someone else filled is kept
            try:
                folder.rmdir()
            except OSError:
                pass
        raise
    finally:
        os.close(fd)
    return created


class _Unsafe(Exception):
    """A level refused before it is opened."""


class _Level:
    """One level of :func:`make_private_dirs`' walk: where it is, and what was found."""

    def __init__(self, *, last: bool, inner: bool) -> None:
        self.last, self.inner = last, inner
        self.made = self.follow = False


_PATH_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC


def _open_level(fd: int, name: str, level: _Level, *, uid: int, allow_shared_dir: bool) -> int:
    """Make ``name`` under ``fd`` if it is missing (``level.made``), and open it."""
    try:
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        try:
            os.mkdir(name, DIR_MODE, dir_fd=fd)
            level.made = True
        except FileExistsError:
            pass  # made by someone else just now: judged below as an existing folder
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
    level.follow = stat.S_ISLNK(info.st_mode) and not level.inner and not level.made
    if level.follow and info.st_uid not in {uid, 0} and not allow_shared_dir:
        raise _Unsafe(f"it is a symlink owned by uid {info.st_uid}, not by you (uid {uid})")
    if stat.S_ISLNK(info.st_mode) and not level.follow:
        raise _Unsafe("it is a symlink (not followed)")
    return os.open(name, _PATH_FLAGS if level.follow else _PATH_FLAGS | os.O_NOFOLLOW,
                   dir_fd=fd)


def _level_problem(info: os.stat_result, level: _Level, *, uid: int,
                   allow_shared_dir: bool) -> str | None:
    """Why an opened level is refused, or None."""
    if not stat.S_ISDIR(info.st_mode):
        return "it is not a folder"
    if level.made or level.inner:
        # Made here: it must be the one made. .hpcflow/: the user's, not writable by others
        # (one its group can write, left by umask 002, is made 0700 next).
        if info.st_uid != uid:
            return f"it is owned by uid {info.st_uid}, not by you (uid {uid})"
        if level.inner and info.st_mode & stat.S_IWOTH:
            return f"it is writable by others (mode {stat.S_IMODE(info.st_mode):04o})"
        return None
    if allow_shared_dir:
        return None
    return stat_problem(info, own=level.last, uid=uid)


def _chmod_private(parent: int, name: str, seen: os.stat_result, follow: bool) -> None:
    """``fchmod(0700)`` the folder ``name`` under ``parent`` that was judged (``seen``): it is
    opened again for reading (``fchmod`` needs more than ``O_PATH``), and changed only when it
    is the same folder."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    fd = os.open(name, flags, dir_fd=parent)
    try:
        info = os.fstat(fd)
        if (info.st_dev, info.st_ino) != (seen.st_dev, seen.st_ino):
            raise OSError(errno.ESTALE, "it was replaced while hpcflow made it private")
        os.fchmod(fd, DIR_MODE)
    finally:
        os.close(fd)


def _os_problem(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "it is a symlink (not followed)"
    if exc.errno == errno.ENOTDIR:
        return "it is not a folder"
    return f"cannot create or open it ({exc.strerror or exc})"


def _refused(field: str, target: Path, path: Path, problem: str, risk: str) -> SubmitError:
    where = "" if path == target else f" ({str(path)!r})"
    return SubmitError(f"{field}: {str(target)!r}{where}: {problem}; {risk}. Use a folder only "
                       "you can write")


def check_attempt_dirs(run_dir: Path, checkpoint_dir: Path, *, allow_shared_dir: bool,
                       uid: int | None = None) -> None:
    """``submit``'s checks again, at the start of every attempt (the supervisor): the run
    directory and checkpoint folder (:func:`check_trusted_dir`, unless ``allow_shared_dir``)
    and the state files (:func:`check_state_files`). A folder swapped after submit (a group
    member under umask 002, a parent made in between) is refused before any step runs there.

    Raises:
        SubmitError: naming the field, the folder and why.
    """
    if not allow_shared_dir:
        check_trusted_dir("run_dir", run_dir, uid=uid)
        check_trusted_dir("checkpoint.dir", checkpoint_dir, uid=uid)
    check_state_files(run_dir, uid=uid)
