"""doctor on the network path: the loader's ld.so.conf.d is read, settings that work against EFA
are named with their source, and nothing is said about versions that are not known."""

from __future__ import annotations

import pytest
from test_doctor_checks import FakeProbe

from hpcflow.doctor.checks import check_plugin, check_preset
from hpcflow.nccl.checks import loader_conf_dirs
from hpcflow.nccl.presets import Versions

CONF = {"/etc/ld.so.conf": "# system\ninclude /etc/ld.so.conf.d/*.conf\n",
        "/etc/ld.so.conf.d/hpcflow-aws-ofi-nccl.conf": "/opt/amazon/ofi-nccl/lib64\n",
        "/etc/ld.so.conf.d/libc.conf": "/usr/local/lib\n\n# comment\n/usr/local/lib\n"}
DIRS = {"/etc/ld.so.conf.d": ["hpcflow-aws-ofi-nccl.conf", "libc.conf"],
        "/opt/amazon/ofi-nccl/lib64": ["libnccl-net.so"], "/usr/local/lib": []}


def test_the_loaders_directories_come_from_ld_so_conf_and_its_includes():
    probe = FakeProbe(files=CONF, dirs=DIRS)
    assert loader_conf_dirs(probe.read, probe.glob) == ["/opt/amazon/ofi-nccl/lib64",
                                                        "/usr/local/lib"]
    without_main = {k: v for k, v in CONF.items() if k != "/etc/ld.so.conf"}
    probe = FakeProbe(files=without_main, dirs=DIRS)
    assert loader_conf_dirs(probe.read, probe.glob)[0] == "/opt/amazon/ofi-nccl/lib64"


@pytest.mark.parametrize(("env", "files", "itype", "level", "words"), [
    pytest.param({}, CONF, "p5.48xlarge", "pass",
                 ["the loader's cache (ld.so.conf.d)", "lib64/libnccl-net.so"],
                 id="lib64-named-only-in-ld-so-conf-d"),
    pytest.param({}, {}, "p5.48xlarge", "fail", ["no libnccl-net*.so"], id="none-on-efa"),
    pytest.param({}, {}, None, "warn", ["no libnccl-net*.so"], id="none-efa-unknown"),
    pytest.param({"LD_LIBRARY_PATH": "/opt/amazon/ofi-nccl/lib"}, CONF, "p5.48xlarge", "warn",
                 ["found through the loader's cache", "which does not exist"],
                 id="stale-path-entry-but-found"),
])
def test_the_plugin_is_looked_for_where_the_loader_looks(env, files, itype, level, words):
    result = check_plugin(FakeProbe(env=env, files=files, dirs=DIRS), Versions("1.17.3"), itype)
    assert result.level == level, result.message
    for word in words:
        assert word in result.message


@pytest.mark.parametrize(("name", "value", "source"), [
    pytest.param("RDMAV_FORK_SAFE", "1", "efa-cheatsheet.md", id="rdmav-fork-safe"),
    pytest.param("NCCL_NET_GDR_LEVEL", "LOC", "NCCL_NET_GDR_LEVEL", id="gdr-off"),
    pytest.param("NCCL_SOCKET_NTHREADS", "4", "efa-cheatsheet.md", id="socket-threads"),
    pytest.param("NCCL_NSOCKS_PERTHREAD", "8", "efa-cheatsheet.md", id="socks-per-thread"),
])
@pytest.mark.parametrize("itype", ["p4d.24xlarge", "p5.48xlarge"])
def test_settings_that_work_against_efa_are_named_with_their_source(name, value, source, itype):
    env = {"FI_EFA_USE_HUGE_PAGE": "0", name: value}
    result = check_preset(FakeProbe(env=env), itype, Versions("1.17.3"))
    assert result.level == "warn"
    assert f"{name}={value}" in result.message and source in result.message
    assert result.fix == f"unset {name}"


def test_contradictions_are_not_flagged_off_efa():
    env = {"NCCL_SOCKET_NTHREADS": "4", "RDMAV_FORK_SAFE": "1"}
    assert check_preset(FakeProbe(env=env), "g5.xlarge", Versions("1.17.3")).level == "pass"


def test_no_verdict_about_versions_when_the_version_is_unknown():
    env = {"FI_EFA_USE_HUGE_PAGE": "0", "FI_PROVIDER": "efa", "NCCL_PROTO": "simple"}
    result = check_preset(FakeProbe(env=env), "p5.48xlarge", Versions())
    assert "not needed" not in result.message
    assert result.level == "pass"
    assert "FI_PROVIDER, NCCL_PROTO set; whether they are needed depends on the aws-ofi-nccl " \
           "version, which is unknown" in result.message
