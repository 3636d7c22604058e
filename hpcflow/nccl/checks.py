"""Checks for the classic ways NCCL silently falls back to TCP sockets or picks the wrong interface.

All pure: they take the environment, the list of network interfaces, a filesystem probe or a log
text, and return :class:`~hpcflow.check_result.CheckResult` values.

Sources:
- ``NCCL_SOCKET_IFNAME`` syntax (prefix list, ``^`` excludes, ``=`` exact) and the default that
  skips ``lo`` and ``docker*``: NCCL user guide, Environment Variables,
  https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-socket-ifname
- NCCL loads its network plugin ``libnccl-net.so`` (or ``libnccl-net-<NCCL_NET_PLUGIN>.so``) through
  the dynamic loader, so through ``LD_LIBRARY_PATH``; when none loads it uses its internal IB or
  Socket transport: same guide, ``NCCL_NET_PLUGIN``.
- ``NCCL_DEBUG=INFO`` prints ``Using network <name>`` once the transport is chosen (seen in NCCL
  2.18-2.27 logs; aws-ofi-nccl's transport names itself ``Libfabric``, ``AWS Libfabric`` or
  ``OFI`` depending on version, see its src/nccl_ofi_interface_nvidia.cpp).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping

from hpcflow.check_result import CheckResult, fail, ok, warn
from hpcflow.nccl.netlog import describe, efa_problems, parse_nccl_info
from hpcflow.spec.socket_ifname import judge_socket_ifname


def check_socket_ifname(env: Mapping[str, str], interfaces: Iterable[str]) -> CheckResult:
    """Fail when ``NCCL_SOCKET_IFNAME`` lets NCCL pick the loopback or a container bridge
    (:func:`hpcflow.spec.socket_ifname.judge_socket_ifname`)."""
    names = list(interfaces)
    verdict = judge_socket_ifname(env.get("NCCL_SOCKET_IFNAME"), names)
    unreachable = verdict.unreachable_message()
    if unreachable is not None:
        return fail("nccl-ifname", *unreachable)
    if not verdict.good:
        return fail("nccl-ifname", f"{verdict.shown} matches none of this node's interfaces "
                    f"({', '.join(names) or 'none'})",
                    "unset NCCL_SOCKET_IFNAME or set it to the host's interface prefix, e.g. ens")
    return ok("nccl-ifname", f"{verdict.shown}: NCCL may use {', '.join(verdict.good)}")


def loader_conf_dirs(read: Callable[[str], str | None], glob: Callable[[str], list[str]],
                     conf: str = "/etc/ld.so.conf", _depth: int = 0) -> list[str]:
    """The directories the dynamic loader's cache names: ``/etc/ld.so.conf`` and the files its
    ``include`` lines name (glibc's is ``include /etc/ld.so.conf.d/*.conf``), in order, comments
    and blank lines dropped (ldconfig(8), FILES; ld.so.conf syntax as glibc's ldconfig reads
    it: one directory per line, ``include <glob>`` relative to the file's folder).

    Args:
        read: file reader returning None for a missing file (``Probe.read``).
        glob: glob expansion, sorted (``Probe.glob``).
        conf: the file to start from.

    Returns:
        The directories, without duplicates. Without ``/etc/ld.so.conf`` the
        ``/etc/ld.so.conf.d/*.conf`` files are read all the same.
    """
    text = read(conf)
    if text is None and _depth == 0:
        text = "include /etc/ld.so.conf.d/*.conf"
    out: list[str] = []
    for raw in (text or "").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("include ") and _depth < 4:
            pattern = line.split(None, 1)[1].strip()
            if not pattern.startswith("/"):
                pattern = f"{conf.rsplit('/', 1)[0]}/{pattern}"
            for path in glob(pattern):
                out.extend(d for d in loader_conf_dirs(read, glob, path, _depth + 1)
                           if d not in out)
        elif line.startswith("/") and line not in out:
            out.append(line)
    return out


def check_plugin_path(env: Mapping[str, str],
                      listdir: Callable[[str], list[str]] | None = None,
                      conf_dirs: Iterable[str] = (), *,
                      efa_expected: bool | None = None) -> CheckResult:
    """Where NCCL's loader finds its net plugin (``libnccl-net*.so``): ``LD_LIBRARY_PATH``
    first, then the directories of the loader's cache (:func:`loader_conf_dirs`).

    Fail when an aws-ofi-nccl directory on ``LD_LIBRARY_PATH`` does not exist and no plugin is
    found elsewhere (NCCL then silently uses sockets), or when no plugin is found at all on an
    EFA instance (``efa_expected``); warn when none is found and EFA is not known to be there.

    Args:
        env: the environment (``LD_LIBRARY_PATH``, ``LD_PRELOAD``, ``NCCL_NET_PLUGIN``).
        listdir: directory lister (``os.listdir`` by default), injectable for tests; raises
            OSError for a missing directory.
        conf_dirs: the loader cache's directories (from ``/etc/ld.so.conf.d``).
        efa_expected: the node's instance type has EFA (None: not known).
    """
    listdir = listdir or os.listdir
    path = [p for p in env.get("LD_LIBRARY_PATH", "").split(":") if p]
    plugin = env.get("NCCL_NET_PLUGIN")
    want = re.compile(rf"^libnccl-net(-{re.escape(plugin)})?\.so" if plugin else r"^libnccl-net.*\.so")
    missing, found = [], []
    for d in [*path, *(c for c in conf_dirs if c not in path)]:
        try:
            files = listdir(d)
        except OSError:
            if d in path and re.search(r"ofi|nccl", d, re.I):
                missing.append(d)
            continue
        found.extend((d, f"{d}/{f}") for f in files if want.match(f))
    if missing and not found:
        return fail("nccl-plugin", f"LD_LIBRARY_PATH names {', '.join(missing)}, which does not "
                    "exist: NCCL finds no network plugin there and quietly uses TCP sockets",
                    "point LD_LIBRARY_PATH at the plugin the EFA installer ships "
                    "(/opt/amazon/ofi-nccl/lib or its x86_64-linux-gnu subfolder) or at the one "
                    "bootstrap step 20-nccl built (/opt/hpcflow/aws-ofi-nccl/<version>/lib)")
    if "libnccl-net" in env.get("LD_PRELOAD", ""):
        return warn("nccl-plugin", "LD_PRELOAD loads the NCCL net plugin: a workaround for old "
                    "setups that hides which plugin NCCL really uses",
                    "drop it from LD_PRELOAD and put the plugin's directory on LD_LIBRARY_PATH")
    if not found:
        level = fail if efa_expected else warn
        searched = "LD_LIBRARY_PATH" + (" or in ld.so.conf.d" if conf_dirs else "")
        return level("nccl-plugin", f"no libnccl-net*.so on {searched}: NCCL will use its "
                     "internal transports (TCP sockets on EFA nodes)",
                     "add the aws-ofi-nccl lib directory (e.g. /opt/amazon/ofi-nccl/lib) to "
                     "LD_LIBRARY_PATH, or run bootstrap step nccl (it registers the plugin in "
                     "/etc/ld.so.conf.d)")
    d, first = found[0]
    via = "LD_LIBRARY_PATH" if d in path else "the loader's cache (ld.so.conf.d)"
    message = f"NCCL net plugin found through {via}: {first}"
    if missing:
        return warn("nccl-plugin", f"{message}; LD_LIBRARY_PATH also names "
                    f"{', '.join(missing)}, which does not exist",
                    "drop the missing entries from LD_LIBRARY_PATH")
    return ok("nccl-plugin", message)


def check_nccl_debug_output(text: str, efa_expected: bool | None = None) -> CheckResult:
    """Read ``NCCL_DEBUG=INFO`` output (:func:`hpcflow.nccl.netlog.parse_nccl_info`) and judge the
    transport NCCL chose.

    On an EFA instance (``efa_expected`` True, or None: not known, judged as if it were) each of
    these is a FAIL: NCCL's Socket transport, aws-ofi-nccl on a TCP provider (``Selected Provider
    is tcp``), a bootstrap on ``lo``, and "no plugin found". Without EFA (False) sockets pass.
    """
    choice = parse_nccl_info(text)
    where = "on an EFA instance" if efa_expected else "(EFA assumed)"
    if efa_expected is False:
        if choice.transport == "unknown":
            return warn("nccl-transport", "no 'Using network' line in the output (was "
                        "NCCL_DEBUG=INFO set, and did NCCL initialise?)", "rerun with NCCL_DEBUG=INFO")
        return ok("nccl-transport", f"NCCL used network {choice.net!r} (no EFA on this instance)")
    problems = efa_problems(choice)
    if not problems and choice.net is None and "NET/Socket" in text and "NET/OFI" not in text:
        problems.append("NCCL set up its Socket transport (NET/Socket) and no OFI plugin")
    if problems:
        return fail("nccl-transport", f"traffic goes over TCP, not EFA {where}: "
                    + "; ".join(problems) + "; look for 'NET/OFI' errors just above in the log",
                    "make sure the aws-ofi-nccl plugin is on the loader's path (LD_LIBRARY_PATH or "
                    "/etc/ld.so.conf.d + ldconfig), `fi_info -p efa` lists devices and "
                    "NCCL_SOCKET_IFNAME excludes lo; run `hpcflow doctor` on the node")
    if choice.transport == "efa":
        return ok("nccl-transport", describe(choice))
    if choice.transport == "ofi":
        return warn("nccl-transport", f"NCCL used network {choice.net!r}, but the libfabric "
                    "provider is not in the output", "rerun with NCCL_DEBUG=INFO "
                    "NCCL_DEBUG_SUBSYS=INIT,NET and look for 'Selected Provider is efa'")
    if choice.net is not None:
        return warn("nccl-transport", f"NCCL used network {choice.net!r}, not the OFI plugin",
                    "on EFA nodes load aws-ofi-nccl (LD_LIBRARY_PATH)")
    return warn("nccl-transport", "no 'Using network' line in the output (was NCCL_DEBUG=INFO "
                "set, and did NCCL initialise?)", "rerun with NCCL_DEBUG=INFO")
