"""The rendezvous port rule (docs/protocol.md): every rank of a step, and the
supervisor for torchrun, derive the same port from what Slurm tells them. Re-exported by
:mod:`hpcflow.protocol`."""

from __future__ import annotations

__all__ = ["PORT_BASE", "PORT_SPAN", "port_for_job_number", "port_for_step"]

#: Ports derived from a Slurm job id fall in ``[PORT_BASE, PORT_BASE + PORT_SPAN)``: above the
#: registered services most nodes run, below the Linux ephemeral range (32768-60999, see
#: ``/proc/sys/net/ipv4/ip_local_port_range``) so an outgoing connection never holds the port.
PORT_BASE = 20000
PORT_SPAN = 10000



def port_for_job_number(job_number: int) -> int:
    """The rendezvous port of a Slurm job: ``PORT_BASE + job_id % PORT_SPAN``.

    Consecutive job ids get different ports and every rank (and the supervisor, for torchrun)
    computes the same one.
    """
    return PORT_BASE + job_number % PORT_SPAN


def port_for_step(nodelist: str, step_id: str, launcher_port: str = "") -> int:
    """The rendezvous port of a step whose ranks do not see ``SLURM_JOB_ID`` (some container
    set-ups drop it): ``PORT_BASE + crc32(nodelist|step_id|launcher_port) % PORT_SPAN``.

    Every rank of a step has the same node list, ``SLURM_STEP_ID`` and
    ``SLURM_STEP_LAUNCHER_PORT`` (srun(1), OUTPUT ENVIRONMENT VARIABLES: the port of the srun
    that launched it), so they all compute the same port; the launcher port tells apart two
    steps with the same id on the same nodes. CRC-32 (zlib) is stable across Python runs,
    unlike ``hash``.
    """
    import zlib

    key = f"{nodelist}|{step_id}|{launcher_port}".encode()
    return PORT_BASE + zlib.crc32(key) % PORT_SPAN
