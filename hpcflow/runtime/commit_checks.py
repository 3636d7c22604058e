"""The checks of a committed checkpoint that read every one of its files: the version 1
records' SHA-256 (:func:`sha256_file`, :func:`list_files`), and a whole-checkpoint verification
(:func:`digest_problem`, :func:`latest_verified`) for tools and tests. A restore does not use
them: it checks each file while it reads it (:mod:`hpcflow.runtime.dcp_read`). The commit
protocol itself is :mod:`hpcflow.runtime.commit`."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from hpcflow.runtime import checksum
from hpcflow.runtime import commit as C

__all__ = ["digest_problem", "latest_verified", "list_files", "sha256_file"]


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of the file ``path``, read in 1 MiB chunks.

    Raises:
        OSError: the file cannot be read.
    """
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(C.READ_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def list_files(directory: Path) -> list[dict[str, Any]]:
    """Every regular file below ``directory`` (except the record) as ``{"path", "size_bytes",
    "sha256"}``, sorted by path; paths are relative with ``/`` separators: the files of a
    version 1 record (no longer written by the runtime; kept to make and check such records).

    Cost: one read of every file (the whole checkpoint), :data:`C.HASH_THREADS` files at a time.
    """
    paths = C.record_files(directory)
    with ThreadPoolExecutor(max_workers=C.HASH_THREADS) as pool:
        digests = list(pool.map(sha256_file, paths))
    return [{"path": p.relative_to(directory).as_posix(), "size_bytes": p.stat().st_size,
             "sha256": digest} for p, digest in zip(paths, digests, strict=True)]


def digest_problem(directory: Path, record: dict[str, Any], key: bytes | None = None
                   ) -> str | None:
    """Why the files of committed ``directory`` differ from its ``record``, or None when each
    listed file has its recorded digests: SHA-256 (version 1), CRC32C and, with ``key``, keyed
    BLAKE3 (version 2); entries without a digest (records older than digests) are not
    checked. A restore does not call this: it checks while it reads
    (:func:`hpcflow.runtime.dcp_read.verifying_reader`).

    Cost: one read of every listed file.
    """
    entries = [e for e in record.get("files", []) if isinstance(e, dict)]
    entries = [e for e in entries if checksum.checked_algorithms(e, key)]
    try:
        paths = [directory / str(e["path"]) for e in entries]
        with ThreadPoolExecutor(max_workers=C.HASH_THREADS) as pool:
            got = list(pool.map(lambda pair: checksum.digest_file(
                pair[0], key, checksum.checked_algorithms(pair[1], key)),
                zip(paths, entries, strict=True)))
    except OSError as exc:
        return f"a file cannot be read ({exc.strerror or exc})"
    for entry, digests in zip(entries, got, strict=True):
        problem = checksum.mismatch(str(entry["path"]), entry, digests)
        if problem is not None:
            return problem.replace(" has sha256 ", " has SHA-256 ")
    return None


def latest_verified(root: Path, on_ignored: Callable[[str], None] | None = None,
                    key: bytes | None = None) -> int | None:
    """The newest committed step whose record passes :func:`record_problem` and whose files
    match their recorded digests (:func:`digest_problem`), or None when there is none. Each
    newer committed checkpoint that does not match is passed over for the previous one, and
    ``on_ignored`` is called with why.

    Cost: one read of the chosen checkpoint (and of each one passed over); call it on one rank.
    A restore does not need it: it checks while it loads.
    """
    for step in reversed(C.scan(root).committed):
        directory = C.step_dir(root, step)
        record = C.read_commit_record(directory)
        problem = "its record is gone" if record is None else (
            C.record_problem(record, key) or digest_problem(directory, record, key))
        if problem is None:
            return step
        if on_ignored is not None:
            on_ignored(f"checkpoint {directory} is ignored: {problem}; the previous committed "
                       "checkpoint is used instead")
    return None
