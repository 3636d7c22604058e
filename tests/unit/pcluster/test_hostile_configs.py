"""Hostile and mistaken input to ``hpcflow cluster ...``: every one exits non-zero with a message
naming the argument or field, the value and what is allowed; no traceback; no file left behind;
``--json`` always answers in the envelope."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from hpcflow.cli.main import cli
from hpcflow.resources import data_dir

P5 = data_dir("pcluster_configs") / "p5-fsx.spec.yaml"
P5_CONFIG = data_dir("pcluster_configs") / "p5-fsx.cluster.yaml"


def _run(*args: str):
    r = CliRunner().invoke(cli, list(args))
    assert "Traceback" not in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    return r


def _json_error(r) -> dict:
    doc = json.loads(r.output)
    assert doc["ok"] is False and doc["data"] is None
    assert r.exit_code == doc["error"]["exit_code"] != 0
    return doc["error"]


@pytest.mark.parametrize("args", [
    pytest.param(("render", "{d}"), id="render"),
    pytest.param(("validate", "{d}"), id="validate"),
    pytest.param(("cost", "{d}", "--hours", "1"), id="cost"),
])
def test_a_directory_as_the_spec_is_a_json_error(tmp_path: Path, args):
    r = _run("cluster", *(a.format(d=tmp_path) for a in args), "--json")
    err = _json_error(r)
    assert err["type"] == "SpecError" and "is a directory" in err["message"]


@pytest.mark.parametrize("hours", ["0", "-3", "abc", "nan", "inf"])
def test_bad_hours_is_a_json_error_naming_the_option(hours: str):
    r = _run("cluster", "cost", str(P5), "--hours", hours, "--json")
    err = _json_error(r)
    assert err["exit_code"] == 2
    assert f"--hours: {hours!r} is not allowed" in err["message"] and "above 0" in err["message"]


@pytest.mark.parametrize("command", ["render", "cost"])
def test_an_empty_spec_file_says_it_is_empty(tmp_path: Path, command: str):
    spec = tmp_path / "cluster.spec.yaml"
    spec.write_text("# nothing yet\n")
    extra = ("--hours", "1") if command == "cost" else ("-o", str(tmp_path / "out.yaml"))
    r = _run("cluster", command, str(spec), *extra)
    assert r.exit_code == 2
    assert "the file is empty" in r.output and "region, head_node and queues" in r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cluster.spec.yaml"]


def test_an_empty_config_file_says_it_is_empty(tmp_path: Path):
    path = tmp_path / "cluster.yaml"
    path.write_text("")
    r = _run("cluster", "validate", str(path))
    assert r.exit_code == 2 and "the file is empty" in r.output


def test_output_in_a_missing_directory_names_it_and_writes_nothing(tmp_path: Path):
    r = _run("cluster", "render", str(P5), "-o", str(tmp_path / "nodir" / "cluster.yaml"),
             "--json")
    err = _json_error(r)
    assert err["exit_code"] == 1
    assert f"{str(tmp_path / 'nodir')!r} does not exist" in err["message"]
    assert ".tmp" not in err["message"]
    assert list(tmp_path.iterdir()) == []


def test_output_that_is_a_directory_is_refused(tmp_path: Path):
    r = _run("cluster", "render", str(P5), "-o", str(tmp_path))
    assert r.exit_code == 1 and "is a directory" in r.output
    assert list(tmp_path.iterdir()) == []


def test_output_through_a_symlink_updates_the_target_and_keeps_the_link(tmp_path: Path):
    target = tmp_path / "real.yaml"
    target.write_text("old\n")
    link = tmp_path / "cluster.yaml"
    link.symlink_to(target)
    r = _run("cluster", "render", str(P5), "-o", str(link))
    assert r.exit_code == 0, r.output
    assert link.is_symlink() and yaml.safe_load(target.read_text())["Region"] == "us-east-1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cluster.yaml", "real.yaml"]


def test_output_to_a_fifo_writes_into_it_and_never_replaces_it(tmp_path: Path):
    """Renaming a temp file over a device or a FIFO (``-o /dev/stdout``) would replace the node
    itself; run as root on ``/dev/full`` it replaced the device with a regular file."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    r = _run("cluster", "render", str(P5), "-o", str(fifo))
    reader.join(timeout=30)
    assert r.exit_code == 0, r.output
    assert fifo.is_fifo()
    assert got and yaml.safe_load(got[0])["Region"] == "us-east-1"


@pytest.mark.parametrize("value, expected", [
    pytest.param("P5.48XLARGE", "not an EC2 instance type (lowercase family.size): expected e.g. "
                 "'p5.48xlarge'; did you mean 'p5.48xlarge'?", id="uppercase"),
    pytest.param("p5 48xlarge", "not an EC2 instance type", id="space"),
])
def test_malformed_instance_type_says_what_is_expected(tmp_path: Path, base_spec, value, expected):
    base_spec["queues"][0]["compute"][0]["instance_type"] = value
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump(base_spec))
    r = _run("cluster", "render", str(spec))
    assert r.exit_code == 2
    assert f"queues[0].compute[0].instance_type: {value!r}: {expected}" in r.output


@pytest.mark.parametrize("field, value, expected", [
    pytest.param("region", "us-east-01", "not an AWS region aws-parallelcluster supports: "
                 "expected e.g. 'us-east-1'; did you mean 'us-east-1'?", id="region"),
    pytest.param("region", "us-east-9", "not an AWS region aws-parallelcluster supports",
                 id="unknown-region"),
    pytest.param("name", "my_cluster", "not a cluster name", id="cluster-name"),
    pytest.param("s3_access", [{"bucket": "s3://ckpt"}], "no s3:// prefix", id="bucket-url"),
])
def test_malformed_ids_say_what_is_expected(tmp_path: Path, base_spec, field, value, expected):
    base_spec[field] = value
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump(base_spec))
    r = _run("cluster", "render", str(spec), "--json")
    assert expected in _json_error(r)["message"]


def test_deep_without_aws_is_an_aws_error_not_a_config_problem(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    r = _run("cluster", "validate", str(P5_CONFIG), "--deep", "--endpoint-url",
             "http://127.0.0.1:9", "--json")
    err = _json_error(r)
    assert (err["type"], err["exit_code"]) == ("Ec2Error", 7)
    assert "--deep" in err["message"] and "http://127.0.0.1:9" in err["message"]
    assert "without --deep" in err["message"]


def test_ec2_error_lives_in_errors_with_exit_code_7():
    from hpcflow.aws import instances
    from hpcflow.errors import Ec2Error, HpcflowError

    assert instances.Ec2Error is Ec2Error and issubclass(Ec2Error, HpcflowError)
    assert Ec2Error.exit_code == 7


def test_render_without_aws_parallelcluster_says_how_to_install_it(monkeypatch, tmp_path: Path):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "pcluster" else real(name, *a))
    out = tmp_path / "cluster.yaml"
    r = _run("cluster", "render", str(P5), "-o", str(out))
    assert r.exit_code == 1
    assert "pip install 'hpcflow[aws]'" in r.output and "'pcluster'" in r.output
    assert not out.exists()


def test_output_through_a_symlink_to_a_pipe_writes_into_the_pipe(tmp_path: Path):
    """``-o /dev/stdout`` is a symlink to ``/proc/self/fd/1``, itself a link to a pipe."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "stdout"
    link.symlink_to(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    r = _run("cluster", "render", str(P5), "-o", str(link))
    reader.join(timeout=30)
    assert r.exit_code == 0, r.output
    assert link.is_symlink() and fifo.is_fifo()
    assert got and got[0].startswith("# ParallelCluster v3 config generated by hpcflow")


@pytest.mark.parametrize("name", [
    pytest.param("loop", id="symlink-loop"),
    pytest.param("x" * 300, id="name-too-long"),
])
def test_an_unusable_output_name_is_exit_2_naming_the_option(tmp_path: Path, name: str):
    (tmp_path / "loop").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop")
    for command in ("render", "import"):
        source = P5 if command == "render" else P5_CONFIG
        r = _run("cluster", command, str(source), "-o", str(tmp_path / name))
        assert r.exit_code == 2, r.output
        assert "-o " in r.output and "cannot be used as the output file" in r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loop", "loop2"]


def test_a_huge_node_count_is_refused_naming_the_field(tmp_path: Path):
    spec = yaml.safe_load(P5.read_text())
    spec["queues"][0]["compute"][0]["max_nodes"] = 10**400
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump(spec))
    for args in (("render", str(path), "-o", str(tmp_path / "out.yaml")),
                 ("cost", str(path), "--hours", "1")):
        r = _run("cluster", *args)
        assert r.exit_code == 2, r.output
        assert "queues[0].compute[0].max_nodes" in r.output and "100000" in r.output
    assert not (tmp_path / "out.yaml").exists()


def test_output_to_dev_stdout_works_through_a_pipe():
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "hpcflow", "cluster", "render", str(P5), "-o",
                           "/dev/stdout"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "\nRegion: " in proc.stdout and "Scheduling:" in proc.stdout


def test_a_reader_that_leaves_early_is_no_error():
    import subprocess
    import sys

    proc = subprocess.run(
        # The reader is gone before the first write (`true` exits at once, the writer starts a
        # second later), so the write always fails, whatever the pipe buffer's size.
        ["bash", "-c",
         f"set -o pipefail; {{ sleep 1; exec {sys.executable} -m hpcflow cluster instances; }} | true"],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 141  # SIGPIPE's status, as a shell reports it
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
