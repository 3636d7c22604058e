"""The S3 side of two-phase checkpoints: upload a unit and confirm it, write its record last,
find complete mirrors, keep the last k, pull one back bit-exact.

S3 layout under ``s3://bucket/prefix/``::

    <unit>/<file>...             the unit's files, same relative paths as on disk
    <unit>/hpcflow-mirror.json   the mirror's commit record, written only after every object
                                 was confirmed (size and SHA-256 checksum); readers trust only
                                 units that have it

``<unit>`` is the local name (``step_12``, ``checkpoint-12``, ``step_12.ckpt``; see
:mod:`hpcflow.mirror.local`). Transfers use boto3's managed transfer (``TransferManager``:
multipart above a threshold, parts and files in parallel; boto3 docs, "File transfer
configuration"). Objects are uploaded with ``ChecksumAlgorithm='SHA256'``: S3 checks every part
on arrival, and ``HeadObject`` with ``ChecksumMode='ENABLED'`` returns the checksum we compare.
Needs boto3 (the ``aws`` extra), imported inside the functions.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcflow.fsutil import fsync_dir
from hpcflow.mirror import local
from hpcflow.spec.s3uri import S3Uri

RECORD_NAME = "hpcflow-mirror.json"
RECORD_FORMAT = "hpcflow-s3-mirror/1"
#: The most of a mirror record object that is read: 32 MiB, far above a real one (one line per
#: file of a checkpoint), so an object planted under the prefix cannot fill memory.
RECORD_MAX_BYTES = 32 * 1024 * 1024
MiB = 1024 * 1024


@dataclass(frozen=True)
class TransferSettings:
    """How objects move (boto3 ``TransferConfig``).

    Attributes:
        threshold_bytes: files this large or larger go up in parts.
        part_bytes: the part size asked for (s3transfer raises it when a file would need more
            than 10,000 parts; S3 allows 5 MiB to 5 GiB per part).
        concurrency: parts and files in flight at once.
        max_bandwidth_bps: bytes per second cap for the whole transfer, or None.
    """

    threshold_bytes: int = 8 * MiB
    part_bytes: int = 8 * MiB
    concurrency: int = 4
    max_bandwidth_bps: int | None = None

    def boto_config(self) -> Any:
        from boto3.s3.transfer import TransferConfig

        return TransferConfig(multipart_threshold=self.threshold_bytes,
                              multipart_chunksize=self.part_bytes,
                              max_concurrency=self.concurrency, use_threads=True,
                              max_bandwidth=self.max_bandwidth_bps)

    def part_size_for(self, size_bytes: int) -> int:
        """The part size s3transfer will really use for a file of ``size_bytes``."""
        from s3transfer.utils import ChunksizeAdjuster

        return ChunksizeAdjuster().adjust_chunksize(self.part_bytes, size_bytes)


@dataclass(frozen=True)
class Mirrored:
    """A complete mirror (its record read back from S3).

    Attributes:
        name: the unit's name; step: its step; layout: ``hpcflow``, ``hf`` or ``lightning``.
        record: the record as stored.
    """

    name: str
    step: int
    layout: str
    record: dict[str, Any] = field(repr=False)

    @property
    def total_bytes(self) -> int:
        return int(self.record.get("total_bytes", 0))


class MirrorError(Exception):
    """An upload, confirmation, listing or download failed; the message says which and why."""


def make_client(concurrency: int = 4) -> Any:
    """An S3 client from boto3's standard chain (environment, shared config and credential files,
    instance role; ``AWS_ENDPOINT_URL_S3``/``AWS_ENDPOINT_URL`` pick another endpoint: boto3
    >= 1.28.57, "Service-specific endpoints"), with standard-mode retries."""
    import boto3
    from botocore.config import Config

    return boto3.session.Session().client("s3", config=Config(
        retries={"max_attempts": 5, "mode": "standard"},
        max_pool_connections=max(10, concurrency + 2)))


def errors() -> tuple[type[BaseException], ...]:
    """What boto3/s3transfer raise for a refused or failed request, plus :class:`MirrorError`."""
    from boto3.exceptions import Boto3Error
    from botocore.exceptions import BotoCoreError, ClientError

    return (ClientError, BotoCoreError, Boto3Error, MirrorError)


def upload_unit(client: Any, uri: S3Uri, unit: local.Unit, settings: TransferSettings,
                on_bytes: Callable[[int], None] | None = None,
                on_first_byte: Callable[[], None] | None = None) -> dict[str, Any]:
    """Upload ``unit``, confirm every object, then write its record (the commit point).

    Args:
        client: a boto3 S3 client.
        uri: the mirror prefix.
        unit: a committed local checkpoint.
        settings: transfer settings.
        on_bytes: called with the byte count of each finished file (progress).
        on_first_byte: called once, from a transfer thread, when the first bytes of the unit
            are sent (s3transfer's ``on_progress``; the files are hashed before that).

    Returns:
        The record written.

    Raises:
        OSError: a local file vanished or could not be read (the unit was pruned meanwhile).
        MirrorError: an object's size or checksum on S3 differs from the local file.
        botocore ``ClientError``/``BotoCoreError``, ``boto3.exceptions.Boto3Error``: S3
            refused or failed a request. In every failure case no record is written.
    """
    from boto3.s3.transfer import create_transfer_manager

    files = unit.files()
    record_key = uri.key(unit.name, RECORD_NAME)
    client.delete_object(Bucket=uri.bucket, Key=record_key)  # a stale record never covers new data
    hashes: dict[str, local.FileHash] = {}
    parts: dict[str, int] = {}
    subscribers = [] if on_first_byte is None else [_FirstByte(on_first_byte)]
    with create_transfer_manager(client, settings.boto_config()) as manager:
        futures = []
        for f in files:
            part = settings.part_size_for(f.size_bytes)
            multipart = f.size_bytes >= settings.threshold_bytes
            parts[f.path] = part if multipart else 0
            hashes[f.path] = local.hash_file(unit.file_path(f.path), part, multipart)
            futures.append((f, manager.upload(
                str(unit.file_path(f.path)), uri.bucket, uri.key(unit.name, f.path),
                extra_args={"ChecksumAlgorithm": "SHA256"}, subscribers=subscribers)))
        for f, future in futures:
            future.result()
            if on_bytes is not None:
                on_bytes(f.size_bytes)
    for f in files:
        _confirm(client, uri, unit.name, f, hashes[f.path].s3_checksum)
    record = {
        "format": RECORD_FORMAT, "unit": unit.name, "step": unit.step, "layout": unit.layout,
        "source_id": unit.source_id, "source_commit_time": unit.commit_time,
        "mirrored_at": time.time(), "total_bytes": sum(f.size_bytes for f in files),
        "files": [{"path": f.path, "size_bytes": f.size_bytes, "sha256": hashes[f.path].sha256,
                   "s3_checksum_sha256": hashes[f.path].s3_checksum,
                   "part_bytes": parts[f.path]} for f in files],
    }
    body = json.dumps(record, indent=1, sort_keys=True).encode()
    client.put_object(Bucket=uri.bucket, Key=record_key, Body=body, ChecksumAlgorithm="SHA256",
                      ContentType="application/json")
    return record


class _FirstByte:
    """An s3transfer subscriber that calls ``callback`` once, on the first bytes sent of any of
    the transfers it is given to (s3transfer.subscribers.BaseSubscriber's ``on_progress``)."""

    def __init__(self, callback: Callable[[], None]) -> None:
        self._callback = callback
        self._lock = threading.Lock()
        self._called = False

    def on_queued(self, future: Any, **kwargs: Any) -> None:
        """Not used (s3transfer calls it when the transfer is queued)."""

    def on_progress(self, future: Any, bytes_transferred: int, **kwargs: Any) -> None:
        """Called by s3transfer as bytes are sent; the first call with bytes calls back."""
        if bytes_transferred <= 0:
            return
        with self._lock:
            if self._called:
                return
            self._called = True
        self._callback()

    def on_done(self, future: Any, **kwargs: Any) -> None:
        """Not used (s3transfer calls it when the transfer ends)."""


def _confirm(client: Any, uri: S3Uri, unit: str, f: local.LocalFile, checksum: str) -> None:
    """Raise :class:`MirrorError` unless the object's size and SHA-256 checksum match.

    S3 returns a composite checksum as ``<base64>-<parts>``; some S3 implementations (moto 5)
    leave out ``-<parts>``, so the base64 digests are compared, and the part counts when both
    carry one.
    """
    key = uri.key(unit, f.path)
    head = client.head_object(Bucket=uri.bucket, Key=key, ChecksumMode="ENABLED")
    if int(head.get("ContentLength", -1)) != f.size_bytes:
        raise MirrorError(f"s3://{uri.bucket}/{key}: {head.get('ContentLength')} bytes on S3, "
                          f"{f.size_bytes} on disk")
    got = str(head.get("ChecksumSHA256") or "")
    g_digest, _, g_parts = got.partition("-")
    w_digest, _, w_parts = checksum.partition("-")
    if g_digest != w_digest or (g_parts and w_parts and g_parts != w_parts):
        raise MirrorError(f"s3://{uri.bucket}/{key}: SHA-256 checksum on S3 is {got or 'absent'}, "
                          f"expected {checksum}")


def _list_keys(client: Any, uri: S3Uri) -> list[str]:
    base = uri.key("") + "/" if uri.prefix else ""
    keys: list[str] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=uri.bucket, Prefix=base):
        keys.extend(obj["Key"] for obj in page.get("Contents", []))
    return keys


def _unit_of(key: str, uri: S3Uri) -> str | None:
    rest = key[len(uri.prefix) + 1:] if uri.prefix else key
    name = rest.split("/", 1)[0]
    return name if local.unit_name_step(name) is not None and "/" in rest else None


def read_record(client: Any, uri: S3Uri, name: str) -> dict[str, Any] | None:
    """The record of unit ``name`` if it exists and is well formed, else ``None`` (also for a
    record object larger than :data:`RECORD_MAX_BYTES`, which is not read past that)."""
    from botocore.exceptions import ClientError

    try:
        stream = client.get_object(Bucket=uri.bucket, Key=uri.key(name, RECORD_NAME))["Body"]
        body = stream.read(RECORD_MAX_BYTES + 1)  # a record is KiBs; never read a huge object
        stream.close()
        if len(body) > RECORD_MAX_BYTES:
            return None
        record = json.loads(body)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
            return None
        raise
    except ValueError:
        return None
    parsed = local.unit_name_step(name)
    if (not isinstance(record, dict) or record.get("format") != RECORD_FORMAT or parsed is None
            or record.get("unit") != name or record.get("step") != parsed[1]
            or not isinstance(record.get("files"), list) or not record["files"]):
        return None
    return record


def list_mirrors(client: Any, uri: S3Uri) -> tuple[list[Mirrored], list[str]]:
    """Complete mirrors (by step, then name) and the names of incomplete unit prefixes.

    Raises:
        botocore ``ClientError``/``BotoCoreError``: the listing or a record read failed.
    """
    keys = _list_keys(client, uri)
    names = sorted({n for k in keys if (n := _unit_of(k, uri)) is not None})
    present = set(keys)
    with_record = {n for n in names if uri.key(n, RECORD_NAME) in present}
    complete: list[Mirrored] = []
    for name in sorted(with_record):
        record = read_record(client, uri, name)
        if record is not None:
            layout_name, step = local.unit_name_step(name)  # type: ignore[misc]
            complete.append(Mirrored(name, step, layout_name, record))
    done = {m.name for m in complete}
    return sorted(complete, key=lambda m: (m.step, m.name)), [n for n in names if n not in done]


def delete_unit(client: Any, uri: S3Uri, name: str) -> None:
    """Delete unit ``name`` on S3: the record first, so a delete cut short leaves an incomplete
    prefix (ignored), never a record over missing objects."""
    client.delete_object(Bucket=uri.bucket, Key=uri.key(name, RECORD_NAME))
    keys = [k for k in _list_keys(client, uri) if k.startswith(uri.key(name) + "/")]
    for i in range(0, len(keys), 1000):  # DeleteObjects takes at most 1,000 keys (S3 API)
        client.delete_objects(Bucket=uri.bucket, Delete={
            "Objects": [{"Key": k} for k in keys[i:i + 1000]], "Quiet": True})


def prune(client: Any, uri: S3Uri, keep: int) -> list[str]:
    """Keep the newest ``keep`` complete mirrors; delete older complete ones and incomplete
    prefixes older than the newest complete one (abandoned uploads).

    Returns:
        The names deleted.

    Raises:
        ValueError: ``keep`` is below 1.
    """
    if keep < 1:
        raise ValueError(f"keep={keep}: at least the newest mirror must be kept")
    complete, incomplete = list_mirrors(client, uri)
    doomed = [m.name for m in complete[:-keep]]
    if complete:
        newest = complete[-1].step
        doomed += [n for n in incomplete if local.unit_name_step(n)[1] < newest]  # type: ignore[index]
    for name in doomed:
        delete_unit(client, uri, name)
    return doomed


def abort_stale_uploads(client: Any, uri: S3Uri) -> int:
    """Abort multipart uploads left under the prefix by a mirror that was killed (their parts
    cost storage until aborted; S3 User Guide, "Aborting a multipart upload"). Call only when no
    other mirror writes to this prefix. Returns how many were aborted."""
    base = uri.key("") + "/" if uri.prefix else ""
    found = client.list_multipart_uploads(Bucket=uri.bucket, Prefix=base).get("Uploads", [])
    for upload in found:
        client.abort_multipart_upload(Bucket=uri.bucket, Key=upload["Key"],
                                      UploadId=upload["UploadId"])
    return len(found)


def pull(client: Any, uri: S3Uri, mirror: Mirrored, root: Path,
         settings: TransferSettings) -> Path:
    """Download ``mirror`` into ``root`` bit-exact: into a hidden temp folder, check every
    file's size and SHA-256 against the record, then rename into place (the local commit point).
    A partial entry of the same name (no commit record or marker) is removed first.

    Returns:
        The local path of the unit.

    Raises:
        MirrorError: a downloaded file differs from the record, or the target exists already.
        botocore/boto3 errors: S3 refused or failed a request.
        OSError: the local file system refused a write.
    """
    from boto3.s3.transfer import create_transfer_manager

    target = root / mirror.name
    if local.is_partial(target):  # what the runtime removes at start anyway (never loaded)
        shutil.rmtree(target) if target.is_dir() else target.unlink()
    if target.exists():
        raise MirrorError(f"{target} exists already; a checkpoint is never overwritten")
    tmp = root / f".hpcflow-pull-{mirror.name}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    files = mirror.record["files"]
    with create_transfer_manager(client, settings.boto_config()) as manager:
        futures = []
        for f in files:
            dest = tmp / f["path"]
            if not dest.resolve().is_relative_to(tmp.resolve()):
                raise MirrorError(f"{mirror.name}: file path {f['path']!r} leaves the checkpoint")
            dest.parent.mkdir(parents=True, exist_ok=True)
            futures.append(manager.download(uri.bucket, uri.key(mirror.name, f["path"]),
                                            str(dest)))
        for future in futures:
            future.result()
    for f in files:
        dest = tmp / f["path"]
        if dest.stat().st_size != f["size_bytes"] or local.sha256_file(dest) != f["sha256"]:
            raise MirrorError(f"{mirror.name}/{f['path']}: the download differs from the "
                              "mirror's record (size or SHA-256); nothing was put in place")
        with open(dest, "rb") as handle:
            os.fsync(handle.fileno())
    if mirror.layout == "lightning":
        os.rename(tmp / mirror.name, target)
        shutil.rmtree(tmp)
    else:
        os.rename(tmp, target)
    fsync_dir(root)
    return target
