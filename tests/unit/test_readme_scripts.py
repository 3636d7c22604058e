"""README.md's two heavy blocks, `bash scripts/quickstart.sh` and `bash tests/run.sh`: each script
runs here as written (main() of the script, sourced), with what it starts replaced by fakes that
record their arguments: `bash scripts/install.sh` prints a fake virtualenv whose `hpcflow` and
`python` only log. What this checks: the commands each script runs, in order, with every
argument; that each `hpcflow` command and flag exists in the real CLI; that tests/run.sh's fast
suite is the README's fast-suite command; that a failed phase skips the benchmarks and fails
the run. What it does not: installing, the cluster, the tests and the example job themselves
(tests/unit/test_install_script.py reads install.sh's plan; tests/integration/slurm/
test_rehearse.py runs the quickstart's rehearsal on the local cluster; CI runs tests/run.sh)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
from readme_text import README, REPO

from hpcflow.cli.main import cli

FAKE_HPCFLOW = """#!/usr/bin/env bash
{ printf 'hpcflow'; printf ' %q' "$@"; echo; } >> "$FAKE_LOG"
if [[ "$1 $2" == "local-cluster rehearse" ]]; then
  printf '{"ok": true, "data": {"job_id": "4242"}, "error": null}\\n'
fi
"""
FAKE_PYTHON = """#!/usr/bin/env bash
if [[ "$1" == "-c" ]]; then exec "$REAL_PYTHON" "$@"; fi
{ printf 'python OMP_NUM_THREADS=%s' "${OMP_NUM_THREADS:-}"; printf ' %q' "$@"; echo; } >> "$FAKE_LOG"
exit "${FAKE_PYTEST_RC:-0}"
"""
# Inside the sourced script, `bash X` calls this function, not the program.
FAKE_BASH = """bash() {
  printf 'bash %s\\n' "$*" >> "$FAKE_LOG"
  if [[ "$1" == scripts/install.sh ]]; then printf '%s\\n' "$FAKE_VENV"; fi
}"""


def _readme_block(heading: str, index: int = 0) -> str:
    section = README.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```bash\n(.*?)^```", section, re.M | re.S)[index].strip()


def _run_main(script: str, tmp_path: Path, fake_hpcflow: str = FAKE_HPCFLOW, **env: str
              ) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    for name, text in (("hpcflow", fake_hpcflow), ("python", FAKE_PYTHON)):
        (venv / "bin" / name).write_text(text)
        (venv / "bin" / name).chmod(0o755)
    log = tmp_path / "log"
    log.touch()
    full = {**os.environ, "FAKE_LOG": str(log), "FAKE_VENV": str(venv),
            "REAL_PYTHON": sys.executable, **env}
    proc = subprocess.run(["bash", "-c", f"source {shlex.quote(script)}\n{FAKE_BASH}\nmain"],
                          cwd=REPO, env=full, capture_output=True, text=True, timeout=60)
    return proc, log.read_text().splitlines()


def _command_exists(words: list[str]) -> None:
    """`words` (after `hpcflow`) name a real command, and its flags are that command's."""
    command: click.Command = cli
    rest = list(words)
    while isinstance(command, click.Group) and rest and not rest[0].startswith("-"):
        sub = command.get_command(click.Context(cli), rest[0])
        assert sub is not None, f"hpcflow {' '.join(words)}: no command {rest[0]!r}"
        command, rest = sub, rest[1:]
    flags = {opt for p in command.params if isinstance(p, click.Option) for opt in p.opts}
    used = {w.split("=")[0] for w in rest if w.startswith("-")}
    assert used <= flags, f"hpcflow {' '.join(words)}: unknown {sorted(used - flags)}"


def test_the_quickstart_block_runs_install_cluster_rehearsal_and_status(tmp_path: Path):
    assert _readme_block("Quickstart") == "bash scripts/quickstart.sh"
    proc, log = _run_main("scripts/quickstart.sh", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert log[:2] == ["bash scripts/install.sh", "hpcflow local-cluster up"]
    rehearse = shlex.split(log[2])
    assert rehearse[:3] == ["hpcflow", "local-cluster", "rehearse"]
    assert rehearse[3] == "examples/tiny-dp.yaml" and (REPO / rehearse[3]).is_file()
    assert rehearse[4] == "--set" and re.fullmatch(
        rf"run_dir={re.escape(str(REPO))}/runs/tiny-dp-\d{{8}}-\d{{6}}", rehearse[5])
    assert rehearse[6:] == ["--preemptions", "1", "--json"]
    assert log[3:] == ["hpcflow status 4242"]  # the job the rehearsal ran, by its id
    for line in log[1:]:
        _command_exists(shlex.split(line)[1:])


def test_the_quickstart_fails_when_the_rehearsal_gives_no_job(tmp_path: Path):
    proc, log = _run_main("scripts/quickstart.sh", tmp_path,
                          FAKE_HPCFLOW.replace('"4242"', "null"))
    assert proc.returncode != 0
    assert not any(line.startswith("hpcflow status") for line in log)


def _pytest_phases(log: list[str]) -> list[list[str]]:
    return [shlex.split(line)[1:] for line in log if line.startswith("python ")]


def test_the_tests_block_runs_the_four_pytest_phases_then_the_benchmarks(tmp_path: Path):
    assert _readme_block("Tests") == "bash tests/run.sh"
    proc, log = _run_main("tests/run.sh", tmp_path)
    assert proc.returncode == 0, proc.stderr
    venv = tmp_path / "venv"
    assert log[:2] == ["bash scripts/install.sh --dev", "hpcflow local-cluster up"]
    phases = _pytest_phases(log)
    head = ["OMP_NUM_THREADS=1", "-m", "pytest", "-p", "no:cacheprovider"]
    assert [p[:5] for p in phases] == [head] * 4
    markers = [p[p.index("-m", 2) + 1] for p in phases]
    assert markers[0] == "slurm and not cluster_alone"
    # Then the cluster tests that need it alone, and beside them the multi-process tests, then
    # the fast suite (either side starts first).
    assert sorted(markers[1:]) == ["dist and not slurm", "not slurm and not dist",
                                   "slurm and cluster_alone"]
    assert markers.index("dist and not slurm") < markers.index("not slurm and not dist")
    assert log[-1] == f"bash bench/run_all.sh --ci {venv}/bin/python"
    # The fast suite is the README's fast-suite command (--durations aside).
    fast = shlex.split(_readme_block("Tests", 1))
    assert fast[0] == "OMP_NUM_THREADS=1" and fast[1] == ".venv/bin/python"
    suite = phases[markers.index("not slurm and not dist")]
    assert [w for w in suite[1:] if not w.startswith("--durations")] == fast[2:]
    assert "tests/run.sh: time of each phase" in proc.stderr


def test_a_failed_test_phase_fails_the_run_and_skips_the_benchmarks(tmp_path: Path):
    proc, log = _run_main("tests/run.sh", tmp_path, FAKE_PYTEST_RC="1")
    assert proc.returncode == 1
    assert len(_pytest_phases(log)) == 4  # every phase still runs
    assert not any("bench/run_all.sh" in line for line in log)
