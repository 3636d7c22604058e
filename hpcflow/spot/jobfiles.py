"""A job's notice file and ledger, touched only as the job's owner, within a time bound.

The node's spot watcher runs as root (it must, for ``scancel`` on any user's job), but a run
directory belongs to the job's user, who may have replaced anything in it: the ledger by a
symlink into ``/etc``, a dangling symlink, a named pipe, a link to ``/dev/zero``. So the watcher
never opens a path there itself. Each file operation runs in a child process that the kernel
starts as the job's ``UserId``/``GroupId`` (:class:`subprocess.Popen` ``user=``, ``group=``,
``extra_groups=``: setgroups, setgid, setuid between fork and exec), with an empty environment,
``python -I`` (no user site, no ``PYTHON*`` variables), umask 077 and ``/`` as its folder. In
the child:

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
import stat
import subprocess
import sys
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

_BOOT = ("import sys; sys.path.insert(0, sys.argv[1]); "
         "from hpcflow.spot.jobfiles import child_main; child_main(sys.argv[2])")


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
        event: with :data:`RECORD`, the ledger line to append.
    """

    op: str
    run_dir: Path
    uid: int
    gid: int
    job_id: str
    notice_time: int
    event: dict[str, Any] | None = None


@dataclass
class Outcome:
    """What a child did: ``ok``; with :data:`PREPARE`, ``already`` (the ledger holds this
    notice for this job, so no notice file was written); else ``error``, one line naming the
    file and why it was refused or failed (``timed_out`` when the bound ran out)."""

    ok: bool
    already: bool = False
    error: str = ""
    timed_out: bool = False


def _credentials(uid: int, gid: int) -> dict[str, Any]:
    """Popen arguments that start the child as ``uid``/``gid`` with that user's groups (the
    bare gid for a uid with no passwd entry); none when not root (the child is then us)."""
    if os.geteuid() != 0:
        return {}
    try:
        groups = os.getgrouplist(pwd.getpwuid(uid).pw_name, gid)
    except (KeyError, OSError):
        groups = [gid]
    return {"user": uid, "group": gid, "extra_groups": groups}


def _argv(req: Request) -> list[str]:
    root = str(Path(__file__).resolve().parents[2])
    payload = {"op": req.op, "run_dir": str(req.run_dir), "uid": req.uid,
               "state_dir": protocol.STATE_DIR, "ledger": protocol.LEDGER_FILE,
               "notice": protocol.notice_name(req.job_id), "job_id": req.job_id,
               "notice_time": req.notice_time, "event_name": protocol.EVENT_SPOT_NOTICE,
               "event": req.event, "tail_bytes": LEDGER_TAIL_BYTES}
    return [sys.executable, "-I", "-c", _BOOT, root, json.dumps(payload)]


def run_as_owners(requests: list[Request], *, bound_s: float) -> list[Outcome]:
    """Run every request in a child of its job's owner, all at once, for at most ``bound_s``
    seconds in all (plus up to 1 s to reap the children killed then).

    Returns:
        One :class:`Outcome` per request, in order. Never raises for a child that could not
        start, timed out, or answered something unreadable: that is its outcome's ``error``.
    """
    procs: list[subprocess.Popen[bytes] | OSError] = []
    for req in requests:
        try:
            procs.append(subprocess.Popen(
                _argv(req), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, cwd="/", env={}, umask=0o077, close_fds=True,
                start_new_session=True, **_credentials(req.uid, req.gid)))
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            procs.append(OSError(f"cannot start a process as uid {req.uid}: {exc}"))
    answers = _read_answers(procs, time.monotonic() + bound_s)
    outcomes = []
    for proc, answer in zip(procs, answers, strict=True):
        if isinstance(proc, OSError):
            outcomes.append(Outcome(False, error=str(proc)))
            continue
        if answer is None:
            proc.kill()
        try:
            proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            pass  # stuck in the kernel (a hung file system); Popen reaps it later
        finally:
            proc.stdout.close()  # type: ignore[union-attr]
        if answer is None:
            outcomes.append(Outcome(False, timed_out=True,
                                    error=f"took longer than {bound_s:g} s: stopped"))
        else:
            outcomes.append(_parse_answer(answer))
    return outcomes


def _read_answers(procs: list[subprocess.Popen[bytes] | OSError],
                  deadline: float) -> list[bytes | None]:
    """Each child's stdout up to EOF (None: still open at ``deadline``), capped in bytes."""
    answers: list[bytes | None] = [None] * len(procs)
    bufs: dict[int, bytearray] = {}
    with selectors.DefaultSelector() as sel:
        for i, proc in enumerate(procs):
            if not isinstance(proc, OSError):
                sel.register(proc.stdout, selectors.EVENT_READ, i)  # type: ignore[arg-type]
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


# ---- The child: runs as the job's user, standard library and hpcflow.fsutil only.

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
        raise Refused(f"{where}: {_why(exc)}") from None
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
                os.write(fd, (json.dumps(req["event"], sort_keys=True) + "\n").encode())
            finally:
                os.close(fd)
            return {"ok": True}
        raise ValueError(f"unknown operation {req['op']!r}")
    finally:
        os.close(state_fd)


def child_main(raw: str) -> None:
    """Entry point of the child (see the module docstring): run the JSON request ``raw`` and
    print a one-line JSON answer, ``{"ok": ..., "already": ..., "error": ...}``."""
    try:
        answer = _do(json.loads(raw))
    except Refused as exc:
        answer = {"ok": False, "error": str(exc)}
    except OSError as exc:
        answer = {"ok": False, "error": f"{exc.filename or 'state folder'}: {_why(exc)}"}
    except (ValueError, KeyError, TypeError) as exc:
        answer = {"ok": False, "error": f"bad request: {exc}"}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
