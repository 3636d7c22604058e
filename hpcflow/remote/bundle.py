"""What ``hpcflow --host ... submit`` uploads: the job spec, and with ``--code`` a snapshot of
the git repository the spec lives in.

- Without ``--code`` only the spec file goes, as ``<run folder>/<spec name>``. Its relative paths
  (``run_dir``, ``program.workdir``) then point into the run folder on the head node: give
  absolute paths of the cluster's filesystem for code that is already there.
- With ``--code`` the committed tree of that repository (``git archive HEAD``: no untracked or
  ignored files, no submodules, ``export-ignore`` honoured) goes, and the spec keeps its place in
  it, so its relative paths mean on the head node what they mean in the checkout. The spec itself
  is the one on disk, uncommitted edits included; every other uncommitted change is left out
  and listed in a warning. ``.hpcflow-code.json`` in the run folder records the commit.
  Committed files with the well-known names of credentials files (``.env``, ``id_rsa``,
  ``*.pem``, ``secrets.yaml``..., :data:`SECRET_NAMES`) are listed in :attr:`Bundle.secret_like`:
  ``submit`` refuses to send them unless ``--code-with-secret-files`` says so
  (:func:`hpcflow.remote.session.run_remote`).

Both are one gzip tarball, built in memory (pure: no network).
"""

from __future__ import annotations

import fnmatch
import io
import json
import subprocess
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from hpcflow.errors import SpecError

#: Provenance of a code snapshot, written at the top of the run folder.
CODE_RECORD = ".hpcflow-code.json"


@dataclass(frozen=True)
class Bundle:
    """One upload.

    Attributes:
        data: the gzip tarball (paths relative to the run folder).
        spec_path: where the spec is inside it (POSIX, relative), what the remote submit gets.
        commit: the snapshot's commit id, or None without ``--code``.
        uncommitted: paths (relative to the repository) whose changes are NOT in the snapshot.
        secret_like: paths in the snapshot whose names are those of files that usually hold
            credentials (:func:`secret_like_names`), for a warning.
    """

    data: bytes
    spec_path: str
    commit: str | None = None
    uncommitted: list[str] = field(default_factory=list)
    secret_like: list[str] = field(default_factory=list)


#: File names (glob patterns, matched against the last part of a path) of files that usually hold
#: credentials: dotenv files (python-dotenv's ``.env``), OpenSSH's default private keys (ssh(1),
#: FILES), the AWS CLI's ``credentials``, ``.netrc`` (curl(1) --netrc), ``.git-credentials``
#: (git-credential-store(1)), ``.pypirc``, ``.npmrc``, PEM/PKCS#12 keys and Java key stores,
#: secrets files by name (``secrets.yaml``, ``secret.json``, ``.secrets``, ``*.secret``), Google
#: client and service-account keys (``client_secret*.json``, ``credentials.json``), KeePass
#: databases.
SECRET_NAMES = (".env", ".env.*", "*.env", "id_rsa", "id_dsa", "id_ecdsa", "id_ed25519",
                "id_ecdsa_sk", "id_ed25519_sk", "credentials", ".netrc", "_netrc",
                ".git-credentials", ".pypirc", ".npmrc", "*.pem", "*.key", "*.p12", "*.pfx",
                "*.jks", "*.keystore", ".htpasswd", "secrets.yaml", "secrets.yml",
                "secrets.json", "secrets.toml", "secrets.ini", "secret.yaml", "secret.yml",
                "secret.json", ".secrets", "*.secret", "*.secrets", "credentials.json",
                "client_secret*.json", "*service-account*.json", "*.kdbx")
#: Names that match a pattern above but are templates by convention (no values in them).
TEMPLATE_NAMES = (".env.example", ".env.sample", ".env.template", ".env.dist")


def secret_like_names(paths: list[str]) -> list[str]:
    """The paths whose last part is a well-known name of a credentials file (:data:`SECRET_NAMES`,
    less :data:`TEMPLATE_NAMES`), sorted. Pure: the files are not read."""
    out = []
    for path in paths:
        name = path.rstrip("/").rsplit("/", 1)[-1]
        if name in TEMPLATE_NAMES:
            continue
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in SECRET_NAMES):
            out.append(path)
    return sorted(out)


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=False)


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, int(time.time())
    tar.addfile(info, io.BytesIO(data))


def _read_spec(spec: Path) -> bytes:
    try:
        return spec.read_bytes()
    except OSError as exc:
        raise SpecError(f"SPEC: cannot read {str(spec)!r} ({exc.strerror or exc}); give the path "
                        "of a job spec file on this machine") from None


def spec_only(spec: Path) -> Bundle:
    """The spec alone, as ``<spec name>`` at the top of the run folder.

    Raises:
        SpecError: the spec file cannot be read.
    """
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        _add_bytes(tar, spec.name, _read_spec(spec))
    return Bundle(buf.getvalue(), spec.name)


def code_snapshot(spec: Path) -> Bundle:
    """The committed tree of the git repository that holds ``spec`` (``git archive HEAD``),
    with the spec from disk at its place in the tree.

    Raises:
        SpecError: the spec cannot be read, is not inside a git work tree, or the repository has
            no commit yet (the message says what to do).
    """
    text = _read_spec(spec)
    folder = spec.absolute().parent
    top = _git(folder, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise SpecError(f"--code: {str(spec)!r} is not inside a git repository; --code sends the "
                        "committed tree of the repository that holds the spec (git archive "
                        "HEAD). Commit your code and spec in one, or submit without --code")
    repo = Path(top.stdout.decode().strip())
    head = _git(repo, "rev-parse", "--verify", "HEAD")
    if head.returncode != 0:
        raise SpecError(f"--code: the repository {str(repo)!r} has no commit yet; commit the code "
                        "to send (git archive sends HEAD)")
    commit = head.stdout.decode().strip()
    rel = spec.absolute().resolve().relative_to(repo.resolve()).as_posix()
    archive = _git(repo, "archive", "--format=tar", commit)
    if archive.returncode != 0:
        raise SpecError(f"--code: git archive failed in {str(repo)!r}: "
                        f"{archive.stderr.decode(errors='replace').strip()}")
    # -z: NUL-separated, so odd file names come through as they are (git-status(1)).
    status = _git(repo, "status", "--porcelain", "-z", "--untracked-files=all")
    entries = iter(status.stdout.decode(errors="replace").split("\0"))
    changed = []
    for entry in entries:
        if len(entry) > 3:
            changed.append(entry[3:])
            if entry[0] in "RC":  # a rename or copy: the source path follows as its own entry
                next(entries, None)
    uncommitted = sorted(p for p in changed if p != rel)
    buf = io.BytesIO()
    sent = []
    with tarfile.open(fileobj=buf, mode="w:gz") as out, \
            tarfile.open(fileobj=io.BytesIO(archive.stdout), mode="r:") as tree:
        for member in tree:
            if member.name.rstrip("/") == rel or member.type == tarfile.XGLTYPE:
                continue
            out.addfile(member, tree.extractfile(member) if member.isfile() else None)
            if member.isfile():
                sent.append(member.name)
        _add_bytes(out, rel, text)
        record = {"repository": str(repo), "commit": commit, "spec": rel,
                  "uncommitted_not_sent": uncommitted}
        _add_bytes(out, CODE_RECORD, (json.dumps(record, indent=2) + "\n").encode())
    return Bundle(buf.getvalue(), rel, commit, uncommitted, secret_like_names(sent))
