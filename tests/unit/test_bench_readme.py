"""bench/README.md's command blocks: every line is a command that exists, with flags its program
takes. What this checks: each `.venv/bin/python bench/X.py ...` line names a script in bench/
whose `--help` lists every flag the line uses, and each `hpcflow ...` line is a real command
with real flags. What it does not: the benchmarks' runs (minutes each, on the local cluster;
`bench/run_all.sh --ci` runs their small sizes after CI's tests, and tests/unit/
test_readme_scripts.py checks that tests/run.sh calls it)."""

from __future__ import annotations

import functools
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest

from hpcflow.cli.main import cli

REPO = Path(__file__).resolve().parents[2]
BENCH_README = REPO / "bench" / "README.md"


def command_lines() -> list[str]:
    """Every command line of the page's bash blocks, comments removed."""
    blocks = re.findall(r"^```bash\n(.*?)^```", BENCH_README.read_text(), re.M | re.S)
    lines = [ln.split(" #", 1)[0].strip() for b in blocks for ln in b.splitlines()]
    return [ln for ln in lines if ln and not ln.startswith("#")]


@functools.cache
def _script_flags(script: str) -> frozenset[str]:
    proc = subprocess.run([sys.executable, script, "--help"], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return frozenset(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", proc.stdout))


def test_the_page_has_the_blocks_this_test_reads():
    lines = command_lines()
    assert len(lines) >= 15
    assert {shlex.split(ln)[1] for ln in lines if ln.startswith(".venv/bin/python")} >= {
        "bench/bench_checkpoint.py", "bench/bench_goodput.py", "bench/bench_interval.py",
        "bench/bench_mirror.py", "bench/bench_submit.py"}


@pytest.mark.parametrize("line", command_lines())
def test_each_command_of_the_page_exists_with_its_flags(line: str):
    words = shlex.split(line)
    if words[0] == "hpcflow":
        command: click.Command = cli
        rest = words[1:]
        while isinstance(command, click.Group) and rest and not rest[0].startswith("-"):
            sub = command.get_command(click.Context(cli), rest[0])
            assert sub is not None, f"bench/README.md: `{line}`: no command {rest[0]!r}"
            command, rest = sub, rest[1:]
        assert not isinstance(command, click.Group), line
        flags = {o for p in command.params if isinstance(p, click.Option) for o in p.opts}
    else:
        assert words[0] == ".venv/bin/python", f"bench/README.md: `{line}`: not a benchmark run"
        assert (REPO / words[1]).is_file() and words[1].startswith("bench/"), line
        flags = set(_script_flags(words[1]))
        rest = words[2:]
    used = {w.split("=")[0] for w in rest if w.startswith("-")}
    assert used <= flags, f"bench/README.md: `{line}`: unknown {sorted(used - flags)}"


def _figure_sections() -> tuple[str, dict[str, str]]:
    """The intro of "Figures measured here" and each of its ### sections, by heading."""
    part = BENCH_README.read_text().split("\n## Figures measured here\n", 1)[1].split("\n## ")[0]
    intro, *rest = part.split("\n### ")
    return intro, {s.split("\n", 1)[0]: s.split("\n", 1)[1] for s in rest}


FACTS = re.compile(r"Measured on: (?P<cores>\d+) cores .*?disk raw write "
                   r"(?P<raw>[\d.]+(?:-[\d.]+)? GiB/s|not recorded).*?load average", re.S)


def test_the_figures_intro_names_the_machine():
    intro, sections = _figure_sections()
    assert "**2 cores**" in intro and re.search(r"wrote [\d.]+ to [\d.]+ GiB/s raw", intro)
    assert len(sections) >= 9


@pytest.mark.parametrize("heading", list(_figure_sections()[1]))
def test_every_figure_section_says_where_it_was_measured(heading: str):
    """Cores, the disk's raw write speed (or that it was not recorded) and the load: a
    `Measured on:` paragraph at the top of the section; a section whose own table has the raw
    write and whose text has the load (the checkpoint figures) names them there, and its cores
    are the intro's."""
    text = _figure_sections()[1][heading]
    first = text.strip().split("\n\n", 1)[0]
    if FACTS.match(" ".join(first.split())):
        return
    assert re.search(r"raw write[^|\n]*\|\s*[\d.]+ GiB/s", text), f"{heading}: no raw write"
    assert re.search(r"load average [\d.]+", " ".join(text.split())), f"{heading}: no load"
