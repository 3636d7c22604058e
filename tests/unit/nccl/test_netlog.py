"""The NCCL INFO log parser: which network NCCL chose. The lines follow NCCL's and aws-ofi-nccl's
format strings (see hpcflow/nccl/netlog.py for each source); written for these tests."""

from __future__ import annotations

import pytest

from hpcflow.nccl.netlog import describe, efa_problems, parse_nccl_info

P = "node-1:4711:4711 [0] NCCL INFO "

EFA_2_27 = [
    P + "Bootstrap: Using ens32:10.1.2.3<0>",
    P + "NET/Plugin: Loaded net plugin Libfabric (v10)",
    P + "NET/OFI Initializing aws-ofi-nccl 1.17.3",
    P + "NET/OFI Using Libfabric version 2.1",
    P + "NET/OFI Selected provider is efa, fabric is efa-direct (found 32 nics)",
    P + "Using network Libfabric",
    P + "ncclCommInitRankConfig comm 0x55d0 rank 0 nranks 16 cudaDev 0 - Init COMPLETE",
]
EFA_2_18 = [
    P + "Bootstrap : Using ens32:10.1.2.3<0>",
    P + "NET/Plugin: Loaded net plugin AWS Libfabric (v6)",
    P + "NET/OFI Initializing aws-ofi-nccl 1.7.4-aws",
    P + "NET/OFI Selected Provider is efa (found 4 nics)",
    P + "Using network AWS Libfabric",
]
NO_PLUGIN_2_18 = [
    P + "Bootstrap : Using ens5:10.1.2.3<0>",
    P + "NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: cannot open "
        "shared object file: No such file or directory",
    P + "NET/Plugin : No plugin found, using internal implementation",
    P + "NET/IB : No device found.",
    P + "NET/Socket : Using [0]ens5:10.1.2.3<0>",
    P + "Using network Socket",
]
NO_PLUGIN_2_27 = [
    P + "Bootstrap: Using ens5:10.1.2.3<0>",
    P + "NET/Plugin: Could not find: libnccl-net.so.",
    P + "NET/Plugin: Using internal network plugin.",
    P + "NET/Socket : Using [0]ens5:10.1.2.3<0> [1]ens6:10.1.3.3<0>",
    P + "Using network Socket",
]
OFI_TCP = [
    P + "Bootstrap : Using lo:127.0.0.1<0>",
    P + "NET/Plugin: Loaded net plugin AWS Libfabric (v7)",
    P + "NET/OFI Initializing aws-ofi-nccl 1.9.1-aws",
    P + "NET/OFI Selected Provider is tcp;ofi_rxm (found 1 nics)",
    P + "Using network AWS Libfabric",
]


@pytest.mark.parametrize("lines, want", [
    pytest.param(EFA_2_27, {"transport": "efa", "net": "Libfabric", "plugin": "Libfabric",
                            "plugin_version": "1.17.3", "provider": "efa",
                            "fabric": "efa-direct", "nics": 32, "bootstrap_if": "ens32",
                            "no_plugin": False}, id="efa-nccl-2.27"),
    pytest.param(EFA_2_18, {"transport": "efa", "net": "AWS Libfabric", "provider": "efa",
                            "plugin_version": "1.7.4-aws", "nics": 4, "fabric": None},
                 id="efa-nccl-2.18"),
    pytest.param(NO_PLUGIN_2_18, {"transport": "socket", "no_plugin": True, "plugin": None,
                                  "socket_ifs": ["ens5"], "provider": None},
                 id="no-plugin-2.18"),
    pytest.param(NO_PLUGIN_2_27, {"transport": "socket", "no_plugin": True,
                                  "socket_ifs": ["ens5", "ens6"]}, id="no-plugin-2.27"),
    pytest.param(OFI_TCP, {"transport": "socket", "provider": "tcp", "bootstrap_if": "lo",
                           "nics": 1}, id="ofi-on-tcp-provider"),
    pytest.param([P + "Using network IB"], {"transport": "other", "net": "IB"}, id="ib"),
    pytest.param([P + "NET/Plugin: Loaded net plugin AWS Libfabric (v7)",
                  P + "Using network AWS Libfabric"], {"transport": "ofi", "provider": None},
                 id="ofi-provider-unsaid"),
    pytest.param(["training step 1", "NCCL WARN something", ""], {"transport": "unknown"},
                 id="no-info-lines"),
    pytest.param([P + "Using network Socket", P + "Using network AWS Libfabric"],
                 {"transport": "socket"}, id="first-communicator-wins"),
])
def test_the_parser_reads_the_choice(lines, want):
    got = parse_nccl_info(lines).to_dict()
    assert {k: got[k] for k in want} == want


def test_a_text_and_its_lines_read_the_same():
    assert parse_nccl_info("\n".join(EFA_2_18)) == parse_nccl_info(EFA_2_18)


@pytest.mark.parametrize("lines, words", [
    pytest.param(EFA_2_27, [], id="efa"),
    pytest.param(NO_PLUGIN_2_27, ["Socket transport", "no net plugin"], id="no-plugin"),
    pytest.param(OFI_TCP, ["provider 'tcp'", "loopback"], id="tcp-provider-on-lo"),
])
def test_efa_problems_name_each_sign_of_a_fallback(lines, words):
    problems = efa_problems(parse_nccl_info(lines))
    assert len(problems) == len(words)
    for word, problem in zip(words, problems, strict=True):
        assert word in problem


@pytest.mark.parametrize("lines, instance, text", [
    pytest.param(EFA_2_27, "p5.48xlarge", "NCCL over EFA (aws-ofi-nccl 1.17.3, 32 NICs)",
                 id="efa"),
    pytest.param(NO_PLUGIN_2_18, "p5.48xlarge",
                 "NCCL over TCP sockets: EFA expected on p5.48xlarge", id="socket"),
    pytest.param(OFI_TCP, "p4d.24xlarge", "NCCL over TCP sockets: EFA expected on p4d.24xlarge",
                 id="tcp-provider"),
    pytest.param([], None, "NCCL's network choice not logged (no 'Using network' line)",
                 id="unknown"),
])
def test_the_summary_line(lines, instance, text):
    assert describe(parse_nccl_info(lines), instance) == text
