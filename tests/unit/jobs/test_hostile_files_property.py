"""Property test, the file-system half of the hostile inputs: one to three hostile things planted
where hpcflow reads or writes (the ledger, the job log, ``submissions.jsonl``, the job index,
``job.yaml``, ``job.sbatch``, the state folder, the run directory, its parent), then ``submit``,
``status``, ``logs`` and ``report`` run against them. The plants are what another user of the
head node can do: a symlink to a victim file or to ``/dev/zero``, a FIFO, a huge sparse file, a
folder in place of a file, another owner, a world-writable folder. For every command:

- it ends (a blocked read fails the test after 20 s), with an exit code of 0, 2, 3 or 4, never
  1 (a bug), and without a traceback;
- the victim file and the victim folder are untouched: nothing was written through a link;
- ``submit`` is refused (exit 3) when the run directory, its parent, its state folder, its
  ledger or its submissions record was planted with a link, a FIFO, another owner or a
  world-writable folder; when it is accepted, the new files are the user's alone.
"""

from __future__ import annotations

import json
import os
import signal
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcflow.jobs import records

OTHER_UID = 12345
SETTINGS = settings(max_examples=int(os.environ.get("HPCFLOW_HOSTILE_EXAMPLES", "60")),
                    deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])

FILES = ["ledger", "log", "submissions", "index", "spec", "script"]
DIRS = ["state", "run_dir", "parent"]
FILE_PLANTS = ["fifo", "dev_zero", "link", "dir", "foreign", "huge"]
DIR_PLANTS = ["fifo", "link", "foreign", "world"]
#: Plants that make submit refuse the run directory (exit 3); the log and the index are not
#: the run directory's: a bad index is refused by the index check, a bad log is Slurm's to open.
REFUSED = {(t, p) for t in ("ledger", "submissions") for p in FILE_PLANTS if p != "huge"} | \
          {(t, p) for t in DIRS for p in DIR_PLANTS}


@pytest.fixture(autouse=True)
def _no_hang() -> Iterator[None]:
    def boom(signum, frame):  # noqa: ANN001, ANN202
        raise TimeoutError("blocked: a hostile file hung the command")
    old = signal.signal(signal.SIGALRM, boom)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def plant(path: Path, kind: str, victim: Path, victim_dir: Path, is_dir: bool) -> None:
    """Put ``kind`` at ``path`` (what was there is replaced)."""
    if path.is_dir() and not path.is_symlink():
        for child in sorted(path.rglob("*"), reverse=True):
            child.rmdir() if child.is_dir() and not child.is_symlink() else child.unlink()
        path.rmdir()
    elif path.exists() or path.is_symlink():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    actions: dict[str, Callable[[], object]] = {
        "fifo": lambda: os.mkfifo(path),
        "dev_zero": lambda: path.symlink_to("/dev/zero"),
        "link": lambda: path.symlink_to(victim_dir if is_dir else victim),
        "dir": lambda: path.mkdir(),
        "huge": lambda: os.truncate(_touch(path), 1 << 30),  # sparse: 1 GiB of NULs
        "foreign": lambda: os.chown(path.mkdir(mode=0o700) or path if is_dir else _touch(path),
                                    OTHER_UID, OTHER_UID),
        "world": lambda: os.chmod(path.mkdir() or path, 0o777),
    }
    actions[kind]()
    if path.is_symlink():
        os.lchown(path, OTHER_UID, OTHER_UID)  # planted by the other user


def _touch(path: Path) -> Path:
    path.write_text('{"event": "attempt_start", "job_id": "77", "restart": 0, "time": 1.0}\n')
    return path


def hostile() -> st.SearchStrategy[list[tuple[str, str]]]:
    one = st.one_of(st.tuples(st.sampled_from(FILES), st.sampled_from(FILE_PLANTS)),
                    st.tuples(st.sampled_from(DIRS), st.sampled_from(DIR_PLANTS)))
    return st.lists(one, min_size=1, max_size=3, unique_by=lambda x: x[0])


def layout(base: Path) -> dict[str, Path]:
    """A job 77 submitted into ``base/runs/r`` as hpcflow leaves it, and the paths to plant."""
    run_dir = base / "runs" / "r"
    (run_dir / ".hpcflow").mkdir(parents=True, mode=0o700)
    os.chmod(run_dir, 0o700)
    rec = records.JobRecord("77", "j", str(run_dir), 1.0)
    records.record_submission(rec, "", "")
    _touch(run_dir / ".hpcflow" / "events.jsonl")
    rec.log_path.write_text("hpcflow: attempt 1\n")
    return {"ledger": run_dir / ".hpcflow" / "events.jsonl", "log": rec.log_path,
            "submissions": run_dir / "submissions.jsonl", "spec": run_dir / "job.yaml",
            "script": run_dir / "job.sbatch",
            "index": records.hpcflow_home() / "jobs.jsonl", "state": run_dir / ".hpcflow",
            "run_dir": run_dir, "parent": base / "runs"}


@SETTINGS
@given(plants=hostile())
def test_hostile_files_are_refused_or_harmless(slurm, hpcflow, tmp_path_factory, monkeypatch,
                                               plants):
    base = tmp_path_factory.mktemp("fs")
    monkeypatch.setenv("HPCFLOW_HOME", str(base / "home"))
    victim = base / "victim.txt"
    victim.write_text("victim\n")
    victim_dir = base / "victim-dir"
    victim_dir.mkdir()
    for path in (victim, victim_dir):  # the other user's: writing there is handing them data
        os.chown(path, OTHER_UID, OTHER_UID)
    paths = layout(base)
    # The deepest plants first, so a planted parent does not hide a planted child.
    for target, kind in sorted(plants, key=lambda p: -len(paths[p[0]].parts)):
        plant(paths[target], kind, victim, victim_dir, target in DIRS)
    run_dir = paths["run_dir"]
    slurm.answers["scontrol"] = (0, f"JobId=77 JobName=j UserId=u({OTHER_UID}) JobState=COMPLETED "
                                    f"Requeue=1 Restarts=0 ExitCode=0:0 WorkDir={run_dir} "
                                    f"StdOut={paths['log']}\n", "")
    spec = base / "job.yaml"
    spec.write_text(yaml.safe_dump({"name": "j", "time_limit": "10", "run_dir": str(run_dir),
                                    "program": {"argv": ["true"]}, "env": {"T": "secret"}}))
    results = {}
    for args in (["submit", str(spec)], ["status", "77", "--json"], ["logs", "77"],
                 ["report", "77", "--json"]):
        signal.alarm(20)
        result = hpcflow(*args)
        signal.alarm(0)
        assert result.exit_code in (0, 2, 3, 4), (args, plants, result.output, result.exception)
        assert "Traceback" not in result.output and "internal error" not in result.output
        results[args[0]] = result
    assert victim.read_text() == "victim\n"
    assert list(victim_dir.iterdir()) == []
    submitted = results["submit"]
    if REFUSED & set(plants):
        assert submitted.exit_code == 3, (plants, submitted.output)
    if submitted.exit_code == 0:
        for name, want in (("job.yaml", 0o600), ("job.sbatch", 0o700), (".hpcflow", 0o700)):
            assert stat.S_IMODE(os.lstat(run_dir / name).st_mode) == want, (name, plants)
        assert stat.S_IMODE(os.stat(run_dir).st_mode) == 0o700
    status = results["status"]
    if status.exit_code == 0:
        assert json.loads(status.stdout)["data"]["job_id"] == "77"
