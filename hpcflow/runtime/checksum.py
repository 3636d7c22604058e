"""The checksums of a checkpoint's files, computed over the bytes as they stream, and the run's key.

Two digests per file, over one pass (docs/checkpoints.md, "What the checks catch"):

- **CRC32C** (Castagnoli, RFC 3720 section B.4), from the ``crc32c`` package, which uses the
  CPU's CRC instruction (SSE 4.2 on x86-64, the ARMv8 CRC extension) and releases the GIL on
  large buffers: catches corruption and truncation, needs no key, and is one of the object
  checksums S3 computes itself (``ChecksumAlgorithm='CRC32C'``, AWS S3 User Guide, "Checking
  object integrity"), so the mirror can hand it to S3 instead of hashing again.
- **keyed BLAKE3** (the BLAKE3 specification, section 2.4 "keyed_hash"), from the ``blake3``
  package, with a 32-byte key kept outside the checkpoint folder: someone who can write the
  checkpoint folder but cannot read the key cannot make a file, or a whole record, that passes.

The record itself is covered too: its MAC is the keyed BLAKE3 of its canonical JSON (sorted keys,
no ``mac`` member), so the step, the world size and the file list cannot be changed either.

Records written before this (``version`` absent: 1) carry SHA-256 per file; :class:`StreamDigest`
computes SHA-256 as well when asked, so those are checked while they are read too.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

#: Bytes in a key (BLAKE3's keyed mode takes exactly 32: the specification, section 2.4).
KEY_BYTES = 32
#: The digests a current record lists per file.
CRC32C = "crc32c"
BLAKE3_KEYED = "blake3_keyed"
SHA256 = "sha256"  # records of version 1
#: Context string of the key id (it names the key; it does not reveal it).
_KEY_ID_INPUT = b"hpcflow checkpoint key id"


class KeyFileError(OSError):
    """The key file exists but cannot be used (wrong size, not a regular file, readable by
    others)."""


def new_key_file(path: Path) -> bytes:
    """The key in ``path``, made now (32 random bytes from ``os.urandom``, mode 0600, fsynced)
    when there is none. Safe when several processes race: one creates it (``O_EXCL``), the others
    read it.

    Raises:
        KeyFileError: ``path`` exists but is not a usable key (see :func:`read_key_file`).
        OSError: the folder cannot be written.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        key = read_key_file(path)
        if key is None:  # removed between the two calls
            raise KeyFileError(errno.ENOENT, "the checkpoint key vanished while it was read",
                               str(path)) from None
        return key
    key = os.urandom(KEY_BYTES)
    try:
        os.fchmod(fd, 0o600)  # whatever the umask
        os.write(fd, key)
        os.fsync(fd)
    finally:
        os.close(fd)
    return key


def read_key_file(path: Path) -> bytes | None:
    """The key in ``path``, or ``None`` when there is no such file.

    Raises:
        KeyFileError: it is not a regular file, not 32 bytes, or others may read or write it
            (mode bits beyond 0600): such a key proves nothing.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise KeyFileError(errno.ELOOP, "the checkpoint key is a symlink", str(path)) from exc
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise KeyFileError(errno.EINVAL, "the checkpoint key is not a regular file", str(path))
        if info.st_mode & 0o077:
            raise KeyFileError(errno.EPERM, f"the checkpoint key has mode "
                               f"{stat.S_IMODE(info.st_mode):04o}; only 0600 is allowed "
                               f"(chmod 600 it)", str(path))
        key = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(key) != KEY_BYTES:
        raise KeyFileError(errno.EINVAL, f"the checkpoint key holds {len(key)} bytes; "
                           f"{KEY_BYTES} are allowed", str(path))
    return key


def key_id(key: bytes) -> str:
    """A short public name of ``key`` (16 hex digits of its keyed BLAKE3 of a fixed string):
    tells which key wrote a record without revealing it."""
    import blake3

    return blake3.blake3(_KEY_ID_INPUT, key=key).hexdigest()[:16]


def record_mac(record: dict[str, Any], key: bytes) -> str:
    """Hex keyed BLAKE3 of ``record``'s canonical JSON (sorted keys, compact, without ``mac``)."""
    import blake3

    body = {k: v for k, v in record.items() if k != "mac"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return blake3.blake3(text.encode(), key=key).hexdigest()


def usable_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class StreamDigest:
    """The digests of one file, fed the bytes in order with :meth:`update`.

    Args:
        key: the run's key: keyed BLAKE3 is computed with it (None: not computed).
        algorithms: which digests (:data:`CRC32C`, :data:`BLAKE3_KEYED`, :data:`SHA256`).
        all_cores: let BLAKE3 spread a large update over every core but one, the reader's (a
            restore, when nothing else runs); a save hashes on one thread, beside the training.

    Cost per byte: CRC32C about 10 GiB/s and BLAKE3 about 4.5 GiB/s on one core of the machine
    in bench/README.md; both release the GIL on large buffers.
    """

    def __init__(self, key: bytes | None, algorithms: tuple[str, ...] = (CRC32C, BLAKE3_KEYED),
                 *, all_cores: bool = False) -> None:
        import blake3

        self.size_bytes = 0
        self._crc: int | None = 0 if CRC32C in algorithms else None
        # BLAKE3 is a tree hash: one large update can use several cores, with the same digest
        # as one thread gives. A restore leaves one core to the thread that reads (measured on
        # the 2-core machine of bench/README.md: a 1 GiB load took 0.45 to 0.46 s with the
        # hash on one thread, 0.49 to 0.58 s with it on both cores).
        threads = max(1, usable_cores() - 1) if all_cores else 1
        self._blake = blake3.blake3(key=key, max_threads=threads) \
            if BLAKE3_KEYED in algorithms and key else None
        self._sha = hashlib.sha256() if SHA256 in algorithms else None

    def update(self, data: Any) -> None:
        """Add ``data`` (bytes-like) to every digest."""
        import crc32c

        view = memoryview(data).cast("B")
        self.size_bytes += view.nbytes
        if self._crc is not None:
            self._crc = crc32c.crc32c(view, self._crc)
        if self._blake is not None:
            self._blake.update(view)
        if self._sha is not None:
            self._sha.update(view)

    def result(self) -> dict[str, Any]:
        """``{"size_bytes", and each digest computed: "crc32c" (8 hex digits), "blake3_keyed"
        (64), "sha256" (64)}``."""
        out: dict[str, Any] = {"size_bytes": self.size_bytes}
        if self._crc is not None:
            out[CRC32C] = f"{self._crc:08x}"
        if self._blake is not None:
            out[BLAKE3_KEYED] = self._blake.hexdigest()
        if self._sha is not None:
            out[SHA256] = self._sha.hexdigest()
        return out


def digest_file(path: Path, key: bytes | None,
                algorithms: tuple[str, ...] = (CRC32C, BLAKE3_KEYED)) -> dict[str, Any]:
    """:meth:`StreamDigest.result` of the whole file ``path``, read in 8 MiB chunks.

    Raises:
        OSError: the file cannot be read.
    """
    digest = StreamDigest(key, algorithms)
    buffer = bytearray(8 << 20)
    with open(path, "rb", buffering=0) as handle:
        while n := handle.readinto(buffer):
            digest.update(memoryview(buffer)[:n])
    return digest.result()


def checked_algorithms(entry: dict[str, Any], key: bytes | None) -> tuple[str, ...]:
    """The digests of a record's file ``entry`` worth checking: its keyed BLAKE3 alone when
    there is a key (it catches all CRC32C does, and more), else its CRC32C, else (version 1)
    its SHA-256; none for an entry without digests."""
    if key is not None and BLAKE3_KEYED in entry:
        return (BLAKE3_KEYED,)
    return tuple(name for name in (CRC32C, SHA256) if name in entry)


def mismatch(path: str, entry: dict[str, Any], got: dict[str, Any]) -> str | None:
    """Why the file ``path`` with digests ``got`` differs from its record ``entry``, or None."""
    if got["size_bytes"] != entry.get("size_bytes"):
        return f"{path} has {got['size_bytes']} bytes, the record says {entry.get('size_bytes')}"
    for name in (CRC32C, BLAKE3_KEYED, SHA256):
        if name in got and got[name] != entry.get(name):
            return f"{path} has {name} {str(got[name])[:16]}..., the record says " \
                   f"{str(entry.get(name))[:16]}..."
    return None
