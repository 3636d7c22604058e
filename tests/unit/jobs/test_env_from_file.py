"""Finding: ``env:`` values were written in plain text into files others could read. A value
can now be read at run time from the user's file (``{from_file: PATH}``): it is in no file hpcflow
writes, ``--dry-run`` and ``--json`` show it masked, and a missing file stops the job with a
clear log line before the program starts."""

from __future__ import annotations

import json
import subprocess

import pytest

from hpcflow.spec.envvalues import MASK

SECRET = "wandb-9f8e7d6c5b4a"


def exports(script: str) -> str:
    """The script's env-export block, with the logging function it calls."""
    log = script[script.index("hpcflow_log() {"):]
    log = log[:log.index("}\n") + 2]
    block = script[script.index("# ---- Settings from the job spec"):
                   script.index("# ---- The attempt.")]
    return log + block


def run_exports(script: str, name: str) -> subprocess.CompletedProcess[str]:
    program = exports(script) + f'\nprintf "%s" "${{{name}}}"\n'
    return subprocess.run(["bash", "-c", program], capture_output=True, text=True, timeout=30,
                          check=False)


@pytest.mark.parametrize("file_name", ["key", "it's a key", "$(touch pwned)", "a\"b`id`"],
                         ids=["plain", "quote-space", "command", "dquote-backtick"])
def test_a_value_from_a_file_is_read_at_run_time_and_written_nowhere(slurm, hpcflow, tmp_path,
                                                                     spec_file, file_name,
                                                                     monkeypatch):
    key = tmp_path / "secrets" / file_name
    key.parent.mkdir()
    key.write_text(SECRET + "\n")
    run_dir = tmp_path / "run"
    spec = spec_file(run_dir, env={"WANDB_API_KEY": {"from_file": str(key)}, "PLAIN": "p"})
    dry = hpcflow("submit", str(spec), "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    data = json.loads(dry.output)["data"]
    assert data["env"] == {"PLAIN": "p", "WANDB_API_KEY": f"{MASK} (read at run time from {key})"}
    assert SECRET not in dry.output
    result = hpcflow("submit", str(spec), "--json")
    assert result.exit_code == 0 and SECRET not in result.output
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p != key]
    assert written and not [p for p in written if SECRET in p.read_text(errors="replace")]
    monkeypatch.chdir(tmp_path)
    ran = run_exports((run_dir / "job.sbatch").read_text(), "WANDB_API_KEY")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == SECRET  # the trailing newline of the file is dropped
    assert not (tmp_path / "pwned").exists()


def test_a_missing_file_stops_the_job_before_the_program_with_a_clear_line(slurm, hpcflow,
                                                                          tmp_path, spec_file):
    missing = tmp_path / "nope"
    result = hpcflow("submit", str(spec_file(tmp_path / "run",
                                             env={"TOKEN": {"from_file": str(missing)}})),
                     "--dry-run")
    assert result.exit_code == 0, result.output
    ran = run_exports(result.output, "TOKEN")
    assert ran.returncode == 1
    assert "env.TOKEN: cannot read" in ran.stderr and str(missing) in ran.stderr
    assert "the program is not started" in ran.stderr


def test_a_folder_in_place_of_the_file_is_refused_at_run_time(slurm, hpcflow, tmp_path,
                                                              spec_file):
    result = hpcflow("submit", str(spec_file(tmp_path / "run",
                                             env={"TOKEN": {"from_file": str(tmp_path)}})),
                     "--dry-run")
    assert run_exports(result.output, "TOKEN").returncode == 1


def test_the_home_folder_is_expanded_at_submit(slurm, hpcflow, tmp_path, spec_file, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    result = hpcflow("submit", str(spec_file(tmp_path / "run",
                                             env={"TOKEN": {"from_file": "~/.key"}})),
                     "--dry-run", "--json")
    assert json.loads(result.output)["data"]["env"]["TOKEN"].endswith(f"from {tmp_path}/.key)")


@pytest.mark.parametrize(("value", "words"), [
    pytest.param({"from_file": "rel/key"}, "absolute path", id="relative"),
    pytest.param({"from_file": ""}, "non-empty path", id="empty"),
    pytest.param({"from_file": "/a\nb"}, "env.TOKEN", id="newline"),
    pytest.param({"from_file": "/k", "mode": 1}, "exactly {from_file: PATH}", id="extra-key"),
    pytest.param({"file": "/k"}, "exactly {from_file: PATH}", id="wrong-key"),
    pytest.param(["a"], "or {from_file: PATH}", id="list"),
])
def test_a_bad_from_file_is_a_spec_error_naming_the_field(slurm, hpcflow, tmp_path, spec_file,
                                                          value, words):
    result = hpcflow("submit", str(spec_file(tmp_path / "run", env={"TOKEN": value})),
                     "--dry-run")
    assert result.exit_code == 2, result.output
    assert "env.TOKEN" in result.output and words in result.output
    assert "Traceback" not in result.output
