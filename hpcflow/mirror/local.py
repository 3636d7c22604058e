"""Committed checkpoints on the shared file system, as the mirror sees them (pure file work).

A *unit* is one committed checkpoint in one of the layouts hpcflow writes:

- ``step_<N>/`` with a valid ``hpcflow-commit.json`` (:mod:`hpcflow.runtime.commit`: the
  runtime's own checkpoints);
- ``checkpoint-<N>/`` holding the commit marker (the HF Trainer adapter, :mod:`hpcflow.runtime.hf`);
- ``step_<N>.ckpt``, a file renamed into place once complete (the Lightning adapter,
  :mod:`hpcflow.runtime.lightning`).

Anything else (``*.tmp``, folders without their record) is not a unit and is never mirrored.

Hashes: every file's SHA-256, and the checksum S3 reports for it after an upload with
``ChecksumAlgorithm='SHA256'``: the plain SHA-256 for a single-part upload, else the *composite*
one, SHA-256 over the concatenated part digests with ``-<parts>`` appended (AWS S3 User Guide,
"Checking object integrity", "Using part-level checksums for multipart uploads").
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from hpcflow.runtime import commit as ckpt_dirs

_STEP_DIR = re.compile(r"^step_(\d+)$")
_HF_DIR = re.compile(r"^checkpoint-(\d+)$")
_LIGHTNING_FILE = re.compile(r"^step_(\d+)\.ckpt$")
#: The HF adapter's marker (``hpcflow.runtime.hf.COMMIT_MARKER``; that module imports transformers,
#: so the name is repeated here and a test checks they agree).
_HF_MARKER = ckpt_dirs.COMMIT_NAME

#: Bytes read at a time while hashing.
_READ_BYTES = 1 << 20


@dataclass(frozen=True)
class LocalFile:
    """One file of a unit.

    Attributes:
        path: relative to the unit (``/`` separators); for a file unit, the unit's own name.
        size_bytes: its size.
    """

    path: str
    size_bytes: int


@dataclass(frozen=True)
class Unit:
    """One committed checkpoint.

    Attributes:
        name: the entry's name under the checkpoint root (``step_12``, ``checkpoint-12``,
            ``step_12.ckpt``); also its folder name under the S3 prefix.
        step: the step it holds.
        layout: ``hpcflow``, ``hf`` or ``lightning``.
        path: the directory (or, for ``lightning``, the file).
        source_id: what identifies this commit (the record's time, else the marker's or file's
            mtime in ns), so a mirror of an older checkpoint with the same name is not taken for it.
        commit_time: Unix time of the local commit, in seconds (for the mirror's lag).
    """

    name: str
    step: int
    layout: str
    path: Path
    source_id: str
    commit_time: float

    @property
    def is_file(self) -> bool:
        return self.layout == "lightning"

    def files(self) -> list[LocalFile]:
        """The unit's files, sorted (the commit record or marker last, so a reader of a
        half-written copy never finds it first).

        Raises:
            OSError: the unit was removed meanwhile (pruned by the runtime).
        """
        if self.is_file:
            return [LocalFile(self.name, self.path.stat().st_size)]
        found = [LocalFile(p.relative_to(self.path).as_posix(), p.stat().st_size)
                 for p in sorted(self.path.rglob("*")) if p.is_file()]
        if not found:
            raise FileNotFoundError(f"{self.path} holds no file (removed meanwhile?)")
        return sorted(found, key=lambda f: (f.path == ckpt_dirs.COMMIT_NAME, f.path))

    def file_path(self, rel: str) -> Path:
        """The local path of file ``rel`` of this unit."""
        return self.path if self.is_file else self.path / rel


def scan_units(root: Path) -> list[Unit]:
    """The committed units under ``root``, by step then name; a missing root has none.

    Cost: one ``stat`` per listed file of each ``step_<N>/`` record (its validation).
    """
    units: list[Unit] = []
    if not root.is_dir():
        return units
    for entry in root.iterdir():
        unit = _unit(entry)
        if unit is not None:
            units.append(unit)
    return sorted(units, key=lambda u: (u.step, u.name))


def _unit(entry: Path) -> Unit | None:
    try:
        if (m := _STEP_DIR.match(entry.name)) and entry.is_dir():
            record = ckpt_dirs.read_commit_record(entry)
            if record is None:
                return None
            t = float(record.get("time", 0.0))
            return Unit(entry.name, int(m[1]), "hpcflow", entry, repr(t), t)
        if (m := _HF_DIR.match(entry.name)) and entry.is_dir():
            marker = entry / _HF_MARKER
            if not marker.is_file():
                return None
            st = marker.stat()
            return Unit(entry.name, int(m[1]), "hf", entry, str(st.st_mtime_ns), st.st_mtime)
        if (m := _LIGHTNING_FILE.match(entry.name)) and entry.is_file():
            st = entry.stat()
            return Unit(entry.name, int(m[1]), "lightning", entry, str(st.st_mtime_ns),
                        st.st_mtime)
    except OSError:  # removed while we looked: not a unit now
        return None
    return None



def unit_name_step(name: str) -> tuple[str, int] | None:
    """``(layout, step)`` of a unit name, or ``None`` when ``name`` is no unit name."""
    for layout_name, pattern in (("hpcflow", _STEP_DIR), ("hf", _HF_DIR),
                                 ("lightning", _LIGHTNING_FILE)):
        if m := pattern.match(name):
            return layout_name, int(m[1])
    return None


def is_partial(path: Path) -> bool:
    """True when ``path`` has a unit's name but is not committed (a folder without its record
    or marker): never loaded, and removed by the runtime and the adapters at start."""
    return (path.exists() and local_name(path.name) and _unit(path) is None
            and not path.is_symlink())


def local_name(name: str) -> bool:
    """True when ``name`` is a unit name of a directory layout (``step_<N>``, ``checkpoint-<N>``)."""
    return bool(_STEP_DIR.match(name) or _HF_DIR.match(name))


def has_complete(root: Path) -> bool:
    """True when ``root`` holds at least one committed unit (then nothing is pulled)."""
    return bool(scan_units(root))


@dataclass(frozen=True)
class FileHash:
    """Hashes of one file.

    Attributes:
        sha256: hex SHA-256 of the whole file.
        s3_checksum: the base64 ``ChecksumSHA256`` S3 reports after an upload in parts of
            ``part_bytes`` (composite, with ``-<parts>``, when it took more than one part).
    """

    sha256: str
    s3_checksum: str


def hash_file(path: Path, part_bytes: int, multipart: bool) -> FileHash:
    """Read ``path`` once and return its :class:`FileHash`.

    Args:
        path: the file.
        part_bytes: the part size of a multipart upload, in bytes.
        multipart: whether the upload is multipart (size at or above the threshold).

    Raises:
        OSError: the file could not be read.
    """
    whole = hashlib.sha256()
    parts: list[bytes] = []
    part = hashlib.sha256()
    in_part = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(min(_READ_BYTES, part_bytes - in_part)):
            whole.update(chunk)
            part.update(chunk)
            in_part += len(chunk)
            if in_part == part_bytes:
                parts.append(part.digest())
                part, in_part = hashlib.sha256(), 0
    if in_part or not parts:
        parts.append(part.digest())
    if not multipart:
        return FileHash(whole.hexdigest(), base64.b64encode(whole.digest()).decode())
    composite = base64.b64encode(hashlib.sha256(b"".join(parts)).digest()).decode()
    return FileHash(whole.hexdigest(), f"{composite}-{len(parts)}")


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of ``path`` (read in 1 MiB chunks): the one the commit records use,
    :func:`hpcflow.runtime.commit.sha256_file`."""
    return ckpt_dirs.sha256_file(path)
