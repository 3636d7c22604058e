"""Atomic writes: the whole new file or the old one, no temp file left, default permissions."""

from __future__ import annotations

import json
import os
import stat

import pytest

from hpcflow import fsutil


def test_write_json_atomic_leaves_no_temp_file(tmp_path):
    target = tmp_path / "committed-7-0.json"
    fsutil.write_json_atomic(target, {"step": 7, "time": 1.5})
    assert json.loads(target.read_text()) == {"step": 7, "time": 1.5}
    assert [p.name for p in tmp_path.iterdir()] == ["committed-7-0.json"]


def test_write_atomic_replaces_text_and_bytes(tmp_path):
    target = tmp_path / "f.txt"
    fsutil.write_atomic(target, "old\n")
    fsutil.write_atomic(target, b"new\n")
    assert target.read_bytes() == b"new\n"


def test_new_file_gets_the_umask_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        fsutil.write_atomic(tmp_path / "f", "x")
    finally:
        os.umask(old)
    assert (tmp_path / "f").stat().st_mode & 0o777 == 0o644


def test_a_failed_write_keeps_the_old_file_and_no_temp(tmp_path):
    target = tmp_path / "f.json"
    fsutil.write_atomic(target, "keep\n")
    with pytest.raises(TypeError):
        fsutil.write_json_atomic(target, {"bad": object()})
    assert target.read_text() == "keep\n"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_a_missing_folder_is_an_oserror(tmp_path):
    with pytest.raises(FileNotFoundError):
        fsutil.write_atomic(tmp_path / "no" / "f", "x")


def test_write_atomic_with_a_mode_ignores_the_umask(tmp_path):
    old = os.umask(0)
    try:
        fsutil.write_atomic(tmp_path / "secret", "x", mode=0o600)
    finally:
        os.umask(old)
    assert (tmp_path / "secret").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("make", [
    pytest.param(lambda p: os.mkfifo(p), id="fifo"),
    pytest.param(lambda p: p.symlink_to("/dev/zero"), id="link-to-device"),
    pytest.param(lambda p: p.mkdir(), id="folder"),
])
def test_bounded_reads_refuse_what_is_not_a_regular_file_without_blocking(tmp_path, make):
    path = tmp_path / "f"
    make(path)
    with pytest.raises(OSError):
        fsutil.read_tail(path, 10)
    with pytest.raises(OSError):
        fsutil.read_capped(path, 10)


def test_read_tail_keeps_the_end_and_says_how_much_was_left_out(tmp_path):
    (tmp_path / "f").write_bytes(b"0123456789")
    assert fsutil.read_tail(tmp_path / "f", 4) == (b"6789", 6)
    assert fsutil.read_tail(tmp_path / "f", 40) == (b"0123456789", 0)
    assert fsutil.read_capped(tmp_path / "f", 3) == b"012"
def test_write_atomic_at_replaces_a_planted_link_instead_of_writing_through_it(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("keep\n")
    folder = tmp_path / "state"
    folder.mkdir()
    (folder / "notice-1").symlink_to(target)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fsutil.write_atomic_at(fd, "notice-1", "123\n")
    finally:
        os.close(fd)
    assert target.read_text() == "keep\n"
    st = (folder / "notice-1").lstat()
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    assert (folder / "notice-1").read_text() == "123\n"
    assert sorted(p.name for p in folder.iterdir()) == ["notice-1"]  # no temp file left


@pytest.mark.parametrize("name", [pytest.param("", id="empty"), pytest.param("a/b", id="slash"),
                                  pytest.param("..", id="dotdot")])
def test_write_atomic_at_refuses_a_name_that_is_not_a_plain_file_name(tmp_path, name):
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(ValueError, match="is not a plain file name"):
            fsutil.write_atomic_at(fd, name, "x")
    finally:
        os.close(fd)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("durable", "fsyncs"), [(True, 2), (False, 0)])
def test_a_durable_write_syncs_the_file_and_the_folder_and_a_light_one_neither(
        tmp_path, monkeypatch, durable, fsyncs):
    calls = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd)))
    target = tmp_path / "0.json"
    fsutil.write_json_atomic(target, {"step": 3}, indent=None, durable=durable)
    assert json.loads(target.read_text()) == {"step": 3}
    assert len(calls) == fsyncs
    assert [p.name for p in tmp_path.iterdir()] == ["0.json"]


def test_commit_file_moves_a_finished_file_into_place_durably(tmp_path, monkeypatch):
    calls = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd)))
    tmp, final = tmp_path / "step_4.ckpt.tmp", tmp_path / "step_4.ckpt"
    tmp.write_bytes(b"weights")
    fsutil.commit_file(tmp, final)
    assert final.read_bytes() == b"weights" and not tmp.exists()
    assert len(calls) == 2  # the file, then the folder
    with pytest.raises(OSError):
        fsutil.commit_file(tmp, final)  # nothing to commit: an error, the old file stays
    assert final.read_bytes() == b"weights"
