"""The prolog health check: counts from the stubbed nvidia-smi and fi_info against the instance
type, with a recording scontrol stub, then for real on the local Slurm cluster (node n2)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def _install(sandbox, *args: str):
    proc = sandbox.run("steps/90-healthcheck.sh", *args)
    assert proc.returncode == 0, proc.stderr
    return sandbox.root / "opt/slurm/etc/scripts/prolog.d/90-hpcflow-health.sh"


def _prolog(sandbox, prolog, **env: str):
    full = {**sandbox.env, "SLURMD_NODENAME": "n2",
            "HPCFLOW_HEALTH_LOG": str(sandbox.root / "health.log"), **env}
    proc = subprocess.run(["bash", str(prolog)], env=full, capture_output=True, text=True,
                          timeout=60)
    print(proc.stdout, proc.stderr, sep="\n")
    return proc


@pytest.fixture
def fake_scontrol(sandbox):
    path = sandbox.root.parent / "scontrol-calls"
    stub = sandbox.root.parent / "scontrol"
    stub.write_text(f'#!/usr/bin/env bash\nprintf "%s\\n" "$*" >>"{path}"\n')
    stub.chmod(0o755)
    return stub, path


@pytest.mark.parametrize(("gpus", "efa", "reason"), [
    pytest.param("8", "32", None, id="healthy"),
    pytest.param("7", "32", "GPUs 7/8", id="missing-gpu"),
    pytest.param("8", "31", "EFA 31/32", id="missing-efa"),
    pytest.param("0", "0", "GPUs 0/8 EFA 0/32", id="nothing"),
])
def test_prolog_drains_a_node_short_of_gpus_or_efa(sandbox, fake_scontrol, gpus, efa, reason):
    stub, calls = fake_scontrol
    prolog = _install(sandbox, "--instance-type", "p5.48xlarge")
    proc = _prolog(sandbox, prolog, HPCFLOW_STUB_GPUS=gpus, HPCFLOW_STUB_EFA=efa,
                   HPCFLOW_SCONTROL=str(stub))
    if reason is None:
        assert proc.returncode == 0
        assert "ok: p5.48xlarge: 8 GPUs, 32 EFA devices" in proc.stderr
        assert not calls.exists()
    else:
        assert proc.returncode == 1
        assert calls.read_text().splitlines() == [
            f"update NodeName=n2 State=DRAIN Reason=hpcflow-health p5.48xlarge: {reason}"]
        assert reason in (sandbox.root / "health.log").read_text()


def test_prolog_expect_overrides_the_instance_type(sandbox, fake_scontrol):
    stub, calls = fake_scontrol
    prolog = _install(sandbox, "--instance-type", "g6.12xlarge", "--expect-efa", "0")
    proc = _prolog(sandbox, prolog, HPCFLOW_STUB_GPUS="4", HPCFLOW_STUB_EFA="0",
                   HPCFLOW_SCONTROL=str(stub))
    assert proc.returncode == 0, proc.stderr
    assert not calls.exists()


def test_prolog_unknown_instance_type_warns_and_passes(sandbox, fake_scontrol):
    stub, calls = fake_scontrol
    prolog = _install(sandbox, "--instance-type", "x9.huge")
    proc = _prolog(sandbox, prolog, HPCFLOW_SCONTROL=str(stub))
    assert proc.returncode == 0
    assert "no expected figures for instance type 'x9.huge'" in proc.stderr
    assert not calls.exists()


def test_healthcheck_rejects_a_non_numeric_figure(sandbox):
    proc = sandbox.run("steps/90-healthcheck.sh", "--expect-gpus", "eight")
    assert proc.returncode == 1
    assert "'eight' is not a whole number" in proc.stderr


def _node(name: str) -> dict[str, str]:
    out = subprocess.run(["scontrol", "show", "node", name], capture_output=True, text=True,
                         check=True, timeout=30).stdout
    fields = {}
    for tok in out.replace("\n", " ").split(" "):
        if "=" in tok:
            k, _, v = tok.partition("=")
            fields.setdefault(k, v)
    fields["_raw"] = out
    return fields


@pytest.mark.slurm
@pytest.mark.cluster_alone
def test_missing_gpu_drains_the_node_on_the_local_cluster(sandbox):
    """The installed prolog, run as slurmd would on node n2 with one GPU missing, drains n2 on the
    real local cluster with its reason; n2 is resumed at once whatever happens."""
    assert shutil.which("scontrol"), "scontrol not found: the local Slurm cluster is required"
    before = _node("n2")
    assert "DRAIN" not in before["State"], f"n2 is already drained by someone else:\n{before['_raw']}"
    prolog = _install(sandbox, "--instance-type", "p5.48xlarge")
    drained = False
    try:
        proc = _prolog(sandbox, prolog, HPCFLOW_STUB_GPUS="7", HPCFLOW_STUB_EFA="32")
        drained = True
        assert proc.returncode == 1
        node = _node("n2")
        assert "DRAIN" in node["State"], node["_raw"]
        assert "hpcflow-health p5.48xlarge: GPUs 7/8" in node["_raw"]
    finally:
        if drained:
            subprocess.run(["scontrol", "update", "NodeName=n2", "State=RESUME"], check=False,
                           timeout=30)
    assert "DRAIN" not in _node("n2")["State"]


def test_the_imds_token_is_never_on_a_command_line(sandbox, imds, tmp_path):
    """The type comes from IMDSv2 when nothing names it; curl's argv (what ps(1) shows every
    user) carries no token, and no proxy from the environment is asked."""
    import json
    import urllib.request

    urllib.request.urlopen(urllib.request.Request(
        imds.url + "/_fake/instance-type", data=json.dumps({"type": "p5.48xlarge"}).encode(),
        method="POST"), timeout=5).read()
    calls, stubs = tmp_path / "curl-argv", tmp_path / "curl-stub"
    stubs.mkdir()
    real = shutil.which("curl")
    (stubs / "curl").write_text(f'#!/usr/bin/env bash\nprintf "%s\\n" "$*" >>"{calls}"\n'
                                f'exec {real} "$@"\n')
    (stubs / "curl").chmod(0o755)
    prolog = Path(__file__).resolve().parents[3] / "bootstrap" / "prolog" / "hpcflow-health.sh"
    proc = _prolog(sandbox, prolog, HPCFLOW_IMDS_ENDPOINT=imds.url,
                   HPCFLOW_HEALTH_CONF=str(tmp_path / "none.env"),
                   PATH=f"{stubs}:{sandbox.env['PATH']}", http_proxy="http://127.0.0.1:9",
                   HTTP_PROXY="http://127.0.0.1:9")
    assert proc.returncode == 0, proc.stderr
    assert "ok: p5.48xlarge: 8 GPUs, 32 EFA devices" in proc.stderr
    argv = calls.read_text()
    tokens = list(imds.state.tokens)
    assert len(tokens) == 1 and argv.count("\n") == 2
    assert tokens[0] not in argv and "X-aws-ec2-metadata-token:" not in argv
