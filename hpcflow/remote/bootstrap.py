"""Run hpcflow's node bootstrap on many hosts over SSH, in parallel, with fabric.

Each host gets a copy of ``bootstrap/`` (a tarball uploaded over SFTP into a fresh temporary
directory), runs ``hpcflow-bootstrap.sh`` (through ``sudo -n`` unless it logs in as root) and
the temporary directory is removed. Connections and host-key checks are
:func:`hpcflow.remote.ssh.open_connection`'s: unknown hosts are refused unless
``accept_new_host_keys`` is set, a changed key always is.

fabric and paramiko are imported inside the functions that use them.
"""

from __future__ import annotations

import io
import re
import shlex
import tarfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hpcflow.errors import HpcflowError, SpecError
from hpcflow.hostlist import expand_hostlist
from hpcflow.remote.ssh import DEFAULT_KNOWN_HOSTS, HOST_RE, Host, RemoteError, open_connection

__all__ = ["DEFAULT_KNOWN_HOSTS", "Host", "HostResult", "bootstrap_hosts", "parse_hosts",
           "parse_steps", "remote_command", "run_host"]

_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ ")
STEPS = ("efa", "nccl", "nccl-tests", "enroot-pyxis", "spot-watch", "healthcheck")
# enroot/pyxis only when asked: ParallelCluster 3.11+ AMIs ship them; spot-watch too (spot nodes).
DEFAULT_STEPS = ("efa", "nccl", "nccl-tests", "healthcheck")


@dataclass
class HostResult:
    """What happened on one host.

    Attributes:
        host: the host's label (``user@host:port``).
        ok: the bootstrap exited 0.
        exit_code: the remote exit status, or None when it never ran (connection refused,
            host key rejected, authentication failed).
        duration_s: wall time in seconds.
        summary: one line: the last result line, or the connection error.
        output: the remote stdout and stderr (the step log lines are on stderr).
    """

    host: str
    ok: bool
    exit_code: int | None
    duration_s: float
    summary: str
    output: str = ""
    steps_done: list[str] = field(default_factory=list)

    def tail(self, n: int = 20) -> list[str]:
        return self.output.strip().splitlines()[-n:]

    def to_dict(self) -> dict:
        d = asdict(self)
        d["tail"] = self.tail()
        del d["output"]
        return d


def parse_hosts(text: str, default_port: int = 22, default_user: str | None = None) -> list[Host]:
    """``"a,b:2222,admin@n[1-3]"`` -> hosts. Slurm hostlist brackets expand.

    Raises:
        SpecError: an empty list, a malformed entry or a port out of range (names the entry).
    """
    items = [i for i in re.split(r",(?![^\[]*\])", text.strip()) if i]
    if not items:
        raise SpecError("--hosts: empty; give host names, e.g. --hosts node1,node2:2222")
    hosts: list[Host] = []
    for item in items:
        m = HOST_RE.match(item.strip())
        if not m:
            raise SpecError(f"--hosts: {item!r} is not a host; allowed: [user@]host[:port], "
                            "host may be a Slurm hostlist such as node[1-4]")
        port = int(m["port"]) if m["port"] else default_port
        if not 0 < port < 65536:
            raise SpecError(f"--hosts: {item!r}: port {port} is not in 1-65535")
        try:
            names = expand_hostlist(m["host"]) if "[" in m["host"] else [m["host"]]
        except ValueError as exc:
            raise SpecError(f"--hosts: {item!r}: {exc}") from None
        hosts.extend(Host(n, port, m["user"] or default_user) for n in names)
    dupes = sorted({h.label for h in hosts if hosts.count(h) > 1})
    if dupes:
        raise SpecError(f"--hosts: {', '.join(dupes)} given twice")
    return hosts


def parse_steps(text: str | None) -> list[str]:
    """``"efa,nccl"`` -> the steps, checked against :data:`STEPS` (None = :data:`DEFAULT_STEPS`)."""
    if not text:
        return list(DEFAULT_STEPS)
    steps = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in steps if s not in STEPS]
    if bad or not steps:
        raise SpecError(f"--steps: {', '.join(map(repr, bad)) or 'empty'} not allowed; "
                        f"allowed: {','.join(STEPS)}")
    return steps


def bootstrap_tarball(root: Path) -> bytes:
    """``bootstrap/`` as a gzip tarball (paths start with ``bootstrap/``)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(str(root), arcname="bootstrap",
                filter=lambda ti: None if "__pycache__" in ti.name else ti)
    return buf.getvalue()


def remote_command(workdir: str, steps: Sequence[str], extra_args: Sequence[str]) -> str:
    """The shell line run on a host (every value quoted); ``--env NAME=VALUE`` pairs in
    ``extra_args`` reach the entry script, which exports them for its steps."""
    script = f"{workdir}/bootstrap/hpcflow-bootstrap.sh"
    args = ["--steps", ",".join(steps), *extra_args]
    inner = " ".join(shlex.quote(a) for a in ["bash", script, *args])
    # One stream, so the log tail reads in the order things happened.
    return f'if [ "$(id -u)" = 0 ]; then {inner} 2>&1; else sudo -n {inner} 2>&1; fi'


def run_host(host: Host, tarball: bytes, steps: Sequence[str], extra_args: Sequence[str], *,
             identity: str | None = None, known_hosts: str | None = None,
             accept_new_host_keys: bool = False, connect_timeout_s: int = 15,
             command_timeout_s: int = 3600) -> HostResult:
    """Bootstrap one host; every failure becomes a :class:`HostResult` (never raises)."""
    start = time.monotonic()
    try:
        conn = open_connection(host, identity=identity, known_hosts=known_hosts,
                               accept_new_host_keys=accept_new_host_keys,
                               connect_timeout_s=connect_timeout_s)
    except RemoteError as exc:
        return HostResult(host.label, False, None, time.monotonic() - start, str(exc))
    try:
        workdir = conn.run("mktemp -d /tmp/hpcflow-bootstrap.XXXXXX", hide=True,
                           in_stream=False).stdout.strip()
        conn.put(io.BytesIO(tarball), f"{workdir}/bootstrap.tar.gz")
        conn.run(f"tar -xzf {shlex.quote(workdir)}/bootstrap.tar.gz -C {shlex.quote(workdir)}",
                 hide=True, in_stream=False)
        res = conn.run(remote_command(workdir, steps, extra_args), hide=True, warn=True,
                       in_stream=False, timeout=command_timeout_s)
        conn.run(f"rm -rf {shlex.quote(workdir)}", hide=True, warn=True, in_stream=False)
    except Exception as exc:  # noqa: BLE001 - a broken session is this host's result
        return HostResult(host.label, False, None, time.monotonic() - start,
                          f"session with {host.label} failed: {type(exc).__name__}: {exc}")
    finally:
        conn.close()
    output = res.stdout + res.stderr
    done = re.findall(r"^== (\d\d-[\w-]+)$", output, re.M)
    if res.return_code == 0:
        # Result lines: neither a "== step" marker nor a timestamped log line.
        lines = [ln for ln in output.splitlines() if ln.strip() and not ln.startswith("==")
                 and not _LOG_LINE.match(ln) and not ln.startswith((" ", "\t"))]
        summary = "; ".join(ln.strip() for ln in lines if re.match(r"^[\w-]+: ", ln)) or "done"
    else:
        errors = [ln for ln in output.splitlines() if _LOG_LINE.match(ln) and " error: " in ln]
        summary = errors[0].split(" error: ", 1)[1].strip() if errors else f"exit {res.return_code}"
    return HostResult(host.label, res.return_code == 0, res.return_code,
                      time.monotonic() - start, summary, output, done)


def bootstrap_hosts(hosts: Sequence[Host], steps: Sequence[str], extra_args: Sequence[str], *,
                    root: Path, parallel: int = 16,
                    on_done: Callable[[HostResult], None] | None = None,
                    **kwargs) -> list[HostResult]:
    """Bootstrap every host, ``parallel`` at a time; results in the order of ``hosts``.

    Raises:
        HpcflowError: fabric is not installed (the message gives the pip command).
    """
    try:
        import fabric  # noqa: F401
    except ImportError:
        raise HpcflowError("hpcflow bootstrap needs fabric: pip install 'hpcflow[ssh]'") from None
    tarball = bootstrap_tarball(root)

    def one(host: Host) -> HostResult:
        result = run_host(host, tarball, steps, extra_args, **kwargs)
        if on_done:
            on_done(result)
        return result

    with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(hosts)))) as pool:
        return list(pool.map(one, hosts))
