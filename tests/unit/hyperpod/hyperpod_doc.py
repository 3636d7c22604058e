"""The command blocks of docs/hyperpod.md, shared by the unit and the moto tests: those from the
spec to a cluster (:func:`command_lines`), and those of its "First job" section
(:func:`job_lines`), which run on a cluster's node and talk to no AWS API."""

from __future__ import annotations

import shlex
from pathlib import Path

DOC = Path(__file__).resolve().parents[3] / "docs" / "hyperpod.md"
FIRST_JOB = "\n## First job\n"


def _part(job: bool) -> str:
    """The page before its "First job" section, or that section (up to the next one)."""
    before, _, after = DOC.read_text().partition(FIRST_JOB)
    assert after, f"{DOC} has no {FIRST_JOB.strip()!r} section"
    return after.split("\n## ", 1)[0] if job else before


def blocks(lang: str, *, job: bool = False) -> list[str]:
    """Every fenced block of ``lang`` in the page's cluster part (``job``: its "First job"
    section), in order."""
    return [p.split("```", 1)[0] for p in _part(job).split(f"```{lang}\n")[1:]]


def _lines(job: bool) -> list[list[str]]:
    return [shlex.split(line) for block in blocks("bash", job=job) for line in block.splitlines()
            if line.strip()]


def command_lines() -> list[list[str]]:
    """Every line of every bash block from the spec to a cluster, split into words, in order."""
    return _lines(False)


def job_lines() -> list[list[str]]:
    """Every line of every bash block of the "First job" section, split into words."""
    return _lines(True)


def needs_aws(words: list[str]) -> bool:
    """A line that talks to AWS (run against moto): the aws CLI, create without --dry-run,
    describe."""
    return words[0] == "aws" or (words[:3] == ["hpcflow", "cluster", "hyperpod"]
                                 and (words[3] == "describe" or "--dry-run" not in words))
