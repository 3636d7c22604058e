"""Every line of docs/hyperpod.md's bash blocks, in the page's order, in a fresh folder: the
lines that talk to AWS (the aws CLI, create, describe) against a moto server on loopback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hpcflow.resources import data_dir

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "hyperpod"))
from hyperpod_doc import command_lines, needs_aws  # noqa: E402

pytestmark = pytest.mark.moto


def test_the_page_runs_from_spec_to_a_cluster(moto_url, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
               AWS_DEFAULT_REGION="us-east-1", AWS_CONFIG_FILE=str(tmp_path / "none"),
               AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"))
    (tmp_path / "pcluster_configs").symlink_to(data_dir("pcluster_configs"))
    aws = shutil.which("aws", path=str(Path(sys.executable).parent)) or shutil.which("aws")
    assert aws, "the aws CLI is not installed (scripts/install.sh --dev installs it)"
    outputs = []
    for words in command_lines():
        if words[0] == "aws":
            cmd = [aws, "--endpoint-url", moto_url, *words[1:]]
        else:
            cmd = [sys.executable, "-m", "hpcflow", *words[1:]]
            if needs_aws(words):
                cmd += ["--endpoint-url", moto_url]
        print("+", " ".join(cmd))
        proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120)
        print(proc.stdout, proc.stderr, sep="\n")
        assert proc.returncode == 0, words
        outputs.append(proc.stdout)
    assert any("created arn:aws:sagemaker:us-east-1:" in out for out in outputs)
    assert any(out.startswith("train-hp: InService") for out in outputs)
