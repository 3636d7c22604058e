"""Remote mode: run one hpcflow command on the head node over one SSH connection.

``hpcflow --host [user@]head[:port] submit|status|logs|cancel|report|list ...`` opens one
connection (:func:`hpcflow.remote.ssh.open_connection`: keys or agent, host keys checked), checks
that the remote hpcflow runs (``<remote hpcflow> --version``), for ``submit`` uploads the spec (and
with ``--code`` a snapshot of the code, :mod:`hpcflow.remote.bundle`) into a fresh run folder,
and runs the same command there. Its stdout and stderr stream back as they come (``logs -f``
follows live, across requeues, as it does on the head node) and its exit code is returned.

Every word sent to the remote shell is ``shlex.quote``d. The remote command is a watched one:
when the connection closes (Ctrl-C, the local hpcflow killed), the command's stdin reaches end-of-file
and a small POSIX-sh watcher sends it TERM, so no ``logs -f`` is left running on the head node.
"""

from __future__ import annotations

import io
import re
import shlex
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hpcflow.errors import SpecError
from hpcflow.remote.bundle import Bundle, code_snapshot, spec_only
from hpcflow.remote.ssh import Host, RemoteError, open_connection

#: The verbs that run on the head node with ``--host``.
REMOTE_COMMANDS = ("submit", "status", "logs", "cancel", "report", "list")
#: How to install hpcflow on a head node (shown when it is missing there).
INSTALL_LINE = "python3 -m pip install 'hpcflow[train]'"
#: Where run folders go on the head node unless ``--remote-dir`` says otherwise.
DEFAULT_REMOTE_DIR = "~/hpcflow-remote"
#: Exit codes of a remote ``submit`` that submitted nothing (SpecError, SubmitError): the
#: upload is removed again.
_NOTHING_SUBMITTED = (2, 3)
_UPLOAD = ".hpcflow-upload.tar.gz"

# Runs "$@" with the connection's stdin kept on fd 3 for a watcher: when the connection closes,
# `cat` sees end-of-file and the command gets TERM. An asynchronous list's stdin is /dev/null
# unless redirected explicitly (POSIX, Shell Command Language 2.9.3.1), hence the fd 3.
_WATCHED = ('exec 3<&0; "$@" </dev/null 3<&- & pid=$!; '
            '(cat <&3 >/dev/null 2>&1; kill -TERM "$pid" 2>/dev/null) >/dev/null 2>&1 & watch=$!; '
            'exec 3<&-; wait "$pid"; rc=$?; kill "$watch" 2>/dev/null; exit "$rc"')


@dataclass(frozen=True)
class RemoteOptions:
    """How to reach the head node and run hpcflow there.

    Attributes:
        host: the SSH target.
        remote_hpcflow: the command line that runs hpcflow on the head node, split with shell
            rules; leading ``NAME=VALUE`` words set environment variables, e.g.
            ``PYTHONPATH=/fsx/src /fsx/venv/bin/python -m hpcflow``.
        remote_dir: the folder for run folders on the head node (``~/`` is the remote home).
        identity: a private key file; None = the SSH agent and ``~/.ssh`` default keys.
        known_hosts: the known_hosts file; None = ``~/.ssh/known_hosts``.
        accept_new_host_keys: trust an unknown head node on first use (saved to known_hosts).
        code: send a ``git archive`` snapshot of the spec's repository with ``submit``.
        send_secret_files: with ``code``, send committed files named like credentials files
            (:data:`hpcflow.remote.bundle.SECRET_NAMES`) too; without it they stop the upload.
    """

    host: Host
    remote_hpcflow: str = "hpcflow"
    remote_dir: str = DEFAULT_REMOTE_DIR
    identity: str | None = None
    known_hosts: str | None = None
    accept_new_host_keys: bool = False
    code: bool = False
    send_secret_files: bool = False


def hpcflow_words(remote_hpcflow: str) -> list[str]:
    """The remote hpcflow command line as words, run through ``env`` so that leading
    ``NAME=VALUE`` words are assignments even when quoted, and a missing program is reported by
    ``env`` with exit 127 (coreutils env(1)).

    Raises:
        SpecError: the value is empty or not valid shell words (unbalanced quotes).
    """
    try:
        words = shlex.split(remote_hpcflow)
    except ValueError as exc:
        raise SpecError(f"--remote-hpcflow: {remote_hpcflow!r}: {exc}") from None
    if not [w for w in words if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w)]:
        raise SpecError(f"--remote-hpcflow: {remote_hpcflow!r} names no program; give the "
                        "command that runs hpcflow on the head node, e.g. hpcflow or "
                        "/shared/venv/bin/python -m hpcflow")
    return ["env", *words]


def remote_path(path: str) -> str:
    """A remote folder for the shell: quoted, with a leading ``~/`` as the remote ``$HOME``."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


def remote_line(words: Sequence[str], command: str, args: Sequence[str],
                cwd: str | None = None) -> str:
    """The shell line that runs ``<hpcflow words> <command> <args>`` watched (module doc),
    in ``cwd`` when given; every word quoted."""
    argv = [*words, command, *args]
    line = " ".join(shlex.quote(w) for w in ["sh", "-c", _WATCHED, "hpcflow-remote", *argv])
    return f"cd {shlex.quote(cwd)} && {line}" if cwd else line


def _check_hpcflow(conn, opts: RemoteOptions, words: Sequence[str],  # noqa: ANN001
                   note: Callable[[str], None]) -> None:
    """Run ``<remote hpcflow> --version``; refuse with the install line when it does not run."""
    from hpcflow import __version__

    res = conn.run(" ".join(shlex.quote(w) for w in [*words, "--version"]), hide=True,
                   warn=True, in_stream=False)
    found = re.search(r"hpcflow, version (\S+)", res.stdout)
    if res.return_code != 0 or not found:
        tail = " | ".join((res.stderr + res.stdout).strip().splitlines()[-3:]) or "no output"
        raise RemoteError(
            f"hpcflow does not run on {opts.host.label}: `{opts.remote_hpcflow} --version` gave "
            f"exit {res.return_code} ({tail}). Install it there with: {INSTALL_LINE} (it must be "
            "on the PATH of a non-interactive SSH session), or give the command that runs it "
            "with --remote-hpcflow, e.g. --remote-hpcflow '/shared/venv/bin/python -m hpcflow'",
            exit_code=127)
    if found[1] != __version__:
        note(f"hpcflow: warning: hpcflow {found[1]} on {opts.host.label}, {__version__} here")


def _upload(conn, opts: RemoteOptions, bundle: Bundle, spec: Path) -> str:  # noqa: ANN001
    """Make a fresh run folder under ``remote_dir``, unpack the bundle into it; its path."""
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", spec.stem)[:60] or "job"
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    base = remote_path(opts.remote_dir)
    made = conn.run(f"mkdir -p {base} && mktemp -d {base}/{shlex.quote(f'{stem}-{stamp}-XXXXXX')}",
                    hide=True, warn=True, in_stream=False)
    if made.return_code != 0:
        raise RemoteError(f"cannot create a run folder in {opts.remote_dir} on {opts.host.label}: "
                          f"{made.stderr.strip()}; choose another with --remote-dir", exit_code=1)
    folder = made.stdout.strip()
    archive = f"{folder}/{_UPLOAD}"
    conn.put(io.BytesIO(bundle.data), archive)
    unpack = conn.run(f"tar -xzf {shlex.quote(archive)} -C {shlex.quote(folder)} && "
                      f"rm -f {shlex.quote(archive)}", hide=True, warn=True, in_stream=False)
    if unpack.return_code != 0:
        conn.run(f"rm -rf {shlex.quote(folder)}", hide=True, warn=True, in_stream=False)
        raise RemoteError(f"cannot unpack the upload in {folder} on {opts.host.label}: "
                          f"{unpack.stderr.strip()}", exit_code=1)
    return folder


def _run_streamed(conn, line: str) -> int:  # noqa: ANN001
    """Run ``line`` with its output streamed here; its exit code. Ctrl-C closes the connection
    (the remote side then ends, module doc) and raises KeyboardInterrupt: fabric without a pty
    would otherwise wait for the remote command to end before giving up its reader threads."""
    interrupted = threading.Event()

    def on_sigint(signum: int, frame: object) -> None:  # noqa: ARG001
        interrupted.set()
        conn.close()

    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, on_sigint) if main else None
    try:
        res = conn.run(line, warn=True, hide=False, in_stream=False, pty=False)
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)
    if interrupted.is_set():
        raise KeyboardInterrupt
    return res.return_code


def run_remote(opts: RemoteOptions, command: str, args: Sequence[str], *,
               spec_index: int | None = None,
               note: Callable[[str], None] = print) -> int:
    """Run ``hpcflow <command> <args>`` on the head node; its output streams to this process's
    stdout and stderr as it comes. Returns the remote exit code.

    Args:
        opts: the connection and remote settings.
        command: one of :data:`REMOTE_COMMANDS`.
        args: the command's arguments as typed (already checked by the local parser).
        spec_index: for ``submit``, the index in ``args`` of the spec path (a local path; it is
            uploaded and replaced by its path in the run folder).
        note: where hpcflow's own remarks go (warnings, the run folder), one line each.

    Raises:
        SpecError: the spec cannot be read, ``--code`` cannot snapshot its repository, its
            commit holds files named like credentials files and ``send_secret_files`` is not
            set, or ``--remote-hpcflow`` is malformed (nothing sent).
        RemoteError: the connection failed (exit code 255), hpcflow does not run on the head
            node (127), or the upload failed (1).
    """
    words = hpcflow_words(opts.remote_hpcflow)
    args = list(args)
    bundle = None
    if command == "submit" and spec_index is not None:
        spec = Path(args[spec_index])
        bundle = code_snapshot(spec) if opts.code else spec_only(spec)
        if bundle.uncommitted:
            shown = ", ".join(bundle.uncommitted[:10])
            more = f" and {len(bundle.uncommitted) - 10} more" if len(bundle.uncommitted) > 10 else ""
            note(f"hpcflow: warning: uncommitted changes are NOT sent (the snapshot is commit "
                 f"{bundle.commit[:12]}, plus the spec as it is on disk): {shown}{more}")
        if bundle.secret_like:
            shown = ", ".join(bundle.secret_like[:10])
            more = f" and {len(bundle.secret_like) - 10} more" if len(bundle.secret_like) > 10 else ""
            if not opts.send_secret_files:
                raise SpecError(
                    f"--code: the commit holds files whose names are those of credentials "
                    f"files: {shown}{more}; nothing was sent. Remove them from the commit (git "
                    "rm --cached), mark them export-ignore in .gitattributes, or pass "
                    "--code-with-secret-files to send them")
            note(f"hpcflow: warning: --code-with-secret-files: sending committed files whose "
                 f"names are those of credentials files: {shown}{more}")
    conn = open_connection(opts.host, identity=opts.identity, known_hosts=opts.known_hosts,
                           accept_new_host_keys=opts.accept_new_host_keys,
                           auth_hint="check the user in --host and --identity, or your SSH agent")
    try:
        _check_hpcflow(conn, opts, words, note)
        folder = None
        if bundle is not None:
            folder = _upload(conn, opts, bundle, spec)
            args[spec_index] = bundle.spec_path
            what = f"code {bundle.commit[:12]} and the spec" if bundle.commit else "the spec"
            note(f"hpcflow: uploaded {what} ({len(bundle.data)} bytes) to "
                 f"{opts.host.label}:{folder}")
        code = _run_streamed(conn, remote_line(words, command, args, folder))
        dry = "--dry-run" in (args[: args.index("--")] if "--" in args else args)
        if folder and (dry or code in _NOTHING_SUBMITTED):
            conn.run(f"rm -rf {shlex.quote(folder)}", hide=True, warn=True, in_stream=False)
            note(f"hpcflow: nothing was submitted; removed {opts.host.label}:{folder}")
        return code
    finally:
        conn.close()
