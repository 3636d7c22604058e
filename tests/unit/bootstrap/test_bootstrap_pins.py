"""``hpcflow-bootstrap.sh --from-s3``: only an ``s3://`` prefix, and every fetched file checked
against the sha256 pinned in the entry script before it is used (docs/admin-guide.md, "As a
ParallelCluster custom action"). A fake ``aws`` serves a local folder as the bucket.

The pins are kept equal to the files here (``HPCFLOW_REGEN_GOLDEN=1`` rewrites them).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
BOOTSTRAP = REPO / "bootstrap"
ENTRY = BOOTSTRAP / "hpcflow-bootstrap.sh"
FETCHED = ("lib", "steps", "prolog")
BLOCK = re.compile(r"(# pinned-sha256-begin\n)(.*?)(# pinned-sha256-end\n)", re.S)


def pins() -> str:
    files = sorted(p for d in FETCHED for p in (BOOTSTRAP / d).rglob("*")
                   if p.is_file() and "__pycache__" not in p.parts)
    return "".join(f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.relative_to(BOOTSTRAP)}\n"
                   for p in files)


def test_the_pins_are_the_files_sha256():
    text = ENTRY.read_text()
    want = BLOCK.sub(lambda m: m[1] + pins() + m[3], text)
    if os.environ.get("HPCFLOW_REGEN_GOLDEN") == "1" and want != text:
        ENTRY.write_text(want)
        text = want
    assert text == want, ("bootstrap/hpcflow-bootstrap.sh: the pinned sha256 are stale; rerun "
                          "this test with HPCFLOW_REGEN_GOLDEN=1")


FAKE_AWS = """#!/usr/bin/env bash
# aws s3 cp --recursive --only-show-errors s3://B/P/D/ DEST/: copy $FAKE_BUCKET/P/D/ to DEST.
set -euo pipefail
printf '%s\\n' "$*" >>"$FAKE_LOG"
src=${5#s3://*/}
mkdir -p "$6"
cp -R "$FAKE_BUCKET/$src/." "$6"
"""


@pytest.fixture
def node(tmp_path: Path) -> dict:
    """The entry script alone in a folder (as ParallelCluster leaves it), a bucket holding
    bootstrap/ under the prefix ``hpcflow``, and a fake aws on PATH."""
    (tmp_path / "node").mkdir()
    shutil.copy(ENTRY, tmp_path / "node" / ENTRY.name)
    bucket = tmp_path / "bucket"
    shutil.copytree(BOOTSTRAP, bucket / "hpcflow")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "aws").write_text(FAKE_AWS)
    (bin_dir / "aws").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_BUCKET": str(bucket),
           "FAKE_LOG": str(tmp_path / "aws.log")}
    return {"root": tmp_path, "entry": tmp_path / "node" / ENTRY.name, "bucket": bucket,
            "env": env}


def run(node: dict, url: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(node["entry"]), "--from-s3", url, "--steps", "healthcheck",
                           "--dry-run", "--prefix", str(node["root"] / "prefix"),
                           "--instance-type", "p5.48xlarge"],
                          env=node["env"], capture_output=True, text=True, timeout=60)


def test_files_that_match_their_pins_are_put_in_place_and_run(node):
    ran = run(node, "s3://node-scripts/hpcflow")
    assert ran.returncode == 0, ran.stderr
    for rel in ("lib/common.sh", "steps/90-healthcheck.sh", "prolog/hpcflow-health.sh"):
        assert (node["entry"].parent / rel).read_bytes() == (BOOTSTRAP / rel).read_bytes()


@pytest.mark.parametrize("tamper", [
    pytest.param(lambda b: (b / "steps/90-healthcheck.sh").open("a").write(
        'touch "$FAKE_BUCKET/../ran-as-root"\n'), id="a-step-changed"),
    pytest.param(lambda b: (b / "lib/common.sh").open("a").write(
        'touch "$FAKE_BUCKET/../ran-as-root"\n'), id="the-library-changed"),
    pytest.param(lambda b: (b / "steps/50-spot-watch.sh").unlink(), id="a-step-missing"),
])
def test_a_fetched_file_that_does_not_match_its_pin_is_never_used(node, tamper):
    tamper(node["bucket"] / "hpcflow")
    ran = run(node, "s3://node-scripts/hpcflow")
    assert ran.returncode == 1
    assert "do not match the sha256 pinned" in ran.stderr
    assert not (node["root"] / "ran-as-root").exists()
    assert sorted(p.name for p in node["entry"].parent.iterdir()) == [ENTRY.name]


@pytest.mark.parametrize("url", ["/srv/hpcflow", "https://example.org/hpcflow",
                                 "s3://", "s3://Bad_Bucket/x", "s3://b/x y"])
def test_from_s3_takes_only_an_s3_prefix(node, url):
    ran = run(node, url)
    assert ran.returncode == 2 and "give an s3://BUCKET/PREFIX" in ran.stderr
    assert not Path(node["env"]["FAKE_LOG"]).exists()  # aws was never asked
