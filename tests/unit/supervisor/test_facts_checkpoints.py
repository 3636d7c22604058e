"""The committed checkpoint the supervisor's restart rules go back to
(hpcflow.supervisor.facts.latest_checkpoint), in each form the runtime and its adapters write."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcflow import protocol as P
from hpcflow.supervisor.facts import latest_checkpoint


def _folder(root: Path, name: str, committed: bool = True) -> None:
    (root / name).mkdir()
    if committed:
        (root / name / P.COMMIT_RECORD).write_text("{}")


@pytest.mark.parametrize(("make", "step"), [
    pytest.param(lambda r: (_folder(r, "step_5"), _folder(r, "step_10")), 10, id="runtime"),
    pytest.param(lambda r: (_folder(r, "checkpoint-300"), _folder(r, "checkpoint-350")), 350,
                 id="hugging-face-adapter"),
    pytest.param(lambda r: ((r / "step_40.ckpt").write_text("x"),
                            (r / "step_80.ckpt.tmp").write_text("x")), 40,
                 id="lightning-adapter-not-its-temp-file"),
    pytest.param(lambda r: (_folder(r, "step_5"), _folder(r, "step_9", committed=False)), 5,
                 id="a-folder-without-its-record-is-not-committed"),
    pytest.param(lambda r: _folder(r, "checkpoint-7", committed=False), None, id="none-committed"),
    pytest.param(lambda r: ((r / "step_12").write_text("a file"),
                            (r / "checkpoint-3.ckpt").write_text("x")), None,
                 id="names-of-the-wrong-kind"),
])
def test_each_committed_form_counts(tmp_path: Path, make, step) -> None:
    make(tmp_path)
    assert latest_checkpoint(tmp_path) == step


def test_a_link_is_not_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _folder(elsewhere, "step_99")
    root = tmp_path / "ckpt"
    root.mkdir()
    (root / "step_99").symlink_to(elsewhere / "step_99")
    (root / "step_98.ckpt").symlink_to(elsewhere / "step_99" / P.COMMIT_RECORD)
    assert latest_checkpoint(root) is None


def test_a_missing_folder_has_none(tmp_path: Path) -> None:
    assert latest_checkpoint(tmp_path / "missing") is None
