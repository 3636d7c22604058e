"""hpcflow bootstrap's pure parts: host and step parsing, the remote command line, the tarball."""

from __future__ import annotations

import io
import shlex
import tarfile
from pathlib import Path

import pytest

from hpcflow.errors import SpecError
from hpcflow.remote.bootstrap import Host, bootstrap_tarball, parse_hosts, parse_steps, remote_command

BOOTSTRAP = Path(__file__).resolve().parents[3] / "bootstrap"


def test_hosts_with_ports_users_and_hostlists():
    hosts = parse_hosts("a,b:2222,admin@gpu-[1-2]:2200", default_user="ec2-user")
    assert hosts == [Host("a", 22, "ec2-user"), Host("b", 2222, "ec2-user"),
                     Host("gpu-1", 2200, "admin"), Host("gpu-2", 2200, "admin")]
    assert hosts[2].label == "admin@gpu-1:2200" and Host("a").label == "a"


@pytest.mark.parametrize(("text", "message"), [
    ("", "--hosts: empty"),
    ("a b", "--hosts: 'a b' is not a host"),
    ("a:70000", "port 70000 is not in 1-65535"),
    ("a,a", "--hosts: a given twice"),
    ("n[3-1]", "--hosts: 'n[3-1]'"),
])
def test_bad_hosts_are_named(text, message):
    with pytest.raises(SpecError) as err:
        parse_hosts(text)
    assert message in str(err.value)


def test_steps_default_to_all_but_enroot_pyxis_and_unknown_ones_are_refused():
    assert parse_steps(None) == ["efa", "nccl", "nccl-tests", "healthcheck"]
    assert parse_steps("enroot-pyxis") == ["enroot-pyxis"]
    assert parse_steps("nccl,efa") == ["nccl", "efa"]
    with pytest.raises(SpecError, match="--steps: 'cuda' not allowed; allowed: efa,nccl"):
        parse_steps("efa,cuda")


def test_remote_command_quotes_every_value():
    cmd = remote_command("/tmp/hpcflow-bootstrap.abc", ["efa"], ["--prefix", "/x/it's $(rm -rf ~)"])
    # the hostile prefix reaches bash as one literal argument
    inner = cmd.split("; then ", 1)[1].split(" 2>&1; else", 1)[0]
    assert shlex.split(inner) == ["bash", "/tmp/hpcflow-bootstrap.abc/bootstrap/hpcflow-bootstrap.sh",
                                  "--steps", "efa", "--prefix", "/x/it's $(rm -rf ~)"]
    assert "sudo -n" in cmd


def test_tarball_holds_the_scripts_with_their_modes():
    with tarfile.open(fileobj=io.BytesIO(bootstrap_tarball(BOOTSTRAP)), mode="r:gz") as tar:
        names = set(tar.getnames())
    assert {"bootstrap/hpcflow-bootstrap.sh", "bootstrap/lib/common.sh",
            "bootstrap/steps/10-efa.sh", "bootstrap/prolog/hpcflow-health.sh"} <= names
