"""docs/protocol.md's two blocks against the code: the run directory's file names are the ones
hpcflow.protocol makes (every ``*_name`` function's, each in the block), and the list of tagged
lines is what the example program prints: the program runs (one process, outside Slurm) until
USR1 stops it, then once more to resume and finish, and every tag and field it printed is in
the doc's line for that tag, and every field the doc names was printed."""

from __future__ import annotations

import inspect
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hpcflow import protocol as P

REPO = Path(__file__).resolve().parents[2]
DOC = (REPO / "docs" / "protocol.md").read_text()
PLACEHOLDERS = {"job_id": "<jobid>", "restart": "<restart>", "try_": "<try>", "number": "<n>",
                "n": "<n>"}


def _block_after(heading: str) -> str:
    section = DOC.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```\n(.*?)^```", section, re.M | re.S)[0]


def _file_name(func) -> str:  # noqa: ANN001
    params = list(inspect.signature(func).parameters)
    if "rank" in params:  # the rank is formatted as a number
        args = [PLACEHOLDERS.get(p, 0) for p in params]
        return func(*args).replace("-0.", "-<rank>.")
    return func(*[PLACEHOLDERS[p] for p in params])


NAME_FUNCTIONS = [f for n, f in inspect.getmembers(P, inspect.isfunction)
                  if n.endswith("_name") and f.__module__.startswith(P.__name__)]


def test_the_protocol_module_has_the_name_functions_this_test_knows():
    assert len(NAME_FUNCTIONS) >= 14


@pytest.mark.parametrize("func", NAME_FUNCTIONS, ids=[f.__name__ for f in NAME_FUNCTIONS])
def test_every_file_name_of_the_protocol_is_in_the_run_directory_block(func):
    tree = _block_after("Run directory")
    names = {ln.split()[0].split("/")[0] for ln in tree.splitlines() if ln.strip()}
    assert _file_name(func) in names, f"docs/protocol.md, Run directory: {_file_name(func)}"


def test_the_run_directory_block_names_the_fixed_files():
    tree = _block_after("Run directory")
    for name in (P.STATE_DIR, P.LEDGER_FILE):
        assert re.search(rf"^\s*{re.escape(name)}/?\s", tree, re.M), name
    assert f"(holds {P.COMMIT_RECORD})" in tree


def _doc_lines() -> dict[str, tuple[set[str], bool]]:
    """tag -> (the field names the doc's line gives, whether it ends with ``...``)."""
    out = {}
    for line in _block_after("What the example program prints").splitlines():
        tag, rest = line.split(" ", 1)
        out[tag] = (set(re.findall(r'"(\w+)"(?!\s*\|)', rest)) - {"interval", "preempt", "final"},
                    rest.rstrip("}").rstrip().endswith("..."))
    return out


def _run(args: list[str], env: dict[str, str], usr1_at_step: int | None) -> tuple[int, list[str]]:
    proc = subprocess.Popen([sys.executable, "-m", "hpcflow.examples.train", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if usr1_at_step and line.startswith(f"{P.TAG_STEP} ") and \
                    json.loads(line.split(" ", 1)[1])["step"] == usr1_at_step:
                proc.send_signal(signal.SIGUSR1)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, lines


def test_the_tagged_lines_are_what_the_example_program_prints(tmp_path: Path):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "HPCFLOW_", "RANK", "WORLD_SIZE", "LOCAL_"))}
    env.update(PYTHONPATH=str(REPO), OMP_NUM_THREADS="1",
               HPCFLOW_CHECKPOINT_DIR=str(tmp_path / "ckpt"))
    rc, first = _run(["--steps", "1000", "--step-time-s", "0.2"], env, usr1_at_step=2)
    assert rc == P.EXIT_PREEMPTED, first[-5:]
    rc, second = _run(["--steps", "5"], env, usr1_at_step=None)
    assert rc == 0, second[-5:]
    printed: dict[str, set[str]] = {}
    for line in first + second:
        if line.startswith("hpcflow-"):
            tag, payload = line.split(" ", 1)
            printed.setdefault(tag, set()).update(json.loads(payload))
    doc = _doc_lines()
    assert set(printed) == set(doc), "tags printed vs docs/protocol.md"
    for tag, fields in printed.items():
        named, more = doc[tag]
        assert named <= fields, f"{tag}: the doc names fields not printed: {named - fields}"
        if not more:
            assert fields <= named, f"{tag}: printed fields the doc leaves out: {fields - named}"
    tags = {v for k, v in vars(P).items() if k.startswith("TAG_")}
    assert tags <= set(doc), "every tag hpcflow.protocol names is in the doc"
