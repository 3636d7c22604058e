"""Which network NCCL chose, known within the job's first minute (docs/protocol.md, "The network
check").

On a node where EFA is expected (the batch script exports ``HPCFLOW_EFA_EXPECTED``, the instance
type's EFA interfaces), each rank asks NCCL, before the process group starts, to log its init and
network choices to a file of its own: ``NCCL_DEBUG=INFO``, ``NCCL_DEBUG_SUBSYS=INIT,NET`` and
``NCCL_DEBUG_FILE`` (NCCL user guide, Environment Variables; a value the user set is kept, and a
``NCCL_DEBUG_FILE`` of theirs is read where it points, ``%h`` and ``%p`` expanded as NCCL does).
After the first collective each rank reads its file (:mod:`hpcflow.nccl.netlog`), the ranks
gather what they found, rank 0 appends the ``network`` ledger event, and with
``network.require_efa`` a fall back to TCP sockets ends every rank at once with
:data:`~hpcflow.protocol.EXIT_NETWORK_FALLBACK` and an exit record that names it.

Torch is imported only inside the functions that gather.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hpcflow.protocol as P
from hpcflow.nccl.netlog import FALLBACK_FIX as FIX
from hpcflow.nccl.netlog import (
    TRANSPORT_EFA,
    TRANSPORT_SOCKET,
    TRANSPORT_UNKNOWN,
    NetChoice,
    describe,
    efa_problems,
    parse_nccl_info,
)

#: Most bytes of a rank's NCCL log read (the INIT,NET lines of one start fit in a few KiB).
LOG_READ_MAX = 1 << 20



@dataclass(frozen=True)
class NetworkExpectation:
    """What the batch script says about the nodes' network.

    Attributes:
        instance_type: ``HPCFLOW_NETWORK_INSTANCE_TYPE`` (``p5.48xlarge``).
        efa_nics: ``HPCFLOW_EFA_EXPECTED``, the type's EFA interfaces (> 0).
        require_efa: ``HPCFLOW_REQUIRE_EFA`` is ``1``: a fall back ends the job.
    """

    instance_type: str
    efa_nics: int
    require_efa: bool

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> NetworkExpectation | None:
        """The expectation, or None when EFA is not expected (no or a zero
        ``HPCFLOW_EFA_EXPECTED``).

        Raises:
            ValueError: ``HPCFLOW_EFA_EXPECTED`` is not a whole number (the message names it).
        """
        raw = environ.get(P.ENV_EFA_EXPECTED, "").strip()
        if not raw:
            return None
        if not raw.isdigit():
            raise ValueError(f"{P.ENV_EFA_EXPECTED}={raw!r} must be a whole number of EFA "
                             "interfaces, e.g. 32")
        if int(raw) == 0:
            return None
        return cls(environ.get(P.ENV_NETWORK_INSTANCE_TYPE, "").strip() or "this instance",
                   int(raw), environ.get(P.ENV_REQUIRE_EFA, "1").strip() != "0")


def nccl_log_settings(environ: Mapping[str, str], run_dir: Path | None, job_id: str | None,
                      restart: int, rank: int) -> tuple[dict[str, str], Path | None]:
    """The NCCL variables to set so this rank's network choice lands in a file, and that file.

    Pure. Keeps every variable the user set: ``NCCL_DEBUG`` (a level other than ``INFO`` or
    ``TRACE`` logs no choice: then no file is named), ``NCCL_DEBUG_SUBSYS`` and
    ``NCCL_DEBUG_FILE`` (read where it points, with NCCL's ``%h`` host and ``%p`` pid).

    Returns:
        ``(variables to set, log file to read or None)``. Without a run directory and job id
        (outside an hpcflow job) and no file of the user's, nothing is set.
    """
    level = environ.get("NCCL_DEBUG")
    if level is not None and level.strip().upper() not in ("INFO", "TRACE"):
        return {}, None
    user_file = environ.get("NCCL_DEBUG_FILE")
    if user_file:
        path = user_file.replace("%h", socket.gethostname()).replace("%p", str(os.getpid()))
        return ({} if level else {"NCCL_DEBUG": "INFO"}), Path(path)
    if run_dir is None or not job_id:
        return {}, None
    path = P.state_dir(run_dir) / P.nccl_debug_name(job_id, restart, rank)
    out = {"NCCL_DEBUG_FILE": str(path)}
    if level is None:
        out["NCCL_DEBUG"] = "INFO"
    if "NCCL_DEBUG_SUBSYS" not in environ:
        out["NCCL_DEBUG_SUBSYS"] = "INIT,NET"
    return out, path


def start_nccl_log(environ: Mapping[str, str], run_dir: Path | None, env: Any) -> Path | None:
    """Set this rank's NCCL log variables (:func:`nccl_log_settings`) in ``os.environ`` and
    create the log's folder; returns the log file to read after the first collective, or
    ``None``. Call it before the process group starts: NCCL reads them then (NCCL user guide,
    "Environment Variables")."""
    settings, path = nccl_log_settings(environ, run_dir, env.job_id, env.restart_count, env.rank)
    os.environ.update(settings)
    if path is not None and settings.get("NCCL_DEBUG_FILE"):
        try:  # NCCL writes to stdout when it cannot open its file
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError:
            pass
    return path


def read_choice(path: Path | None) -> NetChoice:
    """Parse a rank's NCCL log (at most :data:`LOG_READ_MAX` bytes, regular files only); an
    absent or unreadable file gives an empty choice (transport ``unknown``)."""
    if path is None:
        return NetChoice()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return NetChoice()
    try:
        import stat

        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return NetChoice()
        data = os.read(fd, LOG_READ_MAX)
    except OSError:
        return NetChoice()
    finally:
        os.close(fd)
    return parse_nccl_info(data.decode("utf-8", errors="replace"))


@dataclass(frozen=True)
class Verdict:
    """What the ranks' choices mean: the ``network`` event, and whether the job stops."""

    event: dict[str, Any]
    stop: bool
    summary: str


def verdict(choices: Sequence[Mapping[str, Any]], expect: NetworkExpectation) -> Verdict:
    """Judge every rank's :meth:`NetChoice.to_dict` (index = rank). Pure.

    The job's transport is ``socket`` when any rank fell back to TCP sockets, else rank 0's.
    It stops when it is ``socket`` and ``expect.require_efa``. Ranks that logged nothing
    (``unknown``) never stop it: a missing log is no proof of a fall back.

    Returns:
        A :class:`Verdict`; ``event`` holds the ``network`` ledger event's fields (without
        ``time``, ``job_id``, ``restart``).
    """
    transports = [str(c.get("transport", TRANSPORT_UNKNOWN)) for c in choices]
    fallen = [r for r, t in enumerate(transports) if t == TRANSPORT_SOCKET]
    first = choices[fallen[0]] if fallen else (choices[0] if choices else {})
    choice = NetChoice(**{k: v for k, v in first.items() if k != "transport"})
    summary = describe(choice, expect.instance_type)
    problems = efa_problems(choice)
    if choice.transport == TRANSPORT_EFA and choice.nics is not None \
            and choice.nics < expect.efa_nics:
        problems.append(f"aws-ofi-nccl found {choice.nics} NICs, {expect.instance_type} has "
                        f"{expect.efa_nics}")
    stop = bool(fallen) and expect.require_efa
    event = {
        "event": P.EVENT_NETWORK, "transport": choice.transport, "net": choice.net,
        "provider": choice.provider, "plugin_version": choice.plugin_version,
        "nics": choice.nics, "bootstrap_if": choice.bootstrap_if,
        "instance_type": expect.instance_type, "expected_nics": expect.efa_nics,
        "required": expect.require_efa, "summary": summary, "problems": problems,
        "fallback_ranks": fallen[:16], "ranks": len(choices), "stopped": stop,
    }
    if stop:
        event["fix"] = FIX
    return Verdict(event, stop, summary)


def fallback_reason(summary: str) -> str:
    """The exit-record reason of a rank that stopped on a fall back."""
    return f"{P.REASON_NETWORK_FALLBACK}: {summary}"


def append_event(run_dir: Path | None, job_id: str | None, restart: int,
                 event: Mapping[str, Any]) -> None:
    """Append one event (``{"event": name, ...}``) to the job's ledger through the one ledger
    writer (:func:`hpcflow.ledger.append_event`); a failed write is reported, never raised."""
    from hpcflow.ledger import append_event as append_line

    if run_dir is None or not job_id:
        return
    fields = dict(event)
    name = str(fields.pop("event"))
    append_line(P.ledger_path(run_dir), name, job_id=job_id, restart=restart, **fields)


def gather(choice: dict[str, Any]) -> list[dict[str, Any]]:
    """Every rank's choice, index = rank (collective under a process group; a JSON string per
    rank). Without a process group: ``[choice]``."""
    from hpcflow.runtime import dist as hdist

    if not hdist.is_distributed():
        return [choice]
    import torch.distributed as dist

    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, json.dumps(choice))
    return [json.loads(c) for c in out]


def check_network(env: Any, run_dir: Path | None, expect: NetworkExpectation,
                  log_path: Path | None) -> Verdict:
    """After the process group started: the first collective (a barrier: NCCL sets up its
    transport and logs it), then read, gather and record; on a required fall back, record this
    rank's exit and leave with :data:`~hpcflow.protocol.EXIT_NETWORK_FALLBACK`. Every rank
    judges the same gathered choices, so all leave together; the process group is not torn
    down (as in :func:`hpcflow.runtime.exits.leave_done`). Costs two collectives and one small
    file read.

    Args:
        env: this rank's :class:`~hpcflow.runtime.env.DistEnv`.
        run_dir: the run directory (the ledger and exit records), or None.
        expect: what the batch script said about the network.
        log_path: this rank's NCCL log (:func:`nccl_log_settings`), or None.

    Returns:
        The :class:`Verdict` when the job goes on.
    """
    from hpcflow.runtime import dist as hdist
    from hpcflow.runtime.exits import record_exit
    from hpcflow.runtime.lines import log

    hdist.barrier()
    choices = gather(read_choice(log_path).to_dict())
    result = verdict(choices, expect)
    if env.is_rank0:
        append_event(run_dir, env.job_id, env.restart_count, result.event)
    log(env, f"network: {result.summary}")
    if result.stop:
        reason = fallback_reason(result.summary)
        record_exit(run_dir, env.job_id, env.restart_count, env.rank,
                    P.EXIT_NETWORK_FALLBACK, reason)
        log(env, f"stopping: {reason} (rank(s) {result.event['fallback_ranks']}); "
                 f"{'; '.join(result.event['problems'])}. Fix: {FIX}")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(P.EXIT_NETWORK_FALLBACK)
    return result
