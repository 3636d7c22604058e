"""Which network NCCL chose, read from its ``NCCL_DEBUG=INFO`` output. Pure, standard library only:
the in-job runtime, ``hpcflow doctor`` and the NCCL log check share it.

Every NCCL line starts ``<host>:<pid>:<tid> [<cuda dev>] NCCL INFO <message>``; the messages read
here are, with their source (format strings as printed; version ranges are where they were seen):

- ``Bootstrap : Using <if>:<addr><<n>>`` (``Bootstrap: Using ...`` in newer releases): the
  interface of NCCL's out-of-band bootstrap; NVIDIA/nccl ``src/bootstrap.cc``.
- ``NET/Plugin: Loaded net plugin <name> (v<N>)``: a network plugin was found by the dynamic
  loader; NVIDIA/nccl ``src/plugin/net/net_v*.cc`` (2.19+; ``NET/Plugin : Loaded ...`` before).
- ``NET/Plugin : No plugin found (libnccl-net.so), using internal implementation`` (<= 2.18) and
  ``NET/Plugin: Could not find: libnccl-net.so`` / ``Using internal network plugin`` (2.19+):
  no plugin; NCCL uses its own IB or Socket transport. Same files.
- ``NET/OFI Initializing aws-ofi-nccl <version>``: aws-ofi-nccl's ``PACKAGE_STRING``
  (aws/aws-ofi-nccl ``src/nccl_ofi_net.c``; every aws-ofi-nccl line starts ``NET/OFI``).
- ``NET/OFI Selected Provider is <prov> (found <n> nics)`` (1.x), ``Selected provider is
  <prov>, fabric is <fabric> (found <n> nics)`` (newer): the libfabric provider and the number of
  NICs; aws-ofi-nccl ``src/nccl_ofi_net.c``. ``tcp`` (or ``tcp;ofi_rxm``, ``sockets``) means
  libfabric carries the traffic over TCP: no faster than NCCL's own sockets.
- ``NET/Socket : Using [0]<if>:<addr><0> [1]...``: the interfaces of NCCL's Socket transport;
  NVIDIA/nccl ``src/transport/net_socket.cc``.
- ``Using network <name>``: the transport chosen for the communicator (``Socket``, ``IB``, or the
  plugin's name: ``AWS Libfabric``, ``Libfabric``, ``OFI``); NVIDIA/nccl ``src/init.cc``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

#: ``transport`` words of :class:`NetChoice`.
TRANSPORT_EFA = "efa"
TRANSPORT_SOCKET = "socket"
TRANSPORT_OFI = "ofi"
TRANSPORT_OTHER = "other"
TRANSPORT_UNKNOWN = "unknown"

#: libfabric providers that carry the traffic over TCP/IP (libfabric fi_provider(7)).
TCP_PROVIDERS = frozenset({"tcp", "sockets", "udp"})

#: What to do about a fall back to sockets, in the words status, report and the rank's log print.
FALLBACK_FIX = ("put the aws-ofi-nccl plugin on the loader's path (bootstrap step 20-nccl does, "
                "through /etc/ld.so.conf.d; or LD_LIBRARY_PATH=/opt/amazon/ofi-nccl/lib), check "
                "that `fi_info -p efa` lists devices and run `hpcflow doctor` on the node; "
                "network.require_efa: false lets the job train over sockets")

_INFO = re.compile(r"NCCL INFO (?P<msg>.*?)\s*$")
_USING = re.compile(r"^Using network (?P<net>.+)$")
_LOADED = re.compile(r"^NET/Plugin\s*:\s*Loaded net plugin (?P<name>.+?) \(v\d+\)")
_NO_PLUGIN = re.compile(r"^NET/Plugin\s*:.*(No plugin found|Could not find|[Uu]sing internal)")
_OFI_VERSION = re.compile(r"^NET/OFI Initializing aws-ofi-nccl (?P<version>\S+)")
_PROVIDER = re.compile(r"^NET/OFI Selected [Pp]rovider is (?P<prov>[^,\s(]+)"
                       r"(?:, fabric is (?P<fabric>[^,\s(]+))?"
                       r"(?:.*\(found (?P<nics>\d+) nics?\))?")
_BOOTSTRAP = re.compile(r"^Bootstrap\s*:\s*Using (?P<iface>[^:\s<]+)")
_SOCKET_IFS = re.compile(r"\[\d+\](?P<iface>[^:\s<]+)")
_OFI_NAME = re.compile(r"libfabric|ofi", re.IGNORECASE)


@dataclass
class NetChoice:
    """What one rank's NCCL output says about its network (every field None/empty when unsaid).

    Attributes:
        net: the ``Using network`` name (``Socket``, ``IB``, ``AWS Libfabric``...).
        plugin: the net plugin NCCL loaded (``Loaded net plugin <name>``).
        no_plugin: NCCL said it found no net plugin.
        plugin_version: aws-ofi-nccl's version (``1.7.4-aws``).
        provider: the libfabric provider aws-ofi-nccl selected (``efa``, ``tcp``); a
            ``;ofi_rxm`` utility suffix is dropped.
        fabric: the libfabric fabric, where the plugin names it (``efa-direct``).
        nics: the NICs aws-ofi-nccl found.
        bootstrap_if: the interface of NCCL's bootstrap (``ens32``, ``lo``).
        socket_ifs: the interfaces of NCCL's Socket transport, if it set one up.
    """

    net: str | None = None
    plugin: str | None = None
    no_plugin: bool = False
    plugin_version: str | None = None
    provider: str | None = None
    fabric: str | None = None
    nics: int | None = None
    bootstrap_if: str | None = None
    socket_ifs: list[str] = field(default_factory=list)

    @property
    def transport(self) -> str:
        """``efa`` (the OFI plugin on the efa provider), ``socket`` (NCCL's Socket transport, or
        the plugin on a TCP provider), ``ofi`` (the plugin, provider unsaid), ``other`` (e.g.
        ``IB``) or ``unknown`` (no ``Using network`` line)."""
        if self.net is None:
            return TRANSPORT_UNKNOWN
        if self.net.strip() == "Socket":
            return TRANSPORT_SOCKET
        if _OFI_NAME.search(self.net):
            if self.provider == "efa":
                return TRANSPORT_EFA
            if self.provider in TCP_PROVIDERS:
                return TRANSPORT_SOCKET
            return TRANSPORT_OFI
        return TRANSPORT_OTHER

    def to_dict(self) -> dict:
        """A JSON-ready dict of every field plus ``transport``."""
        return {"transport": self.transport, "net": self.net, "plugin": self.plugin,
                "no_plugin": self.no_plugin, "plugin_version": self.plugin_version,
                "provider": self.provider, "fabric": self.fabric, "nics": self.nics,
                "bootstrap_if": self.bootstrap_if, "socket_ifs": list(self.socket_ifs)}


def parse_nccl_info(lines: Iterable[str] | str) -> NetChoice:
    """Read a rank's NCCL ``INFO`` lines (a text or its lines; other lines are skipped).

    The first ``Using network`` line wins (the first communicator's choice); for the other
    fields the first mention wins too. Never raises on odd input.

    Returns:
        A :class:`NetChoice`; ``transport`` says what NCCL chose.
    """
    if isinstance(lines, str):
        lines = lines.splitlines()
    out = NetChoice()
    for line in lines:
        m = _INFO.search(line)
        if not m:
            continue
        msg = m.group("msg")
        if out.net is None and (hit := _USING.match(msg)):
            out.net = hit.group("net").strip()
        elif out.plugin is None and (hit := _LOADED.match(msg)):
            out.plugin = hit.group("name")
        elif _NO_PLUGIN.match(msg):
            out.no_plugin = True
        elif out.plugin_version is None and (hit := _OFI_VERSION.match(msg)):
            out.plugin_version = hit.group("version")
        elif out.provider is None and (hit := _PROVIDER.match(msg)):
            out.provider = hit.group("prov").split(";", 1)[0].lower()
            out.fabric = hit.group("fabric")
            out.nics = int(hit.group("nics")) if hit.group("nics") else None
        elif out.bootstrap_if is None and (hit := _BOOTSTRAP.match(msg)):
            out.bootstrap_if = hit.group("iface")
        elif not out.socket_ifs and msg.startswith("NET/Socket") and "Using" in msg:
            out.socket_ifs = _SOCKET_IFS.findall(msg)
    return out


def efa_problems(choice: NetChoice) -> list[str]:
    """What in ``choice`` shows that NCCL is not on EFA, for a node where EFA is expected:
    each entry a short sentence; empty when nothing is wrong (or nothing was said)."""
    problems = []
    if choice.net is not None and choice.net.strip() == "Socket":
        problems.append("NCCL chose its internal Socket transport ('Using network Socket')")
    if choice.provider in TCP_PROVIDERS:
        problems.append(f"aws-ofi-nccl selected the libfabric provider {choice.provider!r}, "
                        "not 'efa' (TCP through libfabric)")
    if choice.no_plugin and choice.plugin is None:
        problems.append("NCCL found no net plugin (libnccl-net*.so not on the loader's path)")
    if choice.bootstrap_if == "lo":
        problems.append("NCCL's bootstrap uses the loopback interface 'lo': ranks on other "
                        "nodes cannot reach it")
    return problems


def describe(choice: NetChoice, instance_type: str | None = None) -> str:
    """One line for ``status`` and ``report``: ``NCCL over EFA (aws-ofi-nccl 1.9.1, 32 NICs)``,
    ``NCCL over TCP sockets: EFA expected on p5.48xlarge``, or what is known."""
    t = choice.transport
    if t == TRANSPORT_EFA:
        parts = [f"aws-ofi-nccl {choice.plugin_version}" if choice.plugin_version else
                 "aws-ofi-nccl"]
        if choice.nics is not None:
            parts.append(f"{choice.nics} NIC{'s' if choice.nics != 1 else ''}")
        return f"NCCL over EFA ({', '.join(parts)})"
    where = f": EFA expected on {instance_type}" if instance_type else ""
    if t == TRANSPORT_SOCKET:
        return f"NCCL over TCP sockets{where}"
    if t == TRANSPORT_OFI:
        return f"NCCL over {choice.net} (libfabric provider not logged)"
    if t == TRANSPORT_OTHER:
        return f"NCCL over {choice.net}{where}"
    return "NCCL's network choice not logged (no 'Using network' line)"
