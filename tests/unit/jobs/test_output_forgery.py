"""Output that cannot lie or forge: the dry-run script is printed byte-exact, field paths and
values in errors are escaped, and a file that is not a spec does not have its keys echoed."""

from __future__ import annotations

import io
import sys

import pytest
import yaml

from hpcflow.cli import output
from hpcflow.slurm.render import render_sbatch
from hpcflow.spec.job import load_job_spec

ANSI = "\x1b[2K\x1b[1A#SBATCH --uid=0\x1b[0m"


def test_dry_run_prints_the_script_byte_exact_when_piped(slurm, hpcflow, tmp_path, spec_file):
    path = spec_file(tmp_path / "run", env={"COLOR": ANSI, "U": "é ✓"})
    result = hpcflow("submit", "--dry-run", str(path))
    assert result.exit_code == 0, result.output
    want = render_sbatch(load_job_spec(path), python=None)
    assert result.stdout_bytes == want.encode("utf-8")
    assert ANSI.encode() in result.stdout_bytes


def test_on_a_terminal_control_characters_are_shown_escaped(monkeypatch, capsys):
    class Tty(io.BytesIO):
        def isatty(self) -> bool:
            return True

    out = Tty()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(out, encoding="utf-8"))
    output.print_script(f"export X='{ANSI}'\nline\ttab\n")
    shown = out.getvalue().decode()
    assert "\x1b" not in shown
    assert shown == "export X='\\x1b[2K\\x1b[1A#SBATCH --uid=0\\x1b[0m'\nline\ttab\n"
    assert "shown as \\xNN" in capsys.readouterr().err


@pytest.mark.parametrize(
    "data",
    [
        pytest.param({"env": {"A\n#SBATCH --uid=0": "x"}}, id="env-key"),
        pytest.param({"A\n#SBATCH --uid=0": "x"}, id="top-level-key"),
        pytest.param({"program": {"argv": ["/bin/true"], "A\n#SBATCH --uid=0": 1}}, id="nested"),
        pytest.param({"name": "x\n#SBATCH --uid=0"}, id="value"),
    ],
)
def test_keys_and_values_in_errors_cannot_forge_a_line(slurm, hpcflow, tmp_path, spec_file, data):
    path = spec_file(tmp_path / "run")
    spec = yaml.safe_load(path.read_text())
    for key, value in data.items():
        spec[key] = {**spec[key], **value} if isinstance(value, dict) and key in spec else value
    path.write_text(yaml.safe_dump(spec))
    result = hpcflow("submit", "--dry-run", str(path))
    assert result.exit_code == 2, result.output
    assert not any(line.lstrip().startswith("#SBATCH") for line in result.output.splitlines())
    assert "\\n#SBATCH --uid=0" in result.output


def test_a_spec_file_name_with_a_newline_is_escaped(slurm, hpcflow, tmp_path):
    path = tmp_path / "a\n#SBATCH --uid=0.yaml"
    path.write_text("name: [x]\n")
    result = hpcflow("submit", "--dry-run", str(path))
    assert result.exit_code == 2
    assert not any(line.startswith("#SBATCH") for line in result.output.splitlines())


def test_a_file_that_is_not_a_spec_does_not_have_its_keys_echoed(slurm, hpcflow, tmp_path):
    secret = tmp_path / "shadow"
    secret.write_text("alice: $6$c2VjcmV0$hash\nbob: '*'\n")
    result = hpcflow("submit", "--dry-run", str(secret))
    assert result.exit_code == 2
    assert "none of its 2 top-level keys is a field" in result.output
    assert "alice" not in result.output and "$6$" not in result.output
