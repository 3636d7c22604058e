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

import os
import stat
from pathlib import Path

from hpcflow.errors import SubmitError
from hpcflow.jobs.records import SCRIPT_FILE, SPEC_FILE, SUBMISSIONS_FILE
from hpcflow.protocol import LEDGER_FILE, state_dir

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


def check_trusted_dir(field: str, target: Path, *, uid: int | None = None) -> None:
    """Refuse ``target`` (``run_dir`` or ``checkpoint.dir``) when it, or a parent of it that
    exists, is not safe (:func:`folder_problem`).

    Args:
        field: the spec field, for the message.
        target: the absolute folder.
        uid: the user's uid; default ``os.getuid()``.

    Raises:
        SubmitError: naming the field, the folder and why; the fix is another folder or
            ``--allow-shared-dir``.
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
            raise SubmitError(
                f"{field}: {str(target)!r}{where}: {problem}; {SHARED_DIR_RISK}. Use a folder "
                "only you can write, or pass --allow-shared-dir if you trust everyone who can "
                "write there")
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
