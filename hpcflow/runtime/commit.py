"""The commit record and the checkpoint directory layout: complete or ignored
(docs/architecture.md, "Checkpoints").

Layout under the checkpoint root (docs/protocol.md, "Run directory")::

    step_<N>.tmp/   being written by torch.distributed.checkpoint; never loaded
    step_<N>/       committed: holds hpcflow-commit.json, written after every rank finished

A directory counts as committed only if its record parses, names the same step, lists DCP's
``.metadata`` file (DCP writes it last, after every rank's shards: docs/architecture.md,
"Checkpoints") and every file it lists is present with the listed size. Everything here is plain
file-system work (no torch), so it is tested on a temporary directory.

The record (``version`` 2) also holds each file's CRC32C and keyed BLAKE3, computed while DCP
wrote the bytes (:mod:`hpcflow.runtime.dcp_io`), and a MAC over the whole record made with the
run's key (:mod:`hpcflow.runtime.checksum`). A restore checks the MAC before anything is read
(:func:`record_problem`) and each file's digests while it is read, and passes over a checkpoint
that fails for the previous committed one. Records without ``version`` (1) hold each file's
SHA-256, checked the same way while read; records older still have none and are loaded on their
sizes alone. A checkpoint is trusted like code (DCP unpickles ``.metadata``,
:mod:`hpcflow.runtime.rng` unpickles the RNG states): the digests catch a change after the commit,
and the keyed ones a writer without the key (docs/checkpoints.md, "What is trusted").

Committing is two steps, :func:`write_commit_record` then :func:`publish` (the rename); a crash
between them leaves a ``.tmp`` directory, which is never loaded.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcflow.fsutil import fsync_dir, write_json_atomic
from hpcflow.protocol import STEP_DIR_RE
from hpcflow.runtime import checksum

COMMIT_NAME = "hpcflow-commit.json"
#: The file DCP's ``FileSystemWriter.finish`` writes on the coordinator after every rank's shards
#: are written (torch/distributed/checkpoint/filesystem.py): without it a directory is partial.
DCP_METADATA = ".metadata"
RECORD_FORMAT = "hpcflow-checkpoint/1"
#: ``version`` of the records written now: 2 = CRC32C and keyed BLAKE3 per file, and a MAC.
#: A record without the member is version 1 (SHA-256 per file, or no digest at all).
RECORD_VERSION = 2
_STEP_DIR = STEP_DIR_RE
_TMP_DIR = re.compile(r"^step_(\d+)\.tmp$")
READ_BYTES = 1024 * 1024
#: Files hashed at once: hashlib releases the GIL on large buffers, so threads overlap the
#: reads and the hashing of several shards.
HASH_THREADS = 8


@dataclass(frozen=True)
class CheckpointScan:
    """What a checkpoint root holds.

    Attributes:
        committed: steps of the committed directories, ascending.
        partial: directories never to load: ``step_<N>.tmp/`` and ``step_<N>/`` without a valid
            record.
    """

    committed: list[int]
    partial: list[Path]


def step_dir(root: Path, step: int) -> Path:
    """``<root>/step_<step>``: where a committed checkpoint of ``step`` lives."""
    return root / f"step_{step}"


def tmp_dir(root: Path, step: int) -> Path:
    """``<root>/step_<step>.tmp``: where a checkpoint of ``step`` is written before commit."""
    return root / f"step_{step}.tmp"


def library_versions() -> dict[str, str]:
    """Versions of Python and of the libraries that wrote a checkpoint (those importable)."""
    versions = {"python": sys.version.split()[0]}
    from importlib import metadata

    for dist_name in ("torch", "numpy", "hpcflow"):
        try:
            versions[dist_name] = metadata.version(dist_name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def record_files(directory: Path) -> list[Path]:
    """Every regular file below ``directory`` but the commit record, sorted."""
    return [p for p in sorted(directory.rglob("*")) if p.is_file() and p.name != COMMIT_NAME]


def streamed_files(directory: Path, streamed: dict[str, dict[str, Any]],
                   key: bytes | None) -> tuple[list[dict[str, Any]], list[str]]:
    """The ``files`` of a version 2 record: every regular file below ``directory`` (except the
    record) as ``{"path", "size_bytes", "crc32c", "blake3_keyed"}`` (the last only with
    ``key``), sorted by path.

    Args:
        directory: the finished ``step_<N>.tmp/``.
        streamed: ``{relative path: digests}`` computed while the files were written
            (:func:`hpcflow.runtime.dcp_io.checksum_writer` of every rank, merged).
        key: the run's key.

    Returns:
        The entries, and the paths that had to be read because ``streamed`` lacks them (or
        holds another size): none for a save through the runtime.

    Cost: one ``stat`` per file; one read of each file in the second list.
    """
    entries, read_back = [], []
    for path in record_files(directory):
        relative = path.relative_to(directory).as_posix()
        got = streamed.get(relative)
        if got is None or got.get("size_bytes") != path.stat().st_size or \
                (key is not None and checksum.BLAKE3_KEYED not in got):
            got = checksum.digest_file(path, key)
            read_back.append(relative)
        entry = {"path": relative, "size_bytes": got["size_bytes"],
                 checksum.CRC32C: got[checksum.CRC32C]}
        if key is not None:
            entry[checksum.BLAKE3_KEYED] = got[checksum.BLAKE3_KEYED]
        entries.append(entry)
    return entries, read_back


def write_commit_record(
    directory: Path, step: int, world_size: int, extra: dict[str, Any] | None = None, *,
    streamed: dict[str, dict[str, Any]] | None = None, key: bytes | None = None,
    more_files: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Write ``hpcflow-commit.json`` (version 2) into ``directory`` durably (temp file, fsync,
    rename, fsync of the directory).

    Args:
        directory: the finished ``step_<N>.tmp/`` directory.
        step: the training step the checkpoint holds.
        world_size: ranks that wrote it.
        extra: more facts for the record (e.g. the mesh layout); must be JSON-serialisable.
        streamed: each file's digests computed while it was written (see
            :func:`streamed_files`); a file missing from it is read and hashed here.
        key: the run's key: with it, each file's keyed BLAKE3, the key's id and the record's
            MAC are written.
        more_files: files written on other hosts, as :func:`streamed_files` lists them
            (:mod:`hpcflow.runtime.host_local`); a path listed here and in ``directory`` is
            taken from ``directory``.

    Returns:
        The record as written.

    Raises:
        OSError: the file system refused a write, fsync or rename.
    """
    files, _ = streamed_files(directory, streamed or {}, key)
    record: dict[str, Any] = {
        "format": RECORD_FORMAT,
        "version": RECORD_VERSION,
        "step": step,
        "time": time.time(),
        "world_size": world_size,
        "versions": library_versions(),
        "files": _union(files, more_files or []),
        "extra": extra or {},
    }
    if key is not None:
        record["key_id"] = checksum.key_id(key)
        record["mac"] = checksum.record_mac(record, key)
    write_json_atomic(directory / COMMIT_NAME, record, sort_keys=True)
    return record


def write_preemption_commit(path: Path, step: int | None, **facts: Any) -> None:
    """Write the preemption commit file (``HPCFLOW_PREEMPT_COMMITTED``, docs/protocol.md): the
    batch script requeues the job on it. One JSON object, ``{"step", "time", **facts}``, written
    durably; ``step`` is ``None`` when the program's own state was stored instead of an hpcflow
    checkpoint (hpcflow.launch's ``checkpoint()``). The folder is created if missing.

    Raises:
        OSError: the file system refused the write.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, {"step": step, "time": time.time(), **facts}, sort_keys=True)


def _union(local: list[dict[str, Any]], more: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen = {entry["path"] for entry in local}
    extra = [entry for entry in more if entry["path"] not in seen]
    return sorted([*local, *extra], key=lambda entry: entry["path"])


def read_commit_record(directory: Path) -> dict[str, Any] | None:
    """The commit record of ``directory`` if it is valid, else ``None``.

    Valid means: the JSON parses, has this format, names the directory's step, and every listed
    file exists with the listed size (costs one ``stat`` per file).
    """
    match = _STEP_DIR.fullmatch(directory.name)
    if not match:
        return None
    try:
        record = json.loads((directory / COMMIT_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("format") != RECORD_FORMAT:
        return None
    if record.get("version", 1) not in (1, RECORD_VERSION):
        return None  # written by a later hpcflow: never loaded unchecked
    if record.get("step") != int(match.group(1)):
        return None
    files = record.get("files")
    if not isinstance(files, list) or not files:
        return None
    if not any(isinstance(entry, dict) and entry.get("path") == DCP_METADATA for entry in files):
        return None
    for entry in files:
        try:
            if (directory / entry["path"]).stat().st_size != entry["size_bytes"]:
                return None
        except (OSError, KeyError, TypeError):
            return None
    return record


def record_problem(record: dict[str, Any], key: bytes | None) -> str | None:
    """Why ``record`` cannot be trusted with the run's ``key``, or None. Without a key nothing
    is checked here. With one, the record must carry a MAC made with that key: a version 1
    record, or one whose MAC was stripped, is refused, so a writer of the checkpoint folder
    cannot fall back to the digests that need no key.

    Cost: one hash of the record (no checkpoint file is read).
    """
    if key is None:
        return None
    mac = record.get("mac")
    if not isinstance(mac, str):
        return "its record carries no MAC (written before keyed digests, or stripped), and " \
               "this run has a key"
    if mac != checksum.record_mac(record, key):
        return f"its record's MAC does not match this run's key (key id " \
               f"{checksum.key_id(key)}, the record names {record.get('key_id')!r}): written " \
               "with another key, or changed after the commit"
    return None


def scan(root: Path) -> CheckpointScan:
    """Sort the entries of ``root`` into committed steps and partial directories.

    A missing root is empty. Entries that are not ``step_<N>`` or ``step_<N>.tmp`` are left alone.
    """
    committed: list[int] = []
    partial: list[Path] = []
    if not root.is_dir():
        return CheckpointScan(committed, partial)
    for entry in sorted(root.iterdir()):
        if _TMP_DIR.match(entry.name):
            partial.append(entry)
            continue
        match = _STEP_DIR.fullmatch(entry.name)
        if not match or not entry.is_dir():
            continue
        if read_commit_record(entry) is None:
            partial.append(entry)
        else:
            committed.append(int(match.group(1)))
    return CheckpointScan(sorted(committed), partial)


def fresh_tmp_dir(root: Path, step: int) -> Path:
    """Make an empty ``step_<step>.tmp/`` for a new save, replacing what a failed save of this
    step left (DCP would write into an existing directory: docs/architecture.md, "Checkpoints").

    Returns:
        The new directory.

    Raises:
        FileExistsError: ``step_<step>/`` exists already (never overwritten).
        OSError: the file system refused the removal or the mkdir.
    """
    final = step_dir(root, step)
    if final.exists():
        raise FileExistsError(f"{final} exists already; a checkpoint is never overwritten")
    tmp = tmp_dir(root, step)
    if tmp.is_dir() and not tmp.is_symlink():
        shutil.rmtree(tmp)
    elif tmp.exists() or tmp.is_symlink():
        tmp.unlink()
    tmp.mkdir(parents=True)
    return tmp


def commit(root: Path, step: int, world_size: int, extra: dict[str, Any] | None = None, *,
           key: bytes | None = None) -> Path:
    """Commit ``step_<step>.tmp/``: write its record, then :func:`publish` it.

    Call on one rank only, after every rank finished writing. The files' digests are computed
    here by reading them (the runtime's saves stream them instead: :func:`write_commit_record`).

    Returns:
        The committed directory.

    Raises:
        FileNotFoundError: the ``.tmp`` directory or its ``.metadata`` is missing (the write did
            not finish).
        FileExistsError: ``step_<step>/`` exists already (never overwritten).
        OSError: the file system refused a write, fsync or rename.
    """
    check_committable(root, step)
    write_commit_record(tmp_dir(root, step), step, world_size, extra, key=key)
    return publish(root, step)


def check_committable(root: Path, step: int) -> None:
    """Raise unless ``step_<step>.tmp/`` holds a finished DCP write and ``step_<step>/`` is free.

    Raises:
        FileNotFoundError: the ``.tmp`` directory or its ``.metadata`` is missing.
        FileExistsError: ``step_<step>/`` exists already.
    """
    source = tmp_dir(root, step)
    target = step_dir(root, step)
    if not source.is_dir():
        raise FileNotFoundError(f"{source} does not exist; nothing to commit")
    if not (source / DCP_METADATA).is_file():
        raise FileNotFoundError(
            f"{source / DCP_METADATA} is missing: the write did not finish; never committed"
        )
    if target.exists():
        raise FileExistsError(f"{target} exists already; a checkpoint is never overwritten")


def publish(root: Path, step: int) -> Path:
    """Rename ``step_<step>.tmp/`` (its record written) to ``step_<step>/`` and fsync the root.

    The rename is the commit point: atomic within one file system (POSIX ``rename(2)``; also on
    Lustre), so a reader sees either the ``.tmp`` directory or the committed one.

    Returns:
        The committed directory.

    Raises:
        FileNotFoundError: the ``.tmp`` directory or its record is missing.
        FileExistsError: ``step_<step>/`` exists already.
        OSError: the file system refused the rename or fsync.
    """
    source = tmp_dir(root, step)
    target = step_dir(root, step)
    if not (source / COMMIT_NAME).is_file():
        raise FileNotFoundError(f"{source / COMMIT_NAME} is missing; write the record first")
    if target.exists():
        raise FileExistsError(f"{target} exists already; a checkpoint is never overwritten")
    os.rename(source, target)
    fsync_dir(root)
    return target


def set_aside(root: Path, step: int) -> Path:
    """Rename committed ``step_<step>/`` to ``step_<step>.damaged/`` (``.damaged-2`` and on when
    taken): a checkpoint that failed its checks is kept for inspection, is never loaded, pruned
    or mirrored (no layout matches the name), and a later save of the same step can be
    committed.

    Returns:
        The new path.

    Raises:
        OSError: the rename failed.
    """
    source = step_dir(root, step)
    target = root / f"step_{step}.damaged"
    n = 1
    while target.exists() or target.is_symlink():
        n += 1
        target = root / f"step_{step}.damaged-{n}"
    os.rename(source, target)
    fsync_dir(root)
    return target


def prune(root: Path, keep: int) -> list[Path]:
    """Delete all but the last ``keep`` committed checkpoints.

    The record goes first, so a delete cut short leaves a directory that is ignored and later
    removed by :func:`remove_partial`, never one that looks committed but is incomplete.

    Returns:
        The directories removed.

    Raises:
        ValueError: ``keep`` is below 1.
    """
    if keep < 1:
        raise ValueError(f"keep={keep}: at least the newest checkpoint must be kept")
    steps = scan(root).committed
    removed = []
    for step in steps[:-keep]:
        directory = step_dir(root, step)
        (directory / COMMIT_NAME).unlink()
        fsync_dir(directory)
        shutil.rmtree(directory)
        removed.append(directory)
    return removed


def remove_partial(root: Path) -> list[Path]:
    """Delete every partial directory :func:`scan` finds (``.tmp`` and record-less ones).

    Returns:
        The directories removed.
    """
    removed = []
    for directory in scan(root).partial:
        if directory.is_dir() and not directory.is_symlink():
            shutil.rmtree(directory)
        else:
            directory.unlink()
        removed.append(directory)
    return removed


#: The checks that read every file of a checkpoint live in :mod:`hpcflow.runtime.commit_checks`
#: (a restore checks while it reads instead); their names stay reachable from here.
_FULL_READ_CHECKS = ("digest_problem", "latest_verified", "list_files", "sha256_file")


def __getattr__(name: str) -> Any:
    if name in _FULL_READ_CHECKS:
        from hpcflow.runtime import commit_checks

        return getattr(commit_checks, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
