"""The command blocks of docs/hyperpod.md, shared by the unit and the moto tests."""

from __future__ import annotations

import shlex
from pathlib import Path

DOC = Path(__file__).resolve().parents[3] / "docs" / "hyperpod.md"


def blocks(lang: str) -> list[str]:
    """Every fenced block of ``lang`` in the page, in order."""
    return [p.split("```", 1)[0] for p in DOC.read_text().split(f"```{lang}\n")[1:]]


def command_lines() -> list[list[str]]:
    """Every line of every bash block, split into words, in the page's order."""
    return [shlex.split(line) for block in blocks("bash") for line in block.splitlines()
            if line.strip()]


def needs_aws(words: list[str]) -> bool:
    """A line that talks to AWS (run against moto): the aws CLI, create without --dry-run,
    describe."""
    return words[0] == "aws" or (words[:3] == ["hpcflow", "cluster", "hyperpod"]
                                 and (words[3] == "describe" or "--dry-run" not in words))
