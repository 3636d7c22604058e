"""A job's notice file and ledger, touched only as the job's owner, within a time bound.

The node's spot watcher runs as root (it must, for ``scancel`` on any user's job), but a run
directory belongs to the job's user, who may have replaced anything in it: the ledger by a
symlink into ``/etc``, a dangling symlink, a named pipe, a link to ``/dev/zero``. So the watcher
never opens a path there itself. Each file operation runs in a forked child that first drops
to the job's ``UserId``/``GroupId`` for good (``setgroups``, ``setresgid``, ``setresuid``: it
can then reach only what that user can, and cannot be traced by them), takes umask 077 and
``/`` as its folder, and sends back a one-line JSON answer on a pipe. In the child:

- the state folder is opened with ``O_DIRECTORY | O_NOFOLLOW`` and must belong to the job's
  user; the files in it are opened relative to that folder with ``O_NOFOLLOW | O_NONBLOCK``
  and must be regular files of the job's user; nothing is ever ``chown``-ed;
- the ledger is read from its last :data:`LEDGER_TAIL_BYTES` bytes only;
- the notice file is replaced with :func:`hpcflow.fsutil.write_atomic_at` (mode 0600).

The parent starts one child per job at once and waits for all of them up to one bound
(``bound_s``); a child still running then is killed, and its job is reported as timed out. It
reads at most :data:`RESULT_CAP_BYTES` of each child's answer. So one job's folder can neither
block nor bloat the watcher, nor delay another job's notice by more than the bound.
"""

from __future__ import annotations

import errno
import json
import os
import pwd
import selectors
import signal
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcflow import fsutil, protocol

#: Bytes of the ledger's end the duplicate check reads (a notice event is among the last ones).
LEDGER_TAIL_BYTES = 1 << 20
#: Bytes of a child's answer the parent reads at most (an answer is a short JSON object).
RESULT_CAP_BYTES = 64 * 1024
#: Operations a child runs.
PREPARE, RECORD = "prepare", "record"

@dataclass(frozen=True)
class Request:
    """One operation in one job's state folder.

    Attributes:
        op: :data:`PREPARE` (is this notice already in the ledger? if not, write the notice
            file) or :data:`RECORD` (append ``event`` to the ledger).
        run_dir: the job's run directory (from its batch script).
        uid: the job's owner (``UserId`` of ``scontrol show job``); the state folder and its
            files must belong to this uid.
        gid: the job's group (``GroupId``).
        job_id: the job (the notice file's name, and the ledger events' ``job_id``).
        notice_time: the notice's time, Unix seconds.
        event: with :data:`RECORD`, the ledger line to append, newline included, in the one
            JSON form of :func:`hpcflow.ledger.event_line`.
    """

    op: str
    run_dir: Path
    uid: int
    gid: int
    job_id: str
    notice_time: int
    event: str | None = None


@dataclass
class Outcome:
    """What a child did: ``ok``; with :data:`PREPARE`, ``already`` (the ledger holds this
    notice for this job, so no notice file was written); else ``error``, one line naming the
    file and why it was refused or failed (``timed_out`` when the bound ran out)."""

    ok: bool
    already: bool = False
    error: str = ""
    timed_out: bool = False


def _groups(uid: int, gid: int) -> list[int]:
    """The groups the child takes: the user's (initgroups(3)), or the bare gid for a uid with
    no passwd entry. Looked up in the parent (NSS may take locks a forked child cannot)."""
    try:
        return os.getgrouplist(pwd.getpwuid(uid).pw_name, gid)
    except (KeyError, OSError):
        return [gid]


def _payload(req: Request) -> dict[str, Any]:
    return {"op": req.op, "run_dir": str(req.run_dir), "uid": req.uid,
            "state_dir": protocol.STATE_DIR, "ledger": protocol.LEDGER_FILE,
            "notice": protocol.notice_name(req.job_id), "job_id": req.job_id,
            "notice_time": req.notice_time, "event_name": protocol.EVENT_SPOT_NOTICE,
            "event": req.event, "tail_bytes": LEDGER_TAIL_BYTES}


def _become(uid: int, gid: int, groups: list[int]) -> None:
    """In the child: drop every root privilege for good (setgroups(2), setresgid(2),
    setresuid(2), in that order: once the uid is not 0 the groups can no longer be changed),
    and check that it took. A process that changed its ids this way is not dumpable
    (prctl(2) PR_SET_DUMPABLE), so the user cannot ptrace it or read its memory."""
    os.setgroups(groups)
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid):
        raise OSError(errno.EPERM, f"could not become uid {uid} gid {gid}")


def _child(req: Request, groups: list[int] | None, out_fd: int) -> None:
    """The forked child: never returns. Only os calls, json and hpcflow.fsutil (no logging,
    no imports, no threads: a forked copy must not wait on a lock another thread held)."""
    try:
        # Keep only the answer pipe (and stdio): nothing of root's (sockets, logs) stays open.
        os.closerange(3, out_fd)
        os.closerange(out_fd + 1, os.sysconf("SC_OPEN_MAX"))
        if groups is not None:
            _become(req.uid, req.gid, groups)
        os.umask(0o077)
        os.chdir("/")
        answer = child_answer(_payload(req))
        os.write(out_fd, (json.dumps(answer) + "\n").encode()[:RESULT_CAP_BYTES])
    except BaseException:  # noqa: BLE001 - nothing may escape a forked child
        pass
    finally:
        os._exit(0)


#: Children killed at the bound that had not exited within a second (stuck in the kernel on a
#: hung file system): reaped at a later call.
_unreaped: list[int] = []


def _reap(pid: int, within_s: float) -> bool:
    end = time.monotonic() + within_s
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return True
        if done:
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.01)


def run_as_owners(requests: list[Request], *, bound_s: float) -> list[Outcome]:
    """Run every request in a forked child that becomes its job's owner (when we are root;
    otherwise the child stays us and the ownership checks still apply), all at once, for at
    most ``bound_s`` seconds in all (plus up to 1 s to reap the children killed then).

    Returns:
        One :class:`Outcome` per request, in order. Never raises for a child that could not
        start, timed out, or answered something unreadable: that is its outcome's ``error``.
    """
    _unreaped[:] = [pid for pid in _unreaped if not _reap(pid, 0)]
    root = os.geteuid() == 0
    children: list[tuple[int, int] | OSError] = []
    for req in requests:
        groups = _groups(req.uid, req.gid) if root else None
        try:
            r, w = os.pipe()
        except OSError as exc:
            children.append(exc)
            continue
        try:
            pid = os.fork()
        except OSError as exc:
            os.close(r)
            os.close(w)
            children.append(OSError(f"cannot start a process as uid {req.uid}: {exc}"))
            continue
        if pid == 0:
            os.close(r)
            _child(req, groups, w)
        os.close(w)
        children.append((pid, r))
    try:
        answers = _read_answers(children, time.monotonic() + bound_s)
    finally:
        for child in children:
            if not isinstance(child, OSError):
                os.close(child[1])
    outcomes = []
    for child, answer in zip(children, answers, strict=True):
        if isinstance(child, OSError):
            outcomes.append(Outcome(False, error=str(child)))
            continue
        if answer is None:
            try:
                os.kill(child[0], signal.SIGKILL)
            except ProcessLookupError:
                pass
        if not _reap(child[0], 1.0):
            _unreaped.append(child[0])
        if answer is None:
            outcomes.append(Outcome(False, timed_out=True,
                                    error=f"took longer than {bound_s:g} s: stopped"))
        else:
            outcomes.append(_parse_answer(answer))
    return outcomes


def _read_answers(children: list[tuple[int, int] | OSError],
                  deadline: float) -> list[bytes | None]:
    """Each child's pipe up to EOF (None: still open at ``deadline``), capped in bytes."""
    answers: list[bytes | None] = [None] * len(children)
    bufs: dict[int, bytearray] = {}
    with selectors.DefaultSelector() as sel:
        for i, child in enumerate(children):
            if not isinstance(child, OSError):
                sel.register(child[1], selectors.EVENT_READ, i)
                bufs[i] = bytearray()
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            for key, _ in sel.select(left):
                i = key.data
                chunk = os.read(key.fd, 65536)
                if chunk and len(bufs[i]) + len(chunk) <= RESULT_CAP_BYTES:
                    bufs[i] += chunk
                    continue
                sel.unregister(key.fileobj)
                answers[i] = bytes(bufs[i]) if not chunk else b"{}"  # too long: unreadable
    return answers


def _parse_answer(raw: bytes) -> Outcome:
    try:
        doc = json.loads(raw.decode("utf-8", errors="replace"))
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or not isinstance(doc.get("ok"), bool):
        return Outcome(False, error="the process acting as the job's user gave no readable answer")
    return Outcome(doc["ok"], already=doc.get("already") is True, error=str(doc.get("error", "")))


# ---- In the child, as the job's user.

class Refused(Exception):
    """A file in the job's state folder is not what hpcflow writes there."""


def _why(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "is a symbolic link (not followed)"
    if exc.errno == errno.ENXIO:
        return "is a named pipe (not opened)"
    return exc.strerror or str(exc)


def _open_state(req: dict[str, Any]) -> int:
    where = f"{req['run_dir']}/{req['state_dir']}"
    run_fd = os.open(req["run_dir"], os.O_RDONLY | os.O_DIRECTORY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        fd = os.open(req["state_dir"], os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                     | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=run_fd)
    except OSError as exc:
        why = _why(exc)
        try:  # O_DIRECTORY | O_NOFOLLOW on a link says ENOTDIR (open(2)); say what it is
            if stat.S_ISLNK(os.lstat(req["state_dir"], dir_fd=run_fd).st_mode):
                why = _why(OSError(errno.ELOOP, why))
        except OSError:
            pass
        raise Refused(f"{where}: {why}") from None
    finally:
        os.close(run_fd)
    owner = os.fstat(fd).st_uid
    if owner != req["uid"]:
        os.close(fd)
        raise Refused(f"{where}: owned by uid {owner}, not by the job's user (uid {req['uid']}): "
                      "left alone")
    return fd


def _open_regular(state_fd: int, name: str, flags: int, uid: int, where: str) -> int:
    try:
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC,
                     0o600, dir_fd=state_fd)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise Refused(f"{where}/{name}: {_why(exc)}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != uid:
        os.close(fd)
        what = "is not a regular file" if not stat.S_ISREG(st.st_mode) else \
            f"is owned by uid {st.st_uid}, not by the job's user (uid {uid})"
        raise Refused(f"{where}/{name}: {what}: left alone")
    return fd


def _tail(fd: int, size: int, cap: int) -> bytes:
    start = max(0, size - cap)
    out = bytearray()
    while len(out) < cap:
        chunk = os.pread(fd, cap - len(out), start + len(out))
        if not chunk:
            break
        out += chunk
    if start > 0:  # the first line is cut: drop it
        out = out[out.find(b"\n") + 1:] if b"\n" in out else bytearray()
    return bytes(out)


def _already(text: bytes, req: dict[str, Any]) -> bool:
    for line in text.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if (isinstance(event, dict) and event.get("event") == req["event_name"]
                and event.get("notice_time") == req["notice_time"]
                and str(event.get("job_id")) == req["job_id"]):
            return True
    return False


def _do(req: dict[str, Any]) -> dict[str, Any]:
    where = f"{req['run_dir']}/{req['state_dir']}"
    state_fd = _open_state(req)
    try:
        if req["op"] == PREPARE:
            try:
                fd = _open_regular(state_fd, req["ledger"], os.O_RDONLY, req["uid"], where)
            except FileNotFoundError:
                text = b""
            else:
                try:
                    text = _tail(fd, os.fstat(fd).st_size, int(req["tail_bytes"]))
                finally:
                    os.close(fd)
            if _already(text, req):
                return {"ok": True, "already": True}
            fsutil.write_atomic_at(state_fd, req["notice"], f"{req['notice_time']}\n")
            return {"ok": True, "already": False}
        if req["op"] == RECORD:
            fd = _open_regular(state_fd, req["ledger"], os.O_WRONLY | os.O_APPEND | os.O_CREAT,
                               req["uid"], where)
            try:  # one write of one short line: appenders do not interleave
                os.write(fd, str(req["event"]).encode())  # hpcflow.ledger.event_line's form
            finally:
                os.close(fd)
            return {"ok": True}
        raise ValueError(f"unknown operation {req['op']!r}")
    finally:
        os.close(state_fd)


def child_answer(req: dict[str, Any]) -> dict[str, Any]:
    """Run the request ``req`` (see :func:`_payload`) in this process, as whoever it is now,
    and give the answer ``{"ok": ..., "already": ..., "error": ...}``; never raises for a
    refused or failed file step."""
    try:
        return _do(req)
    except Refused as exc:
        return {"ok": False, "error": str(exc)}
    except OSError as exc:
        return {"ok": False, "error": f"{exc.filename or 'state folder'}: {_why(exc)}"}
    except (ValueError, KeyError, TypeError) as exc:
        return {"ok": False, "error": f"bad request: {exc}"}
