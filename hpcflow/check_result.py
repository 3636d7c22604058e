"""The result of one check of a node or a job (``hpcflow doctor``, the NCCL/EFA checks): the
one verdict type both services return, so neither imports the other."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

Level = Literal["pass", "warn", "fail"]


@dataclass(frozen=True)
class CheckResult:
    """One check: what was looked at, the verdict, what was seen and how to fix it.

    Attributes:
        name: short name of the check, e.g. ``gpus``.
        level: ``pass``, ``warn`` (works, but worse or unknown) or ``fail`` (will not work).
        message: what was seen.
        fix: what to do about a warn or fail ("" on pass).
    """

    name: str
    level: Level
    message: str
    fix: str = ""

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


def ok(name: str, message: str) -> CheckResult:
    return CheckResult(name, "pass", message)


def warn(name: str, message: str, fix: str) -> CheckResult:
    return CheckResult(name, "warn", message, fix)


def fail(name: str, message: str, fix: str) -> CheckResult:
    return CheckResult(name, "fail", message, fix)
