"""submit: an unusable run_dir or job index is refused before sbatch; a refused submission does
not overwrite the files of the job that used the run directory before."""

from __future__ import annotations

import pytest


def test_run_dir_that_is_a_file_is_refused_without_traceback(slurm, hpcflow, tmp_path, spec_file):
    target = tmp_path / "a-file"
    target.write_text("keep me\n")
    for run_dir in (target, target / "sub"):
        result = hpcflow("submit", str(spec_file(run_dir)))
        assert result.exit_code == 3, result.output
        assert "run_dir" in result.output and str(target) in result.output
        assert "Traceback" not in result.output
    assert target.read_text() == "keep me\n"
    assert not slurm.ran("sbatch")


def test_unwritable_job_index_is_refused_before_sbatch(slurm, hpcflow, tmp_path, monkeypatch,
                                                   spec_file):
    home = tmp_path / "home-file"
    home.write_text("")
    monkeypatch.setenv("HPCFLOW_HOME", str(home))
    result = hpcflow("submit", str(spec_file(tmp_path / "run")))
    assert result.exit_code == 3 and "HPCFLOW_HOME" in result.output
    assert not slurm.ran("sbatch")
    assert not (tmp_path / "run").exists()


def test_a_refused_submission_does_not_overwrite_the_previous_jobs_files(slurm, hpcflow, tmp_path,
                                                                       spec_file):
    run_dir = tmp_path / "run"
    assert hpcflow("submit", str(spec_file(run_dir))).exit_code == 0
    before = {p.relative_to(run_dir): p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    slurm.answers["sbatch"] = (1, "", "sbatch: error: invalid partition specified: nope\n")
    result = hpcflow("submit", str(spec_file(run_dir, partition="nope")))
    assert result.exit_code == 3 and "invalid partition" in result.output
    assert "left as it was" in result.output and "--dry-run" in result.output
    after = {p.relative_to(run_dir): p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    assert after == before


def test_a_refused_first_submission_leaves_nothing_behind(slurm, hpcflow, tmp_path, spec_file):
    run_dir = tmp_path / "runs" / "deep" / "run"
    slurm.answers["sbatch"] = (1, "", "sbatch: error: invalid partition specified: nope\n")
    result = hpcflow("submit", str(spec_file(run_dir, partition="nope")))
    assert result.exit_code == 3 and "invalid partition" in result.output
    assert slurm.ran("sbatch")
    assert not (tmp_path / "runs").exists()  # no job.yaml, no .hpcflow/, no folders it created


def test_a_refused_submission_into_an_existing_folder_keeps_only_what_was_there(
        slurm, hpcflow, tmp_path, spec_file):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "data.txt").write_text("mine\n")
    slurm.answers["sbatch"] = (1, "", "sbatch: error: Batch job submission failed\n")
    assert hpcflow("submit", str(spec_file(run_dir))).exit_code == 3
    assert sorted(p.name for p in run_dir.iterdir()) == ["data.txt"]


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "submit"])
@pytest.mark.parametrize(
    ("run_dir", "why"),
    [
        pytest.param("/etc/passwd", "is a file", id="a-file"),
        pytest.param("/etc/passwd/sub", "a part of it is a file", id="under-a-file"),
        pytest.param("/dev/null", "not a folder", id="a-device"),
        pytest.param("/proc/1", "cannot create folders in it", id="proc"),
        pytest.param("/proc/1/sub", "cannot create folders in '/proc/1'", id="under-proc"),
    ],
)
def test_an_unusable_run_dir_is_exit_3_with_or_without_dry_run(slurm, hpcflow, spec_file, dry_run,
                                                               run_dir, why):
    args = ["submit", str(spec_file(run_dir))] + (["--dry-run"] if dry_run else [])
    result = hpcflow(*args)
    assert result.exit_code == 3, result.output
    assert f"run_dir: {run_dir!r}" in result.output and why in result.output
    assert not slurm.ran("sbatch")


def test_a_symlink_loop_as_run_dir_is_exit_3(slurm, hpcflow, tmp_path, spec_file):
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    for run_dir in (tmp_path / "loop1", tmp_path / "loop1" / "sub"):
        result = hpcflow("submit", "--dry-run", str(spec_file(run_dir)))
        assert result.exit_code == 3, result.output
        assert "run_dir: " in result.output and "symbolic links" in result.output


def test_a_dry_run_into_a_new_folder_writes_nothing(slurm, hpcflow, tmp_path, spec_file):
    spec = spec_file(tmp_path / "new" / "run")
    before = sorted(tmp_path.rglob("*"))
    result = hpcflow("submit", "--dry-run", str(spec))
    assert result.exit_code == 0 and result.output.startswith("#!/usr/bin/env bash\n")
    assert sorted(tmp_path.rglob("*")) == before
