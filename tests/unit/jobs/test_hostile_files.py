"""The file-system half of the hostile-input tests: what another user of the head node can put
in a run directory, a job index or a log path. ``submit``, ``status``, ``logs`` and ``report``
refuse or ignore it: no file readable by others, no folder someone else can write, no hang on a
FIFO, no memory filled from ``/dev/zero``, no bad index row used silently.

The tests run as root, so "another user" is a folder ``os.chown``-ed to uid 12345.
"""

from __future__ import annotations

import json
import os
import signal
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcflow.jobs import records, service
from hpcflow.jobs.report_load import load_report

OTHER_UID = 12345
SECRET = "tok-3141592653"


@pytest.fixture(autouse=True)
def _no_hang() -> Iterator[None]:
    """A read that blocks on a FIFO fails the test after 20 s instead of hanging the suite."""
    def boom(signum, frame):  # noqa: ANN001, ANN202
        raise TimeoutError("blocked: a hostile file hung the command")
    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


# ---- finding 3: files that hold env values are the user's alone


@pytest.mark.parametrize("umask", [0o000, 0o022], ids=["umask-000", "umask-022"])
def test_run_files_holding_env_values_are_private_whatever_the_umask(slurm, hpcflow, tmp_path,
                                                                     spec_file, umask):
    run_dir = tmp_path / "runs" / "r1"
    old = os.umask(umask)
    try:
        result = hpcflow("submit", str(spec_file(run_dir, env={"TOKEN": SECRET})))
    finally:
        os.umask(old)
    assert result.exit_code == 0, result.output
    assert mode(run_dir) == 0o700 and mode(run_dir / ".hpcflow") == 0o700
    assert mode(run_dir / "job.sbatch") == 0o700 and mode(run_dir / "job.yaml") == 0o600
    holding = [p for p in run_dir.rglob("*") if p.is_file() and SECRET in p.read_text()]
    assert sorted(p.name for p in holding) == ["job.sbatch", "job.yaml"]
    for path in holding:
        assert mode(path) & 0o077 == 0, path


def test_an_existing_run_dir_is_made_private(slurm, hpcflow, tmp_path, spec_file):
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o755)
    os.chmod(run_dir, 0o755)
    assert hpcflow("submit", str(spec_file(run_dir))).exit_code == 0
    assert mode(run_dir) == 0o700


# ---- finding 4: a folder someone else owns or can write is refused


def _foreign(path: Path, perm: int = 0o755) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.chown(path, OTHER_UID, OTHER_UID)
    os.chmod(path, perm)
    return path


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "submit"])
@pytest.mark.parametrize(("layout", "words"), [
    pytest.param(lambda t: (_foreign(t / "run", 0o777), {}), "owned by uid 12345",
                 id="run-dir-foreign-0777"),
    pytest.param(lambda t: (_foreign(t / "run"), {}), "owned by uid 12345", id="run-dir-foreign"),
    pytest.param(lambda t: (_foreign(t / "shared", 0o777) / "run", {}), "owned by uid 12345",
                 id="parent-foreign"),
    pytest.param(lambda t: (_world_writable(t / "open") / "run", {}), "writable by group and others",
                 id="parent-world-writable"),
    pytest.param(lambda t: (_world_writable(t / "grp", 0o770) / "run", {}), "writable by its group",
                 id="parent-group-writable"),
    pytest.param(lambda t: (t / "run", {"checkpoint": {"dir": str(_foreign(t / "ck") / "c")}}),
                 "checkpoint.dir", id="checkpoint-dir-parent-foreign"),
    pytest.param(lambda t: (t / "run", {"program": {"argv": ["true"], "workdir": str(
        _world_writable(t / "work"))}}), "program.workdir", id="workdir-world-writable"),
    pytest.param(lambda t: (t / "run", {"program": {"argv": ["true"], "workdir": str(
        _foreign(t / "team") / "code")}}), "program.workdir", id="workdir-parent-foreign"),
])
def test_a_folder_others_own_or_can_write_is_refused(slurm, hpcflow, tmp_path, spec_file,
                                                     dry_run, layout, words):
    run_dir, extra = layout(tmp_path)
    args = ["submit", str(spec_file(run_dir, **extra))] + (["--dry-run"] if dry_run else [])
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    result = hpcflow(*args)
    assert result.exit_code == 3, result.output
    assert words in result.output and "--allow-shared-dir" in result.output
    assert "plant a checkpoint" in result.output and "Traceback" not in result.output
    assert not slurm.ran("sbatch")
    after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert after == before


def _world_writable(path: Path, perm: int = 0o777) -> Path:
    """A folder of the user's with mode ``perm``, its group one the user shares with others."""
    path.mkdir()
    os.chown(path, -1, OTHER_UID)
    os.chmod(path, perm)
    return path


def test_a_sticky_world_writable_parent_is_accepted(slurm, hpcflow, tmp_path, spec_file):
    _world_writable(tmp_path / "scratch", 0o1777)
    assert hpcflow("submit", str(spec_file(tmp_path / "scratch" / "run"))).exit_code == 0


def test_allow_shared_dir_accepts_a_shared_folder_and_keeps_its_mode(slurm, hpcflow, tmp_path,
                                                                    spec_file):
    run_dir = _foreign(tmp_path / "project", 0o777)
    result = hpcflow("submit", str(spec_file(run_dir)), "--allow-shared-dir")
    assert result.exit_code == 0, result.output
    assert mode(run_dir) == 0o777 and mode(run_dir / ".hpcflow") == 0o700
    assert mode(run_dir / "job.yaml") == 0o600


@pytest.mark.parametrize("plant", [
    pytest.param(lambda r: (r / ".hpcflow").symlink_to(r.parent / "elsewhere"),
                 id="state-dir-symlink"),
    pytest.param(lambda r: ((r / ".hpcflow").mkdir(),
                            (r / ".hpcflow" / "events.jsonl").symlink_to("/etc/hostname")),
                 id="ledger-symlink"),
    pytest.param(lambda r: ((r / ".hpcflow").mkdir(), os.mkfifo(r / ".hpcflow" / "events.jsonl")),
                 id="ledger-fifo"),
    pytest.param(lambda r: ((r / ".hpcflow").mkdir(),
                            os.chown(r / ".hpcflow", OTHER_UID, OTHER_UID)),
                 id="state-dir-foreign"),
])
@pytest.mark.parametrize("extra", [[], ["--allow-shared-dir"]], ids=["plain", "allow-shared"])
def test_a_planted_state_folder_or_ledger_is_refused(slurm, hpcflow, tmp_path, spec_file, plant,
                                                     extra):
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    (tmp_path / "elsewhere").mkdir()
    plant(run_dir)
    result = hpcflow("submit", str(spec_file(run_dir)), *extra)
    assert result.exit_code == 3, result.output
    assert ".hpcflow" in result.output and "Traceback" not in result.output
    assert not slurm.ran("sbatch")
    assert list((tmp_path / "elsewhere").iterdir()) == []


# ---- finding 7: bounded reads of files another user may choose


def _show(job_id: str, workdir: Path, stdout: Path) -> tuple[int, str, str]:
    return (0, f"JobId={job_id} JobName=x UserId=other({OTHER_UID}) JobState=RUNNING "
               f"Requeue=1 Restarts=0 ExitCode=0:0 WorkDir={workdir} StdOut={stdout}\n", "")


@pytest.mark.parametrize("make", [
    pytest.param(lambda p: os.mkfifo(p), id="fifo"),
    pytest.param(lambda p: p.symlink_to("/dev/zero"), id="symlink-dev-zero"),
    pytest.param(lambda p: p.symlink_to("/etc/shadow"), id="symlink-file"),
])
def test_logs_of_a_foreign_job_refuse_a_hostile_stdout(slurm, hpcflow, tmp_path, make):
    log = tmp_path / "x-77.out"
    make(log)
    slurm.answers["scontrol"] = _show("77", tmp_path, log)
    result = hpcflow("logs", "77")
    assert result.exit_code == 4, result.output
    assert "regular files only" in result.output and str(log) in result.output


def test_logs_f_refuses_a_fifo(slurm, tmp_path):
    log = tmp_path / "x-77.out"
    os.mkfifo(log)
    from hpcflow.errors import SlurmQueryError

    with pytest.raises(SlurmQueryError, match="regular files only"):
        next(service.follow_log(log, "77", poll_s=0))


def test_logs_reads_only_the_tail_of_a_huge_log(slurm, tmp_path):
    log = tmp_path / "x-77.out"
    log.write_bytes(b"old line\n" * 100_000 + b"last line\n")
    slurm.answers["scontrol"] = _show("77", tmp_path, log)
    path, text, skipped = service.read_log("77", max_bytes=100)
    assert path == log and len(text) == 100 and text.endswith("last line\n")
    assert skipped == log.stat().st_size - 100


@pytest.mark.parametrize("make", [
    pytest.param(lambda p: os.mkfifo(p), id="fifo"),
    pytest.param(lambda p: p.symlink_to("/dev/zero"), id="symlink-dev-zero"),
])
def test_status_of_a_foreign_job_ignores_a_hostile_ledger(slurm, hpcflow, tmp_path, make):
    (tmp_path / ".hpcflow").mkdir()
    make(tmp_path / ".hpcflow" / "events.jsonl")
    slurm.answers["scontrol"] = _show("77", tmp_path, tmp_path / "x-77.out")
    result = hpcflow("status", "77", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["data"]["state"] == "RUNNING"


def test_report_ignores_a_log_that_is_a_fifo(slurm, tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    (run_dir / ".hpcflow").mkdir(parents=True)
    rec = records.JobRecord("77", "x", str(run_dir), 1.0)
    records.record_submission(rec, "", "")
    os.mkfifo(rec.log_path)
    (run_dir / ".hpcflow" / "events.jsonl").write_text(json.dumps(
        {"event": "job_end", "job_id": "77", "restart": 0, "time": 2.0, "rc": 0,
         "reason": "completed"}) + "\n")
    report, _ = load_report("77", now_s=3.0)
    assert report.job_id == "77"


def test_read_jsonl_never_reads_past_its_cap(tmp_path):
    path = tmp_path / "big.jsonl"
    path.write_text("".join(json.dumps({"n": i}) + "\n" for i in range(1000)))
    rows = records.read_jsonl(path, max_bytes=200)
    assert rows and rows[-1] == {"n": 999} and len(rows) < 30


# ---- a corrupt job index


@pytest.mark.parametrize("job_id", ["", "abc", "12;rm", None, "0"], ids=["empty", "letters",
                                                                          "shell", "null", "zero"])
def test_an_index_row_with_a_bad_job_id_is_skipped_with_a_warning(slurm, hpcflow, tmp_path,
                                                                  capsys, job_id):
    index = records.hpcflow_home() / "jobs.jsonl"
    index.parent.mkdir(parents=True)
    good = {"job_id": "5", "name": "a", "run_dir": str(tmp_path), "submitted_at": 1.0}
    index.write_text(json.dumps(good) + "\n" + json.dumps({**good, "job_id": job_id}) + "\n")
    assert [r.job_id for r in records.known_jobs()] == ["5"]
    err = capsys.readouterr().err
    assert f"{index}:2:" in err and "skipped" in err
    assert service.latest_job_id() == "5"


def test_a_run_dir_left_by_a_umask_002_submission_is_reused_and_made_private(slurm, hpcflow,
                                                                           tmp_path, spec_file):
    run_dir = tmp_path / "run"
    (run_dir / ".hpcflow").mkdir(parents=True)
    os.chmod(run_dir, 0o775)
    os.chmod(run_dir / ".hpcflow", 0o775)
    (run_dir / ".hpcflow" / "events.jsonl").write_text("")
    os.chmod(run_dir / ".hpcflow" / "events.jsonl", 0o664)
    (run_dir / "job.yaml").write_text("old\n")
    os.chmod(run_dir / "job.yaml", 0o664)
    result = hpcflow("submit", str(spec_file(run_dir)))
    assert result.exit_code == 0, result.output
    assert mode(run_dir) == 0o700 and mode(run_dir / ".hpcflow") == 0o700
    assert mode(run_dir / "job.yaml") == 0o600


def test_a_folder_in_place_of_job_yaml_is_refused(slurm, hpcflow, tmp_path, spec_file):
    (tmp_path / "run" / "job.yaml").mkdir(parents=True)
    result = hpcflow("submit", str(spec_file(tmp_path / "run")))
    assert result.exit_code == 3 and "job.yaml" in result.output, result.output
