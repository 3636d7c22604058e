"""The silent-failure checks: interface choice, plugin path, NET/Socket in NCCL's log."""

from __future__ import annotations

import pytest

from hpcflow.nccl.checks import (
    check_nccl_debug_output,
    check_plugin_path,
    check_socket_ifname,
)
from hpcflow.spec.socket_ifname import nccl_usable_interfaces

IFACES = ["lo", "ens32", "ens33", "docker0", "br-1a2b3c"]


@pytest.mark.parametrize(("value", "level", "bad"), [
    pytest.param(None, "fail", "br-1a2b3c", id="unset-with-a-bridge"),
    pytest.param("ens", "pass", None, id="host-prefix"),
    pytest.param("=ens32", "pass", None, id="exact"),
    pytest.param("^docker", "fail", "lo", id="exclude-list-forgets-lo"),
    pytest.param("^lo,docker,br-", "pass", None, id="exclude-all-bad"),
    pytest.param("lo", "fail", "lo", id="loopback"),
    pytest.param("eth", "fail", None, id="matches-nothing"),
])
def test_socket_ifname(value, level, bad):
    env = {} if value is None else {"NCCL_SOCKET_IFNAME": value}
    result = check_socket_ifname(env, IFACES)
    assert result.level == level, result
    if bad:
        assert bad in result.message and "NCCL_SOCKET_IFNAME=" in result.fix
    if level == "fail":
        assert result.fix


def test_unset_ifname_skips_lo_and_docker_like_nccl():
    assert nccl_usable_interfaces(None, ["lo", "ens5", "docker0"]) == ["ens5"]


def _lister(tree):
    def listdir(d):
        if d not in tree:
            raise FileNotFoundError(d)
        return tree[d]
    return listdir


def test_missing_plugin_dir_on_ld_library_path_fails():
    env = {"LD_LIBRARY_PATH": "/usr/lib:/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu"}
    result = check_plugin_path(env, _lister({"/usr/lib": ["libc.so.6"]}))
    assert result.level == "fail"
    assert "/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu" in result.message
    assert "TCP sockets" in result.message


def test_plugin_found_passes():
    env = {"LD_LIBRARY_PATH": "/opt/amazon/ofi-nccl/lib"}
    result = check_plugin_path(env, _lister({"/opt/amazon/ofi-nccl/lib": ["libnccl-net.so"]}))
    assert result.level == "pass" and "libnccl-net.so" in result.message


def test_no_plugin_anywhere_warns():
    result = check_plugin_path({"LD_LIBRARY_PATH": "/usr/lib"}, _lister({"/usr/lib": []}))
    assert result.level == "warn" and "TCP sockets" in result.message


def test_named_plugin_must_match_nccl_net_plugin():
    env = {"LD_LIBRARY_PATH": "/p", "NCCL_NET_PLUGIN": "ofi"}
    assert check_plugin_path(env, _lister({"/p": ["libnccl-net-ofi.so"]})).level == "pass"
    assert check_plugin_path(env, _lister({"/p": ["libnccl-net-other.so"]})).level == "warn"


def test_ld_preload_of_the_plugin_is_a_legacy_warning():
    env = {"LD_LIBRARY_PATH": "/p", "LD_PRELOAD": "/p/libnccl-net.so"}
    assert check_plugin_path(env, _lister({"/p": ["libnccl-net.so"]})).level == "warn"


OFI_LOG = """\
ip-10-0-0-1:4321:4321 [0] NCCL INFO Bootstrap : Using ens32:10.0.0.1<0>
ip-10-0-0-1:4321:4321 [0] NCCL INFO NET/OFI Using aws-ofi-nccl 1.17.3
ip-10-0-0-1:4321:4321 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa (found 32 nics)
ip-10-0-0-1:4321:4321 [0] NCCL INFO Using network Libfabric
"""
SOCKET_LOG = """\
ip-10-0-0-1:4321:4321 [0] NCCL INFO Bootstrap : Using ens32:10.0.0.1<0>
ip-10-0-0-1:4321:4321 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.
ip-10-0-0-1:4321:4321 [0] NCCL INFO NET/IB : No device found.
ip-10-0-0-1:4321:4321 [0] NCCL INFO NET/Socket : Using [0]ens32:10.0.0.1<0>
ip-10-0-0-1:4321:4321 [0] NCCL INFO Using network Socket
"""


@pytest.mark.parametrize(("text", "level"), [
    pytest.param(OFI_LOG, "pass", id="ofi"),
    pytest.param(SOCKET_LOG, "fail", id="socket"),
    pytest.param(SOCKET_LOG.replace("NCCL INFO Using network Socket\n", ""), "fail",
                 id="socket-without-using-line"),
    pytest.param("hello\n", "warn", id="no-nccl-output"),
])
def test_nccl_debug_output(text, level):
    assert check_nccl_debug_output(text).level == level


L = "n1:1:1 [0] NCCL INFO "
TCP_ON_LO = (f"{L}Bootstrap : Using lo:127.0.0.1<0>\n"
             f"{L}NET/OFI Selected Provider is tcp (found 1 nics)\n"
             f"{L}Using network AWS Libfabric\n")


@pytest.mark.parametrize(("text", "efa", "level", "words"), [
    pytest.param(TCP_ON_LO, True, "fail", ["provider 'tcp'", "loopback"],
                 id="tcp-provider-and-lo-bootstrap"),
    pytest.param(f"{L}Bootstrap : Using lo:127.0.0.1<0>\n{L}NET/OFI Selected Provider is efa "
                 f"(found 32 nics)\n{L}Using network AWS Libfabric\n", True, "fail",
                 ["loopback"], id="lo-bootstrap-alone"),
    pytest.param(f"{L}NET/Plugin : No plugin found (libnccl-net.so), using internal "
                 "implementation\n", True, "fail", ["no net plugin"], id="no-plugin-alone"),
    pytest.param(SOCKET_LOG, True, "fail", ["Socket transport"], id="socket-on-efa"),
    pytest.param(SOCKET_LOG, False, "pass", ["no EFA on this instance"], id="socket-without-efa"),
    pytest.param(TCP_ON_LO, None, "fail", ["EFA assumed"], id="efa-unknown-judged-as-efa"),
    pytest.param(OFI_LOG, True, "pass", ["NCCL over EFA", "32 NICs"], id="efa"),
])
def test_every_sign_of_tcp_on_an_efa_instance_fails(text, efa, level, words):
    result = check_nccl_debug_output(text, efa)
    assert result.level == level, result.message
    for word in words:
        assert word in result.message
