"""docs/checkpoints.md says only what the code does: its spec block validates, and its commands
run against a moto S3 server (bucket and prefix of the doc) and do what the text says."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml
from mirror_helpers import PY, child_env, commit_fake, s3_env

from hpcflow.mirror import local, store, watch
from hpcflow.spec.job import JobSpec
from hpcflow.spec.loading import validate_model
from hpcflow.spec.s3uri import parse_s3_uri

pytestmark = [pytest.mark.moto]

REPO = Path(__file__).resolve().parents[3]
DOC = (REPO / "docs" / "checkpoints.md").read_text()


def blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", DOC, re.M | re.S)


def test_the_spec_block_is_a_valid_checkpoint_block():
    [block] = blocks("yaml")
    spec = validate_model(JobSpec, {"name": "llm", "time_limit": "01:00:00", "run_dir": "/r",
                                    "program": {"argv": ["/bin/true"]}, **yaml.safe_load(block)},
                          "doc")
    assert spec.checkpoint.s3_uri == "s3://my-bucket/runs/llm-7b" and spec.checkpoint.keep == 3


def test_the_commands_of_the_doc_run(tmp_path, moto_url, monkeypatch):
    for name, value in s3_env(moto_url).items():
        monkeypatch.setenv(name, value)
    client = store.make_client()
    client.create_bucket(Bucket="my-bucket")
    uri = parse_s3_uri("s3://my-bucket/runs/llm-7b")
    source = tmp_path / "source"
    commit_fake(source, 500, {"__0_0.distcp": 4096})
    watch.Mirror(source, uri, 3, client, watch.Ledger(None)).mirror(local.scan_units(source)[0])
    client.put_object(Bucket="my-bucket", Key=uri.key("step_600", "__0_0.distcp"), Body=b"x")
    [list_line, pull_line] = blocks("bash")[0].strip().splitlines()
    cwd = tmp_path / "work"
    cwd.mkdir()
    out = []
    for line in (list_line, pull_line):
        argv = shlex.split(line)
        assert argv[:3] == ["python", "-m", "hpcflow.mirror"]
        print("+", line)
        proc = subprocess.run([PY, *argv[1:]], cwd=cwd, env=child_env(moto_url),
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        out.append(proc.stdout)
    rows = [r.split("\t") for r in out[0].strip().splitlines()]
    assert rows[0] == ["unit", "state", "bytes", "mirrored_at"]
    assert [r[:2] for r in rows[1:]] == [["step_500", "complete"], ["step_600", "incomplete"]]
    [unit] = local.scan_units(cwd / "restored")
    assert unit.name == "step_500"  # the newest complete one, never the incomplete step_600
    assert (unit.path / "__0_0.distcp").read_bytes() == (source / "step_500" / "__0_0.distcp").read_bytes()
