"""The run directory between submit's checks and its creation, and again at each attempt's
start (docs/job-spec.md, "Who can write the run directory"). Another user (uid 65534, acting
through ``setpriv``) makes a folder of the path in a sticky, world-writable folder (``/tmp``'s
kind) in that window; missing folders are made 0700 whatever the umask; the supervisor checks
again before any step runs.

Tests run as root, as CI does: the other user needs a second uid.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml

from hpcflow.jobs import records, service, trust
from hpcflow.slurm.render import supervisor_config
from hpcflow.supervisor import __main__ as supervisor

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="another user needs a second uid; "
                                "these tests run as root (as in CI)")

OTHER = 65534


def as_other(*argv: str) -> None:
    """Run ``argv`` as uid/gid 65534 with no supplementary groups."""
    subprocess.run(["setpriv", "--reuid", str(OTHER), "--regid", str(OTHER), "--clear-groups",
                    *argv], check=True, timeout=30)


@pytest.fixture
def sticky() -> Path:
    """A world-writable folder with the sticky bit, as /tmp: passes the trust check, and anyone
    may make a folder in it."""
    top = Path(tempfile.mkdtemp(prefix="hpcflow-race-", dir="/tmp"))
    top.chmod(0o1777)
    yield top
    shutil.rmtree(top)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


PLANTS = [
    pytest.param(lambda p, t: as_other("mkdir", "-m", "0777", str(p)), "owned by uid 65534",
                 id="a-folder-of-theirs"),
    pytest.param(lambda p, t: (as_other("mkdir", "-m", "0777", str(t)),
                               as_other("ln", "-s", str(t), str(p))),
                 "a symlink owned by uid 65534", id="a-symlink-of-theirs"),
]


@pytest.mark.parametrize(("plant", "words"), PLANTS)
def test_a_parent_made_by_another_user_after_the_check_is_refused(
        slurm, hpcflow, sticky, spec_file, monkeypatch, plant, words):
    parent, theirs = sticky / "alice", sticky / "mallory"
    run_dir = parent / "run"
    real = records.read_run_files

    def in_the_window(path):  # after the trust checks, before the folders are made
        plant(parent, theirs)
        return real(path)

    monkeypatch.setattr(records, "read_run_files", in_the_window)
    result = hpcflow("submit", str(spec_file(run_dir)))
    assert result.exit_code == 3, result.output
    assert words in result.output and str(parent) in result.output
    assert not slurm.ran("sbatch")
    target = theirs if parent.is_symlink() else parent
    assert list(target.iterdir()) == []  # nothing of the job's was made in their folder


def test_missing_folders_are_made_0700_whatever_the_umask(slurm, hpcflow, sticky, spec_file):
    run_dir = sticky / "a" / "b" / "run"
    old = os.umask(0o002)
    try:
        result = hpcflow("submit", str(spec_file(run_dir)))
    finally:
        os.umask(old)
    assert result.exit_code == 0, result.output
    for folder in (sticky / "a", sticky / "a" / "b", run_dir, run_dir / ".hpcflow"):
        assert mode(folder) == 0o700, folder


def test_a_root_owned_symlink_on_the_way_is_followed(slurm, hpcflow, sticky, spec_file):
    """``/home`` -> ``/export/home``: a link its owner (root) keeps is not an attack."""
    (sticky / "export").mkdir(mode=0o755)
    (sticky / "home").symlink_to(sticky / "export")
    result = hpcflow("submit", str(spec_file(sticky / "home" / "run")))
    assert result.exit_code == 0, result.output
    assert mode(sticky / "export" / "run") == 0o700


def test_a_file_on_the_way_is_refused(sticky):
    (sticky / "file").write_text("x")
    with pytest.raises(service.SubmitError, match="it is not a folder"):
        trust.make_private_dirs("run_dir", sticky / "file" / "run")
    assert sorted(p.name for p in sticky.iterdir()) == ["file"]


# ---- the supervisor, at each attempt's start


def _attempt(run_dir: Path, tmp_path: Path, extra: dict, monkeypatch) -> tuple[str, list]:
    """Run ``python -m hpcflow.supervisor run`` in-process with Attempt stood in for; returns
    the answer and the attempts run."""
    ran = []
    spec = tmp_path / "attempt.yaml"
    spec.write_text(yaml.safe_dump({"name": "j", "time_limit": "10", "run_dir": str(run_dir),
                                    "program": {"argv": ["true"]}}))
    cfg = {**json.loads(supervisor_config(service.load_job_spec(spec))), **extra}

    class FakeAttempt:
        def __init__(self, job, **kw):
            ran.append(job.paths.run_dir)

        def run(self) -> int:
            return 7

    monkeypatch.setattr(supervisor, "Attempt", FakeAttempt)
    monkeypatch.setenv("HPCFLOW_RUN_DIR", str(run_dir))
    monkeypatch.setenv("HPCFLOW_CHECKPOINT_DIR", str(run_dir / "checkpoints"))
    answer = tmp_path / "answer"
    assert supervisor.main(["run", "--config", json.dumps(cfg), "--job-id", "42",
                            "--answer", str(answer)]) == 0
    return answer.read_text(), ran


def test_a_run_dir_swapped_after_submit_stops_the_attempt_before_any_step(
        slurm, hpcflow, sticky, spec_file, tmp_path, monkeypatch, capsys):
    """Submitted, then the folder above it turned out writable by a group member (umask 002
    before hpcflow made it 0700): the member put their own run directory, with its planted
    checkpoints, in its place."""
    run_dir = sticky / "grp" / "run"
    assert hpcflow("submit", str(spec_file(run_dir))).exit_code == 0
    (sticky / "grp").chmod(0o777)
    shutil.rmtree(run_dir)
    as_other("mkdir", "-p", "-m", "0777", str(run_dir / "checkpoints" / "step_9"))
    answer, ran = _attempt(run_dir, tmp_path, {}, monkeypatch)
    assert answer == "exit 1\n" and ran == []
    assert "not safe at this attempt's start" in capsys.readouterr().err
    assert not (run_dir / ".hpcflow").exists()  # nothing written there


def test_an_attempt_in_a_trusted_run_dir_runs(slurm, hpcflow, sticky, spec_file, tmp_path,
                                              monkeypatch):
    run_dir = sticky / "run"
    assert hpcflow("submit", str(spec_file(run_dir))).exit_code == 0
    assert _attempt(run_dir, tmp_path, {}, monkeypatch) == ("exit 7\n", [run_dir])


def test_allow_shared_dir_reaches_the_attempts_check(slurm, hpcflow, sticky, spec_file,
                                                     tmp_path, monkeypatch):
    run_dir = sticky / "project"
    run_dir.mkdir(mode=0o777)
    run_dir.chmod(0o777)
    os.chown(run_dir, OTHER, OTHER)
    result = hpcflow("submit", str(spec_file(run_dir)), "--allow-shared-dir", "--dry-run")
    assert result.exit_code == 0, result.output
    assert '"allow_shared_dir": true' in service.job_script(
        service.load_job_spec(spec_file(run_dir)), allow_shared_dir=True)
    assert _attempt(run_dir, tmp_path, {}, monkeypatch)[0] == "exit 1\n"
    assert _attempt(run_dir, tmp_path, {"allow_shared_dir": True}, monkeypatch)[0] == "exit 7\n"
