"""Helpers for the mirror tests: committed checkpoints in hpcflow's layouts without torch, an S3
environment that points boto3 at the moto server through ``AWS_ENDPOINT_URL_S3``."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from hpcflow.runtime import commit as ckpt_dirs

PY = sys.executable


def s3_env(moto_url: str) -> dict[str, str]:
    """Environment for boto3 (this process and children): the standard endpoint variable and
    dummy keys that moto accepts (the standard chain reads them)."""
    return {"AWS_ENDPOINT_URL_S3": moto_url, "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def commit_fake(root: Path, step: int, sizes: dict[str, int], seed: int = 0) -> Path:
    """Commit ``step_<step>/`` holding files of the given sizes (random bytes) and DCP's
    ``.metadata``, through the runtime's own commit path."""
    tmp = ckpt_dirs.fresh_tmp_dir(root, step)
    rnd = __import__("random").Random(seed * 1000 + step)
    for rel, size in {**sizes, ckpt_dirs.DCP_METADATA: 64}.items():
        path = tmp / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(rnd.randbytes(size))
    return ckpt_dirs.commit(root, step, world_size=1)


def tree_bytes(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` by relative path, with its content."""
    return {p.relative_to(directory).as_posix(): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def read_events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def child_env(moto_url: str) -> dict[str, str]:
    """This environment plus :func:`s3_env`, with the hpcflow under test importable from any
    working folder."""
    repo = str(Path(__file__).resolve().parents[3])
    path = os.pathsep.join(p for p in (repo, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, **s3_env(moto_url), "PYTHONPATH": path}
