"""hpcflow's own state folder (``HPCFLOW_HOME``: the job index and the SSH host keys it pinned)
is made 0700 one level at a time and refused when it, or a folder above it, is someone else's
or writable by others (docs/remote.md, step 1).

Tests run as root, as CI does: "another user" is uid 65534.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from hpcflow.remote.ssh import Host, RemoteError, open_connection

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="another user needs a second uid; "
                                "these tests run as root (as in CI)")

OTHER = 65534


@pytest.fixture
def sticky() -> Path:
    top = Path(tempfile.mkdtemp(prefix="hpcflow-home-", dir="/tmp"))
    top.chmod(0o1777)
    yield top
    shutil.rmtree(top)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_the_state_folder_and_its_parents_are_made_0700_whatever_the_umask(
        slurm, hpcflow, sticky, spec_file, tmp_path, monkeypatch):
    home = sticky / "state" / "hpcflow"
    monkeypatch.setenv("HPCFLOW_HOME", str(home))
    old = os.umask(0o002)
    try:
        result = hpcflow("submit", str(spec_file(tmp_path / "run")))
    finally:
        os.umask(old)
    assert result.exit_code == 0, result.output
    assert mode(sticky / "state") == 0o700 and mode(home) == 0o700
    assert (home / "jobs.jsonl").exists()


def _theirs(sticky: Path) -> Path:
    """A group member's state folder put in place of the user's: a job index naming their
    run directory."""
    home = sticky / "hpcflow"
    home.mkdir()
    (home / "jobs.jsonl").write_text(json.dumps({"job_id": "77", "name": "x", "run_dir":
                                                 str(sticky / "trap"), "submitted_at": 1}) + "\n")
    os.chown(home, OTHER, OTHER)
    home.chmod(0o775)
    return home


def _open(sticky: Path) -> Path:
    home = sticky / "hpcflow"
    home.mkdir()
    home.chmod(0o777)
    return home


def _linked(sticky: Path) -> Path:
    _theirs(sticky).rename(sticky / "elsewhere")
    (sticky / "hpcflow").symlink_to(sticky / "elsewhere")
    os.lchown(sticky / "hpcflow", OTHER, OTHER)
    return sticky / "hpcflow"


HOMES = [
    pytest.param(_theirs, "owned by uid 65534", id="their-folder"),
    pytest.param(_open, "writable by others", id="world-writable"),
    pytest.param(_linked, "a symlink owned by uid 65534", id="their-symlink"),
]


@pytest.mark.parametrize(("make", "words"), HOMES)
def test_a_state_folder_someone_else_can_write_is_refused(slurm, hpcflow, sticky, spec_file,
                                                          tmp_path, monkeypatch, make, words):
    home = make(sticky)
    monkeypatch.setenv("HPCFLOW_HOME", str(home))
    result = hpcflow("submit", str(spec_file(tmp_path / "run")))
    assert result.exit_code == 3, result.output
    assert words in result.output and "job index" in result.output
    assert not slurm.ran("sbatch")
    listed = hpcflow("list")
    assert listed.exit_code == 3 and "trap" not in listed.output
    with pytest.raises(RemoteError, match="SSH host keys"):
        open_connection(Host("127.0.0.1", 9), accept_new_host_keys=True, connect_timeout_s=1)
