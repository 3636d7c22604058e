"""The readers of a run directory with what a careless reader trips on: impossible figures are
flagged, an output path that is a device or a FIFO is refused (run as root, a rename onto
``/dev/full`` replaced the device), nothing is written before the command knows it succeeds, and
a job index that is a FIFO is named as such."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from hpcflow import ledger
from hpcflow import protocol as P
from hpcflow.jobs import records

T0 = 1_700_000_000


def _job(base: Path, log: list[str]) -> Path:
    run_dir = base / "runs" / "r"
    (run_dir / ".hpcflow").mkdir(parents=True, mode=0o700)
    os.chmod(run_dir, 0o700)
    rec = records.JobRecord("77", "j", str(run_dir), float(T0))
    records.record_submission(rec, "", "")
    P.ledger_path(run_dir).write_text(
        ledger.event_line(P.EVENT_ATTEMPT_START, job_id="77", restart=0, time_s=T0 + 10)
        + ledger.event_line(P.EVENT_JOB_END, job_id="77", restart=0, time_s=T0 + 100, rc=0,
                            reason="completed"))
    rec.log_path.write_text("\n".join(log) + "\n")
    return run_dir


def test_goodput_over_100_percent_is_flagged_as_impossible(slurm, hpcflow, tmp_path):
    banner = "hpcflow: 2026-01-01T00:00:00+0000 job 77 attempt 0 on n1: start"
    steps = [f'{P.TAG_STEP} {{"step": {k}, "step_time_s": 50.0}}' for k in range(60)]
    _job(tmp_path, [banner, *steps])
    result = hpcflow("report", "77", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)["data"]
    assert doc["goodput"] > 1
    assert len(doc["notes"]) == 1 and "is impossible" in doc["notes"][0]
    text = hpcflow("report", "77")
    assert "is impossible" in text.output


def test_thirty_thousand_program_starts_are_read_in_linear_time(slurm, hpcflow, tmp_path):
    banner = "hpcflow: 2026-01-01T00:00:00+0000 job 77 attempt 0 on n1: start"
    log = [banner]
    for k in range(30_000):
        log += [P.TAG_START + " {}", f'{P.TAG_STEP} {{"step": {k % 7}, "step_time_s": 0.001}}']
    _job(tmp_path, log)
    result = hpcflow("report", "77", "--json")  # was 60 s (quadratic); ~2 s here
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)["data"]
    assert doc["totals"]["lost"] > 0 and doc["goodput"] <= 1


def test_skipped_lines_are_counted_and_said(slurm, hpcflow, tmp_path):
    banner = "hpcflow: 2026-01-01T00:00:00+0000 job 77 attempt 0 on n1: start"
    run_dir = _job(tmp_path, [banner, f'{P.TAG_STEP} {{"step": "x"}}',
                              f'{P.TAG_RESUME} {{"step": null}}', f'{P.TAG_STEP} {{"step": 1e400}}'])
    with P.ledger_path(run_dir).open("a") as f:
        f.write('{"event": "step_end", "job_id": "77", "restart": "0", "time": 1}\n')
    result = hpcflow("report", "77", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["data"]["skipped"] == {"ledger": 1, "log": 3}
    assert "skipped lines that do not decode: 1 in the ledger, 3 in the log" in result.output


def _fifo(tmp_path: Path) -> Path:
    path = tmp_path / "out.svg"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("target", ["fifo", "/dev/full", "/dev/null"])
@pytest.mark.parametrize("command", ["report", "plan"])
def test_an_output_path_that_is_not_a_regular_file_is_refused(slurm, hpcflow, tmp_path, target,
                                                              command):
    _job(tmp_path, [])
    path = _fifo(tmp_path) if target == "fifo" else Path(target)
    if not path.exists():
        pytest.fail(f"{path} is missing on this machine")
    before = os.stat(path).st_mode
    args = (["report", "77", "--svg", str(path)] if command == "report" else
            ["plan", "goodput", "--nodes", "2", "--instance", "p5.48xlarge", "--hours", "10",
             "--price-source", "table", "--save-s", "5", "--restart-s", "60", "--startup-s",
             "60", "--runs", "5", "--svg", str(path)])
    result = hpcflow(*args)
    assert result.exit_code == 2, result.output
    assert "--svg: " in result.output and "an output path must be a regular file" in result.output
    assert os.stat(path).st_mode == before and stat.S_IFMT(before) != stat.S_IFREG


@pytest.mark.parametrize("command", ["report", "plan"])
def test_an_output_path_that_is_a_folder_is_refused_and_left_alone(slurm, hpcflow, tmp_path,
                                                                   command):
    run_dir = _job(tmp_path, [])
    folder = tmp_path / "out.svg"
    folder.mkdir()
    args = (["report", "77", "--svg", str(folder)] if command == "report" else
            ["plan", "goodput", "--nodes", "2", "--instance", "p5.48xlarge", "--hours", "10",
             "--price-source", "table", "--save-s", "5", "--restart-s", "60", "--startup-s",
             "60", "--runs", "5", "--svg", str(folder)])
    result = hpcflow(*args)
    assert result.exit_code == 2, result.output
    assert "'--svg'" in result.output and "is a directory" in result.output
    assert list(folder.iterdir()) == [] and not list(run_dir.glob("*.svg"))


def test_report_writes_no_timeline_when_it_fails_after_reading(slurm, hpcflow, tmp_path,
                                                               monkeypatch):
    run_dir = _job(tmp_path, [])
    from hpcflow.jobs import measured

    def boom(report):  # noqa: ANN001, ANN202
        raise RuntimeError("late failure")

    monkeypatch.setattr(measured, "measured_costs", boom)
    result = hpcflow("report", "77", "--json")
    assert result.exit_code == 1
    assert not (run_dir / "report-77.svg").exists()
    assert not list(tmp_path.rglob("*.svg"))


def test_status_names_a_job_index_that_is_a_fifo(slurm, hpcflow, tmp_path):
    home = records.private_home()
    os.mkfifo(home / "jobs.jsonl")
    result = hpcflow("status")
    assert result.exit_code == 2, result.output
    assert "jobs.jsonl is a FIFO, so it is not read" in result.output
    assert "no job was submitted" not in result.output


@pytest.mark.parametrize("bad, skipped", [
    pytest.param([], 0, id="clean"),
    pytest.param(['{"event": "step_end", "job_id": "77", "restart": "0", "time": 1}'], 1,
                 id="wrong-type"),
    pytest.param(["\udcff not json", "[1, 2]", '{"event": "attempt_start", "job_id": "77", '
                  '"restart": 0, "time": true}'], 3, id="undecodable-list-and-bool-time"),
])
def test_status_counts_the_ledger_lines_it_skipped(slurm, hpcflow, tmp_path, bad, skipped):
    run_dir = _job(tmp_path, [])
    with P.ledger_path(run_dir).open("a", encoding="utf-8", errors="surrogateescape") as f:
        f.write("".join(line + "\n" for line in bad))
    result = hpcflow("status", "77", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)["data"]
    assert doc["ledger_skipped"] == skipped
    assert doc["state"] == "COMPLETED" and doc["attempts"] == 1  # the rest still counts
    warning = f"skipped lines that do not decode: {skipped} in the ledger"
    assert (warning in result.output) == bool(skipped), result.output
    text = hpcflow("status", "77")
    assert text.exit_code == 0 and (warning in text.output) == bool(skipped), text.output


@pytest.mark.parametrize("make", [os.mkfifo, os.mkdir], ids=["fifo", "folder"])
def test_list_names_a_job_index_that_is_not_a_regular_file(slurm, hpcflow, make):
    make(records.private_home() / "jobs.jsonl")
    result = hpcflow("list", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["data"] == []
    assert "jobs.jsonl is a " in result.output and "so it is not read" in result.output
    assert "no job is listed from it" in result.output
