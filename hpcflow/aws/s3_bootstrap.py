"""Put hpcflow's node bootstrap scripts in S3 for ParallelCluster custom actions.

ParallelCluster downloads only the ``Script`` of a custom action; the entry script then fetches
its steps from the same prefix (``--from-s3``), so every file of ``bootstrap/`` is uploaded under
``s3://<bucket>/<prefix>/``. The S3 client is passed in; :func:`make_s3_client` imports boto3.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcflow.errors import Ec2Error, SpecError
from hpcflow.spec.s3uri import bucket_name_problem

ENTRY = "hpcflow-bootstrap.sh"
DEFAULT_STEPS = "efa,nccl,nccl-tests,healthcheck"
_PREFIX = re.compile(r"^[A-Za-z0-9!_.*'()/-]*$")


@dataclass(frozen=True)
class Uploaded:
    """What :func:`upload_bootstrap` put where, and the custom action that uses it."""

    bucket: str
    prefix: str
    urls: list[str]
    script: str
    args: list[str]

    def spec_snippet(self) -> str:
        """The cluster spec lines (``bootstrap.on_node_configured`` and the read access)."""
        args = ", ".join(f'"{a}"' if "," in a else a for a in self.args)
        return (f"s3_access:\n  - bucket: {self.bucket}\n    write: false\n"
                f"bootstrap:\n  on_node_configured:\n    - script: {self.script}\n"
                f"      args: [{args}]\n")

    def to_dict(self) -> dict:
        return {"bucket": self.bucket, "prefix": self.prefix, "urls": self.urls,
                "script": self.script, "args": self.args, "spec": self.spec_snippet()}


def check_target(bucket: str, prefix: str) -> str:
    """Validate ``--bucket``/``--prefix``; returns the prefix without slashes at the ends.

    Raises:
        SpecError: names the option, the value and what is allowed.
    """
    if (problem := bucket_name_problem(bucket)) is not None:
        raise SpecError(f"--bucket: {bucket!r} is not a valid S3 bucket name: {problem} (S3 "
                        "bucket naming rules)")
    clean = prefix.strip("/")
    if not _PREFIX.match(clean) or "//" in clean:
        raise SpecError(f"--prefix: {prefix!r} is not allowed; use letters, digits and "
                        "!_.*'()-/ without empty parts")
    return clean


def upload_bootstrap(client: Any, root: Path, bucket: str, prefix: str = "hpcflow",
                     steps: str = DEFAULT_STEPS) -> Uploaded:
    """Upload every file under ``root`` (the ``bootstrap/`` folder) to ``s3://bucket/prefix/``.

    Args:
        client: a boto3 S3 client.
        root: the bootstrap folder.
        bucket, prefix: where to put the files.
        steps: the ``--steps`` the printed custom action runs.

    Raises:
        SpecError: bad bucket or prefix, or the bucket does not exist.
        Ec2Error: AWS could not be asked (credentials, network, access denied).
    """

    prefix = check_target(bucket, prefix)
    base = f"{prefix}/" if prefix else ""
    files = sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    urls = []
    for path in files:
        key = base + path.relative_to(root).as_posix()
        urls.append(put_object(client, bucket, key, path.read_bytes(), field="--bucket",
                               content_type="text/x-shellscript" if path.suffix == ".sh"
                               else "text/plain"))
    where = f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"
    return Uploaded(bucket, prefix, urls, f"{where}/{ENTRY}", ["--from-s3", where, "--steps", steps])


def make_s3_client(region: str, endpoint_url: str | None = None) -> Any:
    """A boto3 S3 client (imports boto3)."""
    import boto3
    from botocore.config import Config

    cfg = Config(retries={"max_attempts": 2, "mode": "standard"}, connect_timeout=5, read_timeout=30)
    return boto3.client("s3", region_name=region, endpoint_url=endpoint_url, config=cfg)


def put_object(client: Any, bucket: str, key: str, body: bytes, *, field: str,
               content_type: str | None = None) -> str:
    """``PutObject`` of ``body`` at ``s3://bucket/key``, with hpcflow's errors; returns the URL.

    Args:
        client: a boto3 S3 client.
        field: the spec field or option that named the bucket, for the error.
        content_type: the object's Content-Type, or None for S3's default.

    Raises:
        SpecError: the bucket does not exist (names ``field`` and how to create it).
        Ec2Error: S3 could not be asked or refused the write (credentials, network, access).
    """
    from botocore.exceptions import BotoCoreError, ClientError

    extra = {} if content_type is None else {"ContentType": content_type}
    try:
        client.put_object(Bucket=bucket, Key=key, Body=body, **extra)
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code == "NoSuchBucket":
            word = "bucket " if field != "--bucket" else ""
            raise SpecError(f"{field}: {word}{bucket!r} does not exist; create it first "
                            f"(aws s3 mb s3://{bucket})") from None
        raise Ec2Error(f"S3 PutObject s3://{bucket}/{key} failed: {code}: "
                       f"{exc.response.get('Error', {}).get('Message', exc)}") from None
    except BotoCoreError as exc:
        raise Ec2Error(f"S3 could not be reached: {exc}") from None
    return f"s3://{bucket}/{key}"
