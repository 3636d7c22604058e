"""--set never drops part of a value at ' #'; checkpoint.dir cannot collapse onto run_dir or
escape it."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcflow.errors import SpecError
from hpcflow.spec.job import load_job_spec

BASE = "name: j\ntime_limit: '10'\nrun_dir: /r\nprogram: {argv: [/bin/true]}\n"


@pytest.fixture
def spec_path(tmp_path: Path) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(BASE)
    return path


# ---- --set and ' #' ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("override", "field", "value"),
    [
        pytest.param("env.NOTE=run #2", "NOTE", "run #2", id="comment-kept"),
        pytest.param("env.NOTE=a   #b #c", "NOTE", "a   #b #c", id="spaces-kept"),
        pytest.param("env.NOTE=run#2", "NOTE", "run#2", id="no-space-was-never-a-comment"),
        pytest.param("env.N=5 # five", "N", "5 # five", id="number-then-comment"),
        pytest.param("env.Q='a b' #c", "Q", "'a b' #c", id="quoted-then-comment"),
        pytest.param("env.P=plain", "P", "plain", id="plain"),
    ],
)
def test_set_keeps_the_whole_value_after_a_hash(spec_path: Path, override: str, field: str,
                                                value: str) -> None:
    assert load_job_spec(spec_path, [override]).env[field] == value


def test_set_with_a_comment_after_a_list_is_refused(spec_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        load_job_spec(spec_path, ["program.argv=[/bin/echo, a] #b"])
    assert "--set program.argv" in str(info.value) and "YAML comment" in str(info.value)


def test_set_with_a_comment_on_a_number_field_is_not_silently_a_number(spec_path: Path) -> None:
    with pytest.raises(SpecError, match=r"nodes: '4 #four'"):
        load_job_spec(spec_path, ["nodes=4 #four"])


# ---- checkpoint.dir ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "why"),
    [
        pytest.param("", "non-empty", id="empty-collapsed-onto-run-dir"),
        pytest.param(".", "must not be run_dir itself", id="dot"),
        pytest.param("a/..", "must not be run_dir itself", id="back-to-run-dir"),
        pytest.param("/r", "must not be run_dir itself", id="absolute-run-dir"),
        pytest.param("../../../../etc", "must stay inside it", id="escapes"),
        pytest.param("..", "must stay inside it", id="parent"),
        pytest.param("a/../../x", "must stay inside it", id="escapes-after-a-detour"),
    ],
)
def test_checkpoint_dir_must_be_its_own_folder(spec_path: Path, value: str, why: str) -> None:
    with pytest.raises(SpecError) as info:
        load_job_spec(spec_path, [f"checkpoint.dir='{value}'"])
    (line,) = info.value.problems
    assert line.startswith(f"{spec_path}: checkpoint.dir: ") and why in line


@pytest.mark.parametrize(
    ("value", "placed"),
    [
        pytest.param("ckpt", "/r/ckpt", id="relative"),
        pytest.param("a/../ckpt", "/r/ckpt", id="relative-detour"),
        pytest.param("/fsx/ckpt", "/fsx/ckpt", id="absolute-elsewhere"),
        pytest.param("/r/ckpt", "/r/ckpt", id="absolute-inside"),
    ],
)
def test_checkpoint_dir_inside_run_dir_or_absolute_is_accepted(spec_path: Path, value: str,
                                                              placed: str) -> None:
    assert load_job_spec(spec_path, [f"checkpoint.dir={value}"]).checkpoint_dir == Path(placed)
