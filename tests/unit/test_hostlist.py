"""Slurm hostlist expressions: expansion, the first host, compression, bad input."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from hpcflow.hostlist import collect_hostlist, expand_hostlist, first_host

P5 = [f"queue-dy-p548xlarge-{i}" for i in range(1, 17)]

CASES = [
    pytest.param("n1", ["n1"], id="plain"),
    pytest.param("n1,n2,login", ["n1", "n2", "login"], id="comma-list"),
    pytest.param("n[1-3]", ["n1", "n2", "n3"], id="range"),
    pytest.param("n[01-03,07]", ["n01", "n02", "n03", "n07"], id="zero-padded-with-single"),
    pytest.param("n[009-011]", ["n009", "n010", "n011"], id="padding-across-a-decade"),
    pytest.param("a[1-2]b[3-4]", ["a1b3", "a1b4", "a2b3", "a2b4"], id="two-bracket-groups"),
    pytest.param(
        "n[1-2],m5,x[08-10]", ["n1", "n2", "m5", "x08", "x09", "x10"], id="mixed-comma-list"
    ),
    pytest.param("gpu-[1-2],n[01-02]", ["gpu-1", "gpu-2", "n01", "n02"], id="dashes-in-names"),
    pytest.param("queue-dy-p548xlarge-[1-16]", P5, id="parallelcluster-dynamic"),
    pytest.param(" n[1-2] ", ["n1", "n2"], id="surrounding-space"),
]


@pytest.mark.parametrize(("expr", "hosts"), CASES)
def test_expand_hostlist(expr: str, hosts: list[str]) -> None:
    assert expand_hostlist(expr) == hosts
    assert first_host(expr) == hosts[0]


@pytest.mark.parametrize(("expr", "hosts"), CASES)
def test_expansion_matches_real_scontrol(expr: str, hosts: list[str]) -> None:
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        pytest.fail("scontrol is not installed: install slurm-wlm (tests/run.sh does)")
    out = subprocess.run(
        [scontrol, "show", "hostnames", expr.strip()],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert out.stdout.split() == hosts


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        pytest.param("", "empty", id="empty"),
        pytest.param("   ", "empty", id="blank"),
        pytest.param("n[1-", "unbalanced", id="unclosed-bracket"),
        pytest.param("n]1[", "unbalanced", id="reversed-brackets"),
        pytest.param("n[3-1]", "start > stop", id="descending-range"),
        pytest.param("n[a-b]", "bad range", id="letters-in-range"),
    ],
)
def test_bad_hostlist_raises_value_error_quoting_it(expr: str, message: str) -> None:
    with pytest.raises(ValueError, match="hostlist") as info:
        expand_hostlist(expr)
    assert message in str(info.value)
    if expr.strip():
        assert repr(expr) in str(info.value)


def test_collect_is_the_inverse_of_expand() -> None:
    hosts = ["n1", "n2", "n3", "gpu-01", "gpu-02"]
    expr = collect_hostlist(hosts)
    assert expr == "gpu-[01-02],n[1-3]"
    assert sorted(expand_hostlist(expr)) == sorted(hosts)


def test_ten_thousand_hosts_expand() -> None:
    hosts = expand_hostlist("node-[00001-10000]")
    assert len(hosts) == 10000
    assert hosts[0] == "node-00001" and hosts[-1] == "node-10000"
