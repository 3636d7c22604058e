"""Read back what a rendered batch script hands hpcflow's supervisor: its settings, and the step
command and environment the supervisor builds from them (tests only)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from typing import Any

from hpcflow.supervisor.commands import spot_watch_argv, step_argv

MARK = "\nhpcflow_config="


def supervisor_config(text: str) -> dict[str, Any]:
    """The JSON the script passes to ``python -m hpcflow.supervisor run --config``, decoded
    the way bash reads the single-quoted word."""
    start = text.index(MARK) + len(MARK)
    lexer = shlex.shlex(text[start:], posix=True)
    lexer.whitespace_split = True
    return json.loads(next(iter(lexer)))


def step_command(text: str, *, exclude: Sequence[str] = (), host: str = "n1",
                 job_id: str = "4242", nnodes: str = "") -> list[str]:
    """The step's argv as the supervisor starts it."""
    return step_argv(supervisor_config(text), job_id=job_id, exclude=exclude, rdzv_host=host,
                     nnodes=nnodes)


def ranks_env(text: str) -> dict[str, str]:
    """The spec's settings the supervisor exports to every rank."""
    return supervisor_config(text)["env"]


def spot_watch_command(text: str, job_id: str = "4242") -> list[str]:
    """The spot watcher step's argv as the supervisor starts it ([] when there is none)."""
    return spot_watch_argv(supervisor_config(text), job_id)
