"""submit: an unusable run_dir or job index is refused before sbatch; a refused submission does
not overwrite the files of the job that used the run directory before."""

from __future__ import annotations


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
    before = {n: (run_dir / n).read_text() for n in ("job.yaml", "job.sbatch")}
    slurm.answers["sbatch"] = (1, "", "sbatch: error: invalid partition specified: nope\n")
    result = hpcflow("submit", str(spec_file(run_dir, partition="nope")))
    assert result.exit_code == 3 and "invalid partition" in result.output
    assert {n: (run_dir / n).read_text() for n in before} == before
    refused = run_dir / ".hpcflow" / "refused.sbatch"
    assert "--partition=nope" in refused.read_text() and str(refused) in result.output
    assert len((run_dir / "submissions.jsonl").read_text().splitlines()) == 1


def test_a_refused_first_submission_keeps_its_script_in_place(slurm, hpcflow, tmp_path, spec_file):
    run_dir = tmp_path / "run"
    slurm.answers["sbatch"] = (1, "", "sbatch: error: invalid partition specified: nope\n")
    result = hpcflow("submit", str(spec_file(run_dir, partition="nope")))
    assert result.exit_code == 3
    assert str(run_dir / "job.sbatch") in result.output
    assert "--partition=nope" in (run_dir / "job.sbatch").read_text()
