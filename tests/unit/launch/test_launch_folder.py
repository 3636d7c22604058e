"""hpcflow.launch.Executor's folder gets ``hpcflow submit``'s run-directory checks (docs/python.md,
"Who can write the folder"): one another user owns or can write is refused before anything is
written or read there, it is made 0700, its pickles are the user's alone, and a result pickle
planted where another user can write is never unpickled.

Tests run as root, as CI does: "another user" is uid 65534, acting through ``setpriv``.
"""

from __future__ import annotations

import os
import pickle
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from hpcflow.errors import SubmitError
from hpcflow.launch import Executor
from hpcflow.launch.slurm import HpcflowJob

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="another user needs a second uid; "
                                "these tests run as root (as in CI)")

OTHER = 65534


def as_other(*argv: str, input: bytes | None = None) -> None:  # noqa: A002
    """Run ``argv`` as uid/gid 65534 with no supplementary groups."""
    subprocess.run(["setpriv", "--reuid", str(OTHER), "--regid", str(OTHER), "--clear-groups",
                    *argv], check=True, timeout=30, input=input)


@pytest.fixture
def shared() -> Path:
    """A folder anyone may pass through (0711), outside root's own tmp_path."""
    top = Path(tempfile.mkdtemp(prefix="hpcflow-launch-", dir="/tmp"))
    top.chmod(0o711)
    yield top
    shutil.rmtree(top)


class Planted:
    """Unpickling it leaves a mark: code of the other user's, run as the one who unpickles."""

    def __init__(self, mark: Path) -> None:
        self.mark = mark

    def __reduce__(self):  # noqa: ANN204
        return (Path.write_text, (self.mark, "ran"))


def theirs(shared: Path) -> Path:
    """A folder of the other user's, mode 0777 (as they left it for everyone)."""
    folder = shared / "theirs"
    folder.mkdir()
    os.chown(folder, OTHER, OTHER)
    folder.chmod(0o777)
    return folder


LAYOUTS = [
    pytest.param(theirs, "owned by uid 65534", id="their-folder-0777"),
    pytest.param(lambda s: theirs(s) / "mine", "owned by uid 65534", id="inside-theirs"),
    pytest.param(lambda s: ((s / "open").mkdir(), (s / "open").chmod(0o777), s / "open" / "x")[2],
                 "writable by others", id="under-a-world-writable-folder"),
]


@pytest.mark.parametrize(("layout", "words"), LAYOUTS)
def test_a_folder_others_own_or_can_write_is_refused_before_anything_is_written(
        shared, layout, words):
    folder = layout(shared)
    before = sorted(p.relative_to(shared) for p in shared.rglob("*"))
    with pytest.raises(SubmitError) as info:
        Executor(folder, cluster="local")
    assert words in str(info.value) and str(folder) in str(info.value)
    assert "plant a checkpoint" in str(info.value) and "--allow-shared-dir" not in str(info.value)
    assert sorted(p.relative_to(shared) for p in shared.rglob("*")) == before


def test_the_folder_and_everything_a_submission_writes_are_private(shared):
    folder = shared / "new" / "runs"
    old = os.umask(0o022)
    try:
        executor = Executor(folder, cluster="local", time_limit="5")
        job = executor.submit(divmod, 7, 2)
        assert job.result() == (3, 1)
        assert os.umask(0o022) == 0o022  # the caller's umask is given back
    finally:
        os.umask(old)
    for path in (shared / "new", folder):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path
    written = [p for p in folder.rglob("*") if not p.is_symlink()]
    assert any(p.name.endswith("_submitted.pkl") for p in written)
    for path in written:
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path


def test_a_result_planted_where_another_user_can_write_is_not_unpickled(shared, tmp_path):
    """The other user renamed the logs and put their own result pickle in place: neither
    ``done()`` nor ``result()`` unpickles it."""
    folder = theirs(shared)
    job = HpcflowJob(folder=folder, job_id="4242")
    mark = tmp_path / "mark"
    as_other("sh", "-c", 'cat > "$1"', "-", str(job.paths.result_pickle),
             input=pickle.dumps(("success", Planted(mark))))
    with pytest.raises(SubmitError, match="owned by uid 65534"):
        job.done()
    with pytest.raises(SubmitError, match="owned by uid 65534"):
        job.result()
    assert not mark.exists()
