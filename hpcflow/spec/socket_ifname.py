"""What ``NCCL_SOCKET_IFNAME`` lets NCCL use, and whether that includes an interface ranks on
other nodes cannot reach. Pure; used by the job spec (a refusal at submit) and by ``hpcflow
doctor`` (:func:`hpcflow.nccl.checks.check_socket_ifname`).

Source: NCCL user guide, Environment Variables, ``NCCL_SOCKET_IFNAME``
(https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-socket-ifname): a
comma-separated list of interface prefixes; ``^`` excludes them, ``=`` matches a name exactly;
unset, NCCL skips ``lo`` and ``docker*``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

# Interfaces NCCL must not use between nodes: loopback and container/VM bridges.
BAD_IFACE = re.compile(r"^(lo|docker\d*|br-.*|virbr\d*|veth.*|cni\d*|flannel.*|cali.*|podman\d*)$")
_DEFAULT_EXCLUDE = ("docker", "lo")


def _matches(name: str, item: str) -> bool:
    return name == item[1:] if item.startswith("=") else name.startswith(item)


def nccl_usable_interfaces(ifname: str | None, interfaces: Iterable[str]) -> list[str]:
    """The interfaces NCCL may pick under ``NCCL_SOCKET_IFNAME=ifname`` (None = unset).

    Unset: every interface but ``lo`` and ``docker*`` (NCCL falls back to those only when nothing
    else exists). ``^a,b``: every interface not matching a prefix. ``a,b``: those matching one.
    ``=name`` matches exactly.
    """
    names = list(interfaces)
    if not ifname:
        return [n for n in names if not any(n.startswith(p) for p in _DEFAULT_EXCLUDE)]
    if ifname.startswith("^"):
        items = [i for i in ifname[1:].split(",") if i]
        return [n for n in names if not any(_matches(n, i) for i in items)]
    items = [i for i in ifname.split(",") if i]
    return [n for n in names if any(_matches(n, i) for i in items)]


@dataclass(frozen=True)
class IfnameVerdict:
    """What ``NCCL_SOCKET_IFNAME`` does on a node with these interfaces.

    Attributes:
        shown: the setting as the messages quote it (``NCCL_SOCKET_IFNAME='lo'`` or ``...
            unset``).
        bad: interfaces NCCL may use that other nodes cannot reach (loopback, bridges).
        good: the other interfaces NCCL may use.
    """

    shown: str
    bad: tuple[str, ...]
    good: tuple[str, ...]

    def unreachable_message(self) -> tuple[str, str] | None:
        """``(problem, fix)`` when NCCL may use an unreachable interface, else None."""
        if not self.bad:
            return None
        exclude = ["lo", "docker", *sorted({b for b in self.bad
                                            if b != "lo" and not b.startswith("docker")})]
        fix = f"exclude them: export NCCL_SOCKET_IFNAME='^{','.join(exclude)}'"
        if self.good:
            fix += f", or name the host interface: export NCCL_SOCKET_IFNAME={self.good[0]}"
        return (f"{self.shown} lets NCCL use {', '.join(self.bad)} (loopback or a container "
                "bridge): ranks on other nodes cannot reach it", fix)


def judge_socket_ifname(value: str | None, interfaces: Iterable[str]) -> IfnameVerdict:
    """Split what ``NCCL_SOCKET_IFNAME=value`` (None: unset) lets NCCL use into unreachable and
    usable interfaces."""
    usable = nccl_usable_interfaces(value, interfaces)
    shown = f"NCCL_SOCKET_IFNAME={value!r}" if value is not None else "NCCL_SOCKET_IFNAME unset"
    return IfnameVerdict(shown, tuple(n for n in usable if BAD_IFACE.match(n)),
                         tuple(n for n in usable if not BAD_IFACE.match(n)))
