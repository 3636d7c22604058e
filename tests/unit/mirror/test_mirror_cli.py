"""``python -m hpcflow.mirror``: bad arguments exit 2 with the flag, the value and what is
allowed, before any S3 call."""

from __future__ import annotations

import pytest

from hpcflow.mirror.__main__ import main


@pytest.mark.parametrize(("argv", "message"), [
    pytest.param(["list", "--s3-uri", "s3://Bad"], "--s3-uri: 's3://Bad': bucket 'Bad'", id="uri"),
    pytest.param(["watch", "--checkpoint-dir", "c", "--s3-uri", "s3://bkt", "--keep", "0"],
                 "--keep: 0 (allowed: at least 1)", id="keep"),
    pytest.param(["pull", "--checkpoint-dir", "c", "--s3-uri", "s3://bkt", "--part-mib", "4"],
                 "--part-mib: 4 (allowed: 5 to 5120, S3's part sizes)", id="part"),
    pytest.param(["pull", "--checkpoint-dir", "c", "--s3-uri", "s3://bkt", "--concurrency", "0"],
                 "--concurrency: 0 (allowed: 1 to 64)", id="concurrency"),
    pytest.param(["watch", "--checkpoint-dir", "c", "--s3-uri", "s3://bkt", "--keep", "2",
                  "--poll-s", "0"], "--poll-s: 0.0 (allowed: above 0)", id="poll"),
])
def test_bad_arguments_exit_2_naming_flag_value_and_allowed(argv, message, capsys, tmp_path,
                                                            monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # nothing created
