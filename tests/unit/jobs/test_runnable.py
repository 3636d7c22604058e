"""submit: program.argv[0] is found as slurmstepd finds it, and a file the ranks cannot execute
is refused before the job waits in the queue (a name found nowhere is a warning)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcflow.jobs.runnable import file_kind, judge_program, program_verdict, resolve_program
from hpcflow.spec.job import JobSpec

CWD = Path("/home/u/run")
PATH = "/usr/bin::/opt/tools/bin"  # the empty field is skipped, as strtok skips it


def facts(table: dict[str, str]):
    """A ``kind`` that answers from a table; any other path is missing."""
    return lambda path: table.get(str(path), "missing")


@pytest.mark.parametrize(
    ("name", "table", "resolved", "level", "words"),
    [
        pytest.param("/opt/bin/train", {"/opt/bin/train": "runnable"}, "/opt/bin/train", "ok", [],
                     id="absolute-runnable"),
        pytest.param("/opt/bin/train.py", {"/opt/bin/train.py": "not_runnable"},
                     "/opt/bin/train.py", "error",
                     ["program.argv[0]: '/opt/bin/train.py' is not executable",
                      "argv: [python, /opt/bin/train.py, ...]", "chmod +x '/opt/bin/train.py'"],
                     id="absolute-without-execute-bit"),
        pytest.param("/opt/bin", {"/opt/bin": "folder"}, "/opt/bin", "error",
                     ["is a folder", "[python, /opt/bin/SCRIPT.py, ...]"], id="absolute-folder"),
        pytest.param("/opt/bin/run.sh", {"/opt/bin/run.sh": "not_runnable"}, "/opt/bin/run.sh",
                     "error", ["argv: [INTERPRETER (python for a Python script, bash for a shell script), "
                                "/opt/bin/run.sh, ...]"],
                     id="a-shell-script-gets-its-interpreter-named"),
        pytest.param("/opt/bin/train", {}, "/opt/bin/train", "error",
                     ["no such file on this host", "[env, /opt/bin/train, ...]"],
                     id="absolute-missing"),
        pytest.param("/secret/train", {"/secret/train": "unseen"}, "/secret/train", "ok", [],
                     id="absolute-unseen-is-not-judged"),
        pytest.param("./train.py", {"/home/u/run/train.py": "not_runnable",
                                    "/usr/bin/./train.py": "runnable"},
                     "/home/u/run/train.py", "error",
                     ["is not executable", "program.module: train "],
                     id="dot-path-is-taken-in-cwd-never-on-path"),
        pytest.param("./train.py", {}, "/home/u/run/train.py", "error",
                     ["no such file", "taken in program.workdir ('/home/u/run')"],
                     id="dot-path-missing"),
        pytest.param("scripts/train.py", {"/home/u/run/scripts/train.py": "runnable"},
                     "/home/u/run/scripts/train.py", "ok", [], id="relative-path-in-cwd"),
        pytest.param("scripts/train.py", {}, "/home/u/run/scripts/train.py", "error",
                     ["program.argv[0]: 'scripts/train.py': no such file"],
                     id="relative-path-missing"),
        pytest.param("scripts/train.py", {"/home/u/run/scripts/train.py": "not_runnable"},
                     "/home/u/run/scripts/train.py", "error",
                     ["argv: [python, scripts/train.py, ...]", "program.module: for a Python module"],
                     id="relative-path-without-execute-bit"),
        pytest.param("torchtrain", {"/opt/tools/bin/torchtrain": "runnable"},
                     "/opt/tools/bin/torchtrain", "ok", [], id="bare-name-on-path"),
        pytest.param("train", {"/usr/bin/train": "folder", "/opt/tools/bin/train": "runnable"},
                     "/opt/tools/bin/train", "ok", [], id="a-folder-on-path-is-passed-over"),
        pytest.param("train", {"/usr/bin/train": "not_runnable",
                               "/opt/tools/bin/train": "runnable"},
                     "/usr/bin/train", "error", ["found as '/usr/bin/train'", "not executable"],
                     id="first-file-on-path-wins-whatever-its-bits"),
        pytest.param("train.py", {"/home/u/run/train.py": "not_runnable"}, "/home/u/run/train.py",
                     "error", ["program.argv[0]: 'train.py' (found as '/home/u/run/train.py') is "
                               "not executable", "argv: [python, train.py, ...]",
                               "program.module: train (the rest of argv in program.args)"],
                     id="bare-script-in-cwd-without-execute-bit"),
        pytest.param("train.py", {"/home/u/run/train.py": "runnable"}, "/home/u/run/train.py", "ok",
                     [], id="bare-script-in-cwd-runnable"),
        pytest.param("train", {"/home/u/run/train": "folder"}, "/home/u/run/train", "error",
                     ["is a folder"], id="bare-name-a-folder-in-cwd"),
        pytest.param("train", {}, "/home/u/run/train", "warning",
                     ["not found on PATH here, nor in program.workdir ('/home/u/run')",
                      "compute nodes' PATH"], id="bare-name-nowhere-is-a-warning"),
    ],
)
def test_program_is_judged_as_slurmstepd_finds_it(name, table, resolved, level, words):
    kind = facts(table)
    assert resolve_program(name, cwd=CWD, path_env=PATH, kind=kind) == Path(resolved)
    verdict = judge_program(name, cwd=CWD, cwd_field="program.workdir", path_env=PATH, kind=kind)
    assert verdict.level == level, verdict.message
    for word in words:
        assert word in verdict.message
    assert (verdict.message == "") == (level == "ok")


def test_file_kind_reads_the_execute_bit_and_folders(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    script.chmod(0o644)
    assert file_kind(script) == "not_runnable"
    script.chmod(0o755)
    assert file_kind(script) == "runnable"
    assert file_kind(tmp_path) == "folder"
    assert file_kind(tmp_path / "nope") == "missing"
    assert file_kind(script / "under-a-file") == "missing"


def test_spec_path_and_folder_come_from_env_workdir_and_run_dir(tmp_path):
    base = {"name": "j", "time_limit": "10", "run_dir": str(tmp_path / "run")}
    seen: list[str] = []

    def kind(path):
        seen.append(str(path))
        return "missing"

    spec = JobSpec.model_validate({**base, "program": {"argv": ["train"]}})
    verdict = program_verdict(spec, environ={"PATH": "/from/shell"}, kind=kind)
    assert seen == ["/from/shell/train", f"{tmp_path}/run/train"]
    assert verdict.level == "warning" and "nor in run_dir" in verdict.message
    seen.clear()
    spec = JobSpec.model_validate({**base, "env": {"PATH": "/from/spec"},
                                   "program": {"argv": ["train"], "workdir": str(tmp_path)}})
    program_verdict(spec, environ={"PATH": "/from/shell"}, kind=kind)
    assert seen[:2] == ["/from/spec/train", f"{tmp_path}/train"]
    for program in ({"module": "pkg.train"}, {"argv": ["/nope/train"]}):
        extra = {"container": {"image": "nvcr.io#nvidia/pytorch:24.05-py3"}} if "argv" in program else {}
        spec = JobSpec.model_validate({**base, **extra, "program": program})
        assert program_verdict(spec, kind=kind).level == "ok"


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "submit"])
def test_a_script_without_its_execute_bit_is_exit_3_before_sbatch(slurm, hpcflow, tmp_path,
                                                                   spec_file, dry_run):
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print('training')\n")
    (code / "train.py").chmod(0o644)
    path = spec_file(tmp_path / "run", program={"argv": ["train.py", "--lr", "1e-3"],
                                                "workdir": str(code)})
    args = ["submit", str(path), "--json"] + (["--dry-run"] if dry_run else [])
    result = hpcflow(*args)
    assert result.exit_code == 3, result.output
    error = json.loads(result.output)["error"]
    assert error["exit_code"] == 3
    assert error["message"].startswith(f"program.argv[0]: 'train.py' (found as "
                                       f"'{code}/train.py') is not executable")
    assert "[python, train.py, ...]" in error["message"]
    assert not slurm.ran("sbatch") and not (tmp_path / "run").exists()
    (code / "train.py").chmod(0o755)
    assert hpcflow(*args).exit_code == 0


def test_a_command_found_nowhere_is_a_warning_and_submits(slurm, hpcflow, tmp_path, spec_file):
    result = hpcflow("submit", str(spec_file(tmp_path / "run", program={"argv": ["no-such-cmd"]})))
    assert result.exit_code == 0, result.output
    assert "hpcflow: warning: program.argv[0]: 'no-such-cmd': not found on PATH" in result.output
    assert slurm.ran("sbatch")
