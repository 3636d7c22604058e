"""One SSH connection with checked host keys (fabric/paramiko), shared by the bootstrap fan-out
and by remote mode (``hpcflow --host``).

Host keys are checked against the user's known_hosts file (``~/.ssh/known_hosts`` unless given),
which hpcflow only reads, and hpcflow's own (:func:`accepted_keys_file`): a host whose key is in
neither is refused unless ``accept_new_host_keys`` is set, which saves the new key to hpcflow's
own file, never to the user's (paramiko rewrites a file it saves to whole, dropping comments and
lines of key types it does not know; ``SSHClient.save_host_keys`` writes only the keys loaded
with ``load_host_keys``, not those of ``load_system_host_keys``). A host whose key differs from
a recorded one, in either file, is always refused (paramiko raises ``BadHostKeyException``).
Authentication uses the given key file, else the SSH agent and the default keys in ``~/.ssh``
(paramiko's ``look_for_keys``/``allow_agent``).

fabric and paramiko are imported inside the functions that use them.
"""

from __future__ import annotations

import base64
import hashlib
import re
import shlex
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcflow.errors import HpcflowError

#: Where host keys are checked and saved without ``--known-hosts`` (OpenSSH's default).
DEFAULT_KNOWN_HOSTS = Path("~/.ssh/known_hosts")
#: ``[user@]host[:port]``; the host may be a Slurm hostlist (``node[1-4]``) where lists are allowed.
HOST_RE = re.compile(r"^(?:(?P<user>[A-Za-z0-9._-]+)@)?(?P<host>[A-Za-z0-9._\[\],-]+?)"
                     r"(?::(?P<port>\d+))?$")
#: hpcflow's own known_hosts, in its per-user state folder: keys accepted on first use.
ACCEPTED_KNOWN_HOSTS_FILE = "known_hosts"
_KNOWN_HOSTS_LOCK = threading.Lock()
#: The exit code of a connection that could not be made (what ``ssh`` itself returns).
CONNECT_EXIT = 255


class RemoteError(HpcflowError):
    """The head node could not be reached or used: connection refused, host key unknown or
    changed, authentication failed, hpcflow missing there. ``exit_code`` is 255 for a connection
    failure (as ``ssh``), 127 when the remote hpcflow command is not found (as a shell)."""

    def __init__(self, message: str, exit_code: int = CONNECT_EXIT) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Host:
    """One SSH target."""

    host: str
    port: int = 22
    user: str | None = None

    @property
    def label(self) -> str:
        who = f"{self.user}@" if self.user else ""
        return f"{who}{self.host}" + (f":{self.port}" if self.port != 22 else "")


def parse_host(text: str, option: str = "--host") -> Host:
    """``"admin@head:2222"`` -> ``Host("head", 2222, "admin")`` (one host, no hostlist).

    Raises:
        SpecError: a malformed value or a port out of 1-65535 (names the option and value).
    """
    from hpcflow.errors import SpecError

    m = HOST_RE.match(text.strip())
    if not m or "[" in m["host"] or "," in m["host"]:
        raise SpecError(f"{option}: {text!r} is not a host; allowed: [user@]host[:port], "
                        "e.g. admin@head-node or head-node:2222")
    port = int(m["port"]) if m["port"] else 22
    if not 0 < port < 65536:
        raise SpecError(f"{option}: {text!r}: port {port} is not in 1-65535")
    return Host(m["host"], port, m["user"])


def ensure_file(path: Path) -> None:
    """Create an empty known_hosts (and its folder, mode 0700) if missing, as ssh does."""
    if not path.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.touch(mode=0o600)


def accepted_keys_file() -> Path:
    """hpcflow's own known_hosts (``<hpcflow state folder>/known_hosts``, see
    :func:`hpcflow.jobs.records.hpcflow_home`), where ``--accept-new-host-keys`` saves keys."""
    from hpcflow.jobs.records import hpcflow_home

    return hpcflow_home() / ACCEPTED_KNOWN_HOSTS_FILE


def fingerprint(key: object) -> str:
    """``SHA256:<base64>``, as ``ssh-keygen -l`` prints a key's fingerprint."""
    digest = hashlib.sha256(key.asbytes()).digest()  # type: ignore[attr-defined]
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def connect_error(host: Host, exc: BaseException, known_hosts: Path,
                  auth_hint: str = "check --user and --identity") -> str:
    """One line that says why a connection failed and what to do about it."""
    import paramiko

    if isinstance(exc, paramiko.BadHostKeyException):
        name = _known_name(host)
        return (f"host key of {host.label} does NOT match {known_hosts} (got {exc.key.get_name()} "
                f"{fingerprint(exc.key)}, expected {fingerprint(exc.expected_key)}): refused. "
                "If the host was rebuilt on purpose, remove the old key with: "
                f"ssh-keygen -f {shlex.quote(str(known_hosts))} -R {shlex.quote(name)}")
    if isinstance(exc, paramiko.AuthenticationException):
        return f"authentication failed for {host.label}: {exc} ({auth_hint})"
    if isinstance(exc, paramiko.SSHException) and "No authentication methods" in str(exc):
        return (f"authentication failed for {host.label}: no key to offer (no key file given, "
                f"none in the SSH agent or ~/.ssh) ({auth_hint})")
    if isinstance(exc, paramiko.SSHException) and "not found in known_hosts" in str(exc):
        return (f"{host.label} is not in {known_hosts}: refused (add its key with "
                f"ssh-keyscan -p {host.port} -H {shlex.quote(host.host)} >> "
                f"{shlex.quote(str(known_hosts))}, or pass --accept-new-host-keys to trust it "
                f"on first use and save its key to {accepted_keys_file()})")
    return f"cannot connect to {host.label}: {type(exc).__name__}: {exc}"


def open_connection(host: Host, *, identity: str | None = None, known_hosts: str | None = None,
                    accept_new_host_keys: bool = False, connect_timeout_s: int = 15,
                    auth_hint: str = "check --user and --identity") -> Any:
    """An open ``fabric.Connection`` to ``host`` with its host key checked (see module doc).

    Args:
        identity: a private key file; None = the SSH agent and the default keys in ``~/.ssh``.
        known_hosts: the user's known_hosts file, only read (a missing one holds no keys); None
            = ``~/.ssh/known_hosts``.
        accept_new_host_keys: trust a host found in neither file and save its key to
            :func:`accepted_keys_file` (created 0600 in a 0700 folder if missing).
        connect_timeout_s: TCP connect timeout, seconds.

    Raises:
        RemoteError: the connection failed (exit code 255); the message says why and the fix.
            fabric is not installed (exit code 1; the message gives the pip command).
    """
    try:
        from fabric import Connection
        from paramiko import AutoAddPolicy, RejectPolicy
    except ImportError:
        raise RemoteError("SSH needs fabric: pip install 'hpcflow[ssh]'", exit_code=1) from None

    kwargs: dict = {"look_for_keys": identity is None}
    if identity:
        kwargs["key_filename"] = [identity]
    conn = Connection(host.host, user=host.user, port=host.port, connect_timeout=connect_timeout_s,
                      connect_kwargs=kwargs)
    # The user's file is read as "system" keys, never written; hpcflow's own file is read and
    # written: a key accepted on first use is saved to it (paramiko's AutoAddPolicy saves to
    # the file load_host_keys read), so a later change is refused.
    path = Path(known_hosts).expanduser() if known_hosts else DEFAULT_KNOWN_HOSTS.expanduser()
    own = accepted_keys_file()
    try:
        from hpcflow.jobs.records import private_home

        private_home()  # the pinned keys' folder: made 0700, the user's alone, or refused
    except HpcflowError as exc:
        raise RemoteError(str(exc)) from None
    conn.client.set_missing_host_key_policy(AutoAddPolicy() if accept_new_host_keys
                                            else RejectPolicy())
    try:
        with _KNOWN_HOSTS_LOCK:  # hosts in parallel: each sees the keys the others saved
            if path.is_file():
                _load_user_keys(conn.client, path)
            ensure_file(own)
            conn.client.load_host_keys(str(own))
            conn.open()
    except Exception as exc:  # noqa: BLE001 - any connect failure is explained the same way
        conn.close()
        import paramiko

        recorded_in = path
        if isinstance(exc, paramiko.BadHostKeyException):
            recorded_in = own if conn.client.get_host_keys().lookup(_known_name(host)) else path
        raise RemoteError(connect_error(host, exc, recorded_in, auth_hint)) from None
    return conn


def _known_name(host: Host) -> str:
    """The name a known_hosts file records a host under (sshd(8), SSH_KNOWN_HOSTS FILE FORMAT)."""
    return f"[{host.host}]:{host.port}" if host.port != 22 else host.host


def _load_user_keys(client: Any, path: Path) -> None:
    """Load the user's known_hosts as paramiko's read-only "system" keys, one line at a time:
    paramiko's own reader stops at the first line it cannot parse (``InvalidHostKey``), such as
    OpenSSH's ``@cert-authority`` and ``@revoked`` markers (sshd(8), SSH_KNOWN_HOSTS FILE
    FORMAT), which it does not support. Those lines are skipped here; the file is not changed.

    Raises:
        OSError: the file cannot be read.
    """
    import tempfile

    from paramiko.hostkeys import HostKeyEntry

    kept = []
    for lineno, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        text = line.strip()
        if not text or text.startswith(("#", "@")):
            continue
        try:
            if HostKeyEntry.from_line(text, lineno) is not None:
                kept.append(text)
        except Exception:  # noqa: BLE001, S112 - a line paramiko cannot read holds no key for it
            continue
    with tempfile.NamedTemporaryFile("w", prefix="hpcflow-known-hosts-", suffix=".txt") as fh:
        fh.write("".join(f"{k}\n" for k in kept))
        fh.flush()
        client.load_system_host_keys(fh.name)
