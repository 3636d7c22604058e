"""The commit record and the checkpoint directory layout: complete or ignored
(docs/architecture.md, "Checkpoints").

Layout under the checkpoint root (docs/protocol.md, "Run directory")::

    step_<N>.tmp/   being written by torch.distributed.checkpoint; never loaded
    step_<N>/       committed: holds hpcflow-commit.json, written after every rank finished

A directory counts as committed only if its record parses, names the same step, lists DCP's
``.metadata`` file (DCP writes it last, after every rank's shards: docs/architecture.md,
"Checkpoints") and every file it lists is present with the listed size. Everything here is plain
file-system work (no torch), so it is tested on a temporary directory.

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

COMMIT_NAME = "hpcflow-commit.json"
#: The file DCP's ``FileSystemWriter.finish`` writes on the coordinator after every rank's shards
#: are written (torch/distributed/checkpoint/filesystem.py): without it a directory is partial.
DCP_METADATA = ".metadata"
RECORD_FORMAT = "hpcflow-checkpoint/1"
_STEP_DIR = re.compile(r"^step_(\d+)$")
_TMP_DIR = re.compile(r"^step_(\d+)\.tmp$")


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


def list_files(directory: Path) -> list[dict[str, Any]]:
    """Every regular file below ``directory`` (except the record) as ``{"path", "size_bytes"}``,
    sorted by path; paths are relative with ``/`` separators."""
    files = []
    for path in sorted(directory.rglob("*")):
        if path.is_file() and path.name != COMMIT_NAME:
            rel = path.relative_to(directory).as_posix()
            files.append({"path": rel, "size_bytes": path.stat().st_size})
    return files


def write_commit_record(
    directory: Path, step: int, world_size: int, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Write ``hpcflow-commit.json`` into ``directory`` durably (temp file, fsync, rename, fsync
    of the directory).

    Args:
        directory: the finished ``step_<N>.tmp/`` directory.
        step: the training step the checkpoint holds.
        world_size: ranks that wrote it.
        extra: more facts for the record (e.g. the mesh layout); must be JSON-serialisable.

    Returns:
        The record as written.

    Raises:
        OSError: the file system refused a write, fsync or rename.
    """
    record = {
        "format": RECORD_FORMAT,
        "step": step,
        "time": time.time(),
        "world_size": world_size,
        "versions": library_versions(),
        "files": list_files(directory),
        "extra": extra or {},
    }
    write_json_atomic(directory / COMMIT_NAME, record, sort_keys=True)
    return record


def read_commit_record(directory: Path) -> dict[str, Any] | None:
    """The commit record of ``directory`` if it is valid, else ``None``.

    Valid means: the JSON parses, has this format, names the directory's step, and every listed
    file exists with the listed size (costs one ``stat`` per file).
    """
    match = _STEP_DIR.match(directory.name)
    if not match:
        return None
    try:
        record = json.loads((directory / COMMIT_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("format") != RECORD_FORMAT:
        return None
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
        match = _STEP_DIR.match(entry.name)
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


def commit(root: Path, step: int, world_size: int, extra: dict[str, Any] | None = None) -> Path:
    """Commit ``step_<step>.tmp/``: write its record, then :func:`publish` it.

    Call on one rank only, after every rank finished writing.

    Returns:
        The committed directory.

    Raises:
        FileNotFoundError: the ``.tmp`` directory or its ``.metadata`` is missing (the write did
            not finish).
        FileExistsError: ``step_<step>/`` exists already (never overwritten).
        OSError: the file system refused a write, fsync or rename.
    """
    check_committable(root, step)
    write_commit_record(tmp_dir(root, step), step, world_size, extra)
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
