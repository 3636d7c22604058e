"""The root spot watcher against run directories their users made hostile (docs/spot.md, "What
runs as root"). Each test runs the watcher as root, as the node's service does, on a job owned
by a uid made for the test (one no account uses: the child that writes as the job's owner needs
no passwd entry), with the fake metadata service (tests/programs/fake_imds.py) and Slurm's
answers replayed as in test_spot_watcher.py."""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import stat
import tempfile
import time
from pathlib import Path

import pytest
from test_spot_watcher import Slurm, post, script_for

from hpcflow import protocol
from hpcflow.aws.imds import ImdsClient
from hpcflow.jobs import records
from hpcflow.spot.nodejobs import NodeJobs
from hpcflow.spot.watcher import EVENT, SpotWatcher

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the node's watcher runs as root; so "
                                "do these tests (as in CI): they need a second uid")


@pytest.fixture
def uid() -> int:
    """A uid (and gid of the same number) that no account or group uses."""
    for n in range(61000, 65000):
        try:
            pwd.getpwuid(n)
            continue
        except KeyError:
            pass
        try:
            grp.getgrgid(n)
        except KeyError:
            return n
    pytest.fail("no free uid in 61000..64999")


@pytest.fixture
def shared() -> Path:
    """A folder every user can pass through (0711), like /home or a project file system;
    tmp_path sits in root's 0700 folder, where another uid cannot reach."""
    top = Path(tempfile.mkdtemp(prefix="hpcflow-spot-", dir="/tmp"))
    top.chmod(0o711)
    yield top
    shutil.rmtree(top)


@pytest.fixture
def root_only(shared) -> Path:
    """A folder only root may write, standing in for /etc (profile.d, ld.so.preload)."""
    d = shared / "etc"
    d.mkdir(mode=0o755)
    (d / "root-file").write_text("root's\n")
    return d


def user_run_dir(shared: Path, uid: int, name: str) -> Path:
    """A run directory and state folder owned by ``uid``, as its batch script leaves them."""
    run = shared / name
    protocol.state_dir(run).mkdir(parents=True)
    for d in (run, protocol.state_dir(run)):
        os.chown(d, uid, uid)
        d.chmod(0o700)
    return run


def make(path: Path, uid: int, kind: str, target: Path | None = None) -> None:
    """Plant what the job's user put in place of a file (the user's own link or pipe)."""
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(target)
    os.lchown(path, uid, uid)


def watcher_for(imds, slurm, **kw) -> SpotWatcher:
    return SpotWatcher(ImdsClient(imds.url), "n1", NodeJobs(slurm), clock=lambda: 1000.0, **kw)


def spot_events(run_dir: Path, job: str) -> list[dict]:
    return [e for e in records.job_events(run_dir, job) if e["event"] == EVENT]


def test_a_users_job_gets_its_files_written_as_that_user_after_the_signal(imds, shared, uid):
    run = user_run_dir(shared, uid, "alice run's")
    slurm = Slurm({"41": script_for(run)}, ["41"])
    slurm.owners["41"] = uid
    state = protocol.state_dir(run)
    seen_at_signal = []
    slurm.on_scancel.append(lambda job: seen_at_signal.append(
        ((state / protocol.notice_name(job)).exists(), protocol.ledger_path(run).exists())))
    post(imds, "/_fake/notice", {"in_s": 120})
    result = watcher_for(imds, slurm).poll_once()
    assert [a.job_id for a in result.actions] == ["41"] and result.errors == []
    # The deadline was there for the trap when the signal came; the ledger line came after.
    assert seen_at_signal == [(True, False)]
    for path in (state / protocol.notice_name("41"), protocol.ledger_path(run)):
        st = path.lstat()
        assert stat.S_ISREG(st.st_mode) and (st.st_uid, st.st_gid) == (uid, uid), path
        assert stat.S_IMODE(st.st_mode) == 0o600, path
    assert (state / protocol.notice_name("41")).read_text() == f"{result.notice.time_s}\n"
    assert [e["node"] for e in spot_events(run, "41")] == ["n1"]


ATTACKS = [
    pytest.param("ledger", "symlink", "etc/ld.so.preload", id="ledger-dangling-symlink-into-etc"),
    pytest.param("ledger", "symlink", "etc/root-file", id="ledger-symlink-to-a-root-file"),
    pytest.param("ledger", "symlink", "/dev/zero", id="ledger-symlink-to-dev-zero"),
    pytest.param("ledger", "fifo", None, id="ledger-fifo"),
    pytest.param("notice", "symlink", "etc/ld.so.preload", id="notice-dangling-symlink-into-etc"),
    pytest.param("notice", "symlink", "etc/root-file", id="notice-symlink-to-a-root-file"),
    pytest.param("notice", "fifo", None, id="notice-fifo"),
]


@pytest.mark.parametrize(("which", "kind", "target"), ATTACKS)
def test_a_planted_link_or_pipe_is_refused_and_the_other_job_is_served(
        imds, shared, uid, root_only, which, kind, target, caplog):
    bad, good = user_run_dir(shared, uid, "mallory"), user_run_dir(shared, uid, "bob")
    planted = (protocol.ledger_path(bad) if which == "ledger"
               else protocol.state_dir(bad) / protocol.notice_name("41"))
    make(planted, uid, kind, None if target is None else
         Path(target) if target.startswith("/") else shared / target)
    slurm = Slurm({"41": script_for(bad), "42": script_for(good)}, ["41", "42"])
    slurm.owners.update({"41": uid, "42": uid})
    post(imds, "/_fake/notice", {"in_s": 120})
    started = time.monotonic()
    result = watcher_for(imds, slurm).poll_once()
    assert time.monotonic() - started < 5.0  # no pipe, no /dev/zero held it up
    # Both jobs were signalled; the honest one got its deadline and ledger line.
    assert slurm.scancels() == [["scancel", "-v", "--signal=USR1", "--batch", "41"],
                                ["scancel", "-v", "--signal=USR1", "--batch", "42"]]
    assert [a.job_id for a in result.actions] == ["41", "42"]
    assert (protocol.state_dir(good) / protocol.notice_name("42")).exists()
    assert len(spot_events(good, "42")) == 1
    # Root's folder is as it was: nothing created, nothing written, nothing handed over.
    assert sorted(p.name for p in root_only.iterdir()) == ["root-file"]
    st = (root_only / "root-file").stat()
    assert (root_only / "root-file").read_text() == "root's\n" and st.st_uid == 0
    if which == "ledger":
        assert "left alone" in caplog.text or "not followed" in caplog.text \
            or "named pipe" in caplog.text
        assert stat.S_ISLNK(planted.lstat().st_mode) or stat.S_ISFIFO(planted.lstat().st_mode)
    else:  # the notice file is replaced (rename(2) replaces the link itself), as the user
        st = planted.lstat()
        assert stat.S_ISREG(st.st_mode) and st.st_uid == uid
        assert planted.read_text() == f"{result.notice.time_s}\n"


def test_a_state_folder_the_user_does_not_own_is_left_alone(imds, shared, uid, caplog):
    """HPCFLOW_RUN_DIR pointed at another account's run directory (here root's)."""
    theirs = shared / "root's run"
    protocol.state_dir(theirs).mkdir(parents=True)
    protocol.state_dir(theirs).chmod(0o777)  # even one the job's user could write
    slurm = Slurm({"41": script_for(theirs)}, ["41"])
    slurm.owners["41"] = uid
    post(imds, "/_fake/notice", {"in_s": 120})
    result = watcher_for(imds, slurm).poll_once()
    assert slurm.scancels() == [["scancel", "-v", "--signal=USR1", "--batch", "41"]]
    assert [a.job_id for a in result.actions] == ["41"]
    assert list(protocol.state_dir(theirs).iterdir()) == []
    assert f"owned by uid 0, not by the job's user (uid {uid})" in caplog.text


def test_a_symlinked_state_folder_is_not_followed(imds, shared, uid, root_only, caplog):
    run = shared / "mallory"
    run.mkdir(mode=0o700)
    protocol.state_dir(run).symlink_to(root_only)
    os.chown(run, uid, uid)
    slurm = Slurm({"41": script_for(run)}, ["41"])
    slurm.owners["41"] = uid
    post(imds, "/_fake/notice", {"in_s": 120})
    watcher_for(imds, slurm).poll_once()
    assert len(slurm.scancels()) == 1
    assert sorted(p.name for p in root_only.iterdir()) == ["root-file"]
    assert "is a symbolic link (not followed)" in caplog.text


def test_file_steps_past_the_bound_are_stopped_and_the_signal_still_goes(imds, shared, uid,
                                                                        caplog):
    run = user_run_dir(shared, uid, "slow")
    slurm = Slurm({"41": script_for(run)}, ["41"])
    slurm.owners["41"] = uid
    post(imds, "/_fake/notice", {"in_s": 120})
    started = time.monotonic()
    result = watcher_for(imds, slurm, job_bound_s=0.001).poll_once()
    assert time.monotonic() - started < 5.0
    assert [a.job_id for a in result.actions] == ["41"] and len(slurm.scancels()) == 1
    assert "took longer than 0.001 s: stopped" in caplog.text


def test_a_job_with_no_owner_in_slurms_record_has_its_folder_left_alone(imds, shared, uid,
                                                                        caplog):
    run = user_run_dir(shared, uid, "anon")
    slurm = Slurm({"41": script_for(run)}, ["41"])
    slurm.owners["41"] = uid
    real = slurm.__call__

    def no_owner(argv, input=None, timeout_s=60.0):  # noqa: A002, ANN001
        out = real(argv, input, timeout_s)
        out.stdout = out.stdout.replace(f"UserId=u{uid}({uid}) ", "")
        return out

    post(imds, "/_fake/notice", {"in_s": 120})
    SpotWatcher(ImdsClient(imds.url), "n1", NodeJobs(no_owner)).poll_once()
    assert len(slurm.scancels()) == 1
    assert list(protocol.state_dir(run).iterdir()) == []
    assert "names no UserId/GroupId" in caplog.text


def test_the_duplicate_check_reads_only_the_ledgers_end(imds, shared, uid):
    """A restarted watcher finds the notice at the end of a 3 MiB ledger (reading 1 MiB)."""
    run = user_run_dir(shared, uid, "long run")
    slurm = Slurm({"41": script_for(run)}, ["41"])
    slurm.owners["41"] = uid
    post(imds, "/_fake/notice", {"in_s": 120})
    notice = ImdsClient(imds.url).instance_action()
    filler = json.dumps({"event": "signal", "job_id": "41", "pad": "x" * 200}) + "\n"
    ledger = protocol.ledger_path(run)
    ledger.write_text(filler * (3 * 2**20 // len(filler)) + json.dumps(
        {"event": EVENT, "job_id": "41", "notice_time": notice.time_s}) + "\n")
    os.chown(ledger, uid, uid)
    result = watcher_for(imds, slurm).poll_once()
    assert result.actions == [] and slurm.scancels() == []


HOSTILE_FIELDS = [
    pytest.param("Comment", "victim", id="comment-names-another-user"),
    pytest.param("Comment", "root", id="comment-names-root"),
    pytest.param("WorkDir", "victim", id="workdir-names-another-user"),
    pytest.param("StdOut", "root", id="stdout-names-root"),
    pytest.param("JobName", "victim", id="job-name-names-another-user"),
]


@pytest.mark.parametrize(("field", "whom"), HOSTILE_FIELDS)
def test_a_user_chosen_field_cannot_make_the_watcher_act_as_another_user(
        imds, shared, uid, field, whom, caplog):
    """A job whose comment, work dir, output path or name holds ``UserId=v(N) GroupId=v(N)``
    (scontrol prints them unquoted) and whose script names another user's run directory: the
    watcher still signals it, and writes nothing there, as anyone."""
    victim = uid + 1
    theirs = user_run_dir(shared, victim if whom == "victim" else 0, "victim's run")
    forged = "root(0)" if whom == "root" else f"v({victim})"
    hostile = f"x UserId={forged} GroupId={forged}"
    slurm = Slurm({"41": script_for(theirs)}, ["41"])
    slurm.owners["41"] = uid
    real = slurm.__call__

    def with_hostile_field(argv, input=None, timeout_s=60.0):  # noqa: A002, ANN001
        out = real(argv, input, timeout_s)
        if argv[:3] == ["scontrol", "show", "job"]:
            line = out.stdout.rstrip("\n")
            if field == "Comment":
                line += f" Comment={hostile}"
            else:
                key = f" {field}=" if field != "JobName" else "JobName="
                at = line.index(key) + len(key)
                line = line[:at] + hostile + " " + line[at:]
            out.stdout = line + "\n"
        return out

    post(imds, "/_fake/notice", {"in_s": 120})
    result = SpotWatcher(ImdsClient(imds.url), "n1", NodeJobs(with_hostile_field)).poll_once()
    assert [a.job_id for a in result.actions] == ["41"]
    assert slurm.scancels() == [["scancel", "-v", "--signal=USR1", "--batch", "41"]]
    assert list(protocol.state_dir(theirs).iterdir()) == []
    assert "prints UserId 2 times and GroupId 2 times" in caplog.text


def test_squeue_and_scontrol_must_name_the_same_owner(imds, shared, uid, caplog):
    run = user_run_dir(shared, uid, "mine")
    slurm = Slurm({"41": script_for(run)}, ["41"])
    slurm.owners["41"] = uid
    real = slurm.__call__

    def other_squeue(argv, input=None, timeout_s=60.0):  # noqa: A002, ANN001
        out = real(argv, input, timeout_s)
        if argv[0] == "squeue" and "--jobs=41" in argv:
            out.stdout = f"{uid + 1} {uid + 1}\n"
        return out

    post(imds, "/_fake/notice", {"in_s": 120})
    SpotWatcher(ImdsClient(imds.url), "n1", NodeJobs(other_squeue)).poll_once()
    assert len(slurm.scancels()) == 1
    assert list(protocol.state_dir(run).iterdir()) == []
    assert f"squeue names uid {uid + 1} gid {uid + 1}" in caplog.text
