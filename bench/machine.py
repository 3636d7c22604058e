"""What a benchmark report says about where it ran: the command, the hardware, the versions.

Shared by the bench scripts in this folder (they put this folder first on ``sys.path`` by being
run as ``python bench/<script>.py``).
"""

from __future__ import annotations

import os
import platform
import shlex
import statistics
import subprocess
import sys
from importlib import metadata
from pathlib import Path


def command_line() -> str:
    """The exact command this process runs, interpreter included."""
    return shlex.join([sys.executable, *sys.argv])


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else the platform's guess."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def memory_gib() -> float | None:
    """Total memory in GiB from /proc/meminfo, or None."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 2**20
    except (OSError, ValueError):
        pass
    return None


def filesystem(path: Path) -> str:
    """Device and file-system type holding ``path`` (``findmnt``), or ``unknown``."""
    try:
        out = subprocess.run(["findmnt", "-n", "-o", "SOURCE,FSTYPE", "-T", str(path)],
                             capture_output=True, text=True, timeout=10, check=True).stdout
        return " ".join(out.split()) or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def versions(names: tuple[str, ...] = ("torch", "numpy", "hpcflow")) -> str:
    """``python X, torch Y, ...`` for the distributions that are installed."""
    parts = [f"python {platform.python_version()}"]
    for name in names:
        try:
            parts.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return ", ".join(parts)


def header(title: str, disk: Path | None = None) -> list[str]:
    """The report's opening lines: title, command, machine, versions (and the disk used)."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    mem = memory_gib()
    mem_text = f"{mem:.0f} GiB" if mem else "? GiB"
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [
        f"# {title}",
        f"command:  {command_line()}",
        f"machine:  {cpu_model()}, {usable} usable cores, "
        f"{mem_text} memory, {platform.system()} "
        f"{platform.release()}; load average at start {load}",
        f"versions: {versions()}",
    ]
    if disk is not None:
        lines.append(f"disk:     {disk} on {filesystem(disk)}")
    return lines


def median(values: list[float]) -> float:
    """The median, or NaN for no values."""
    return statistics.median(values) if values else float("nan")


def verdict(value: float, goal: float, *, at_least: bool) -> str:
    """``meets`` or ``misses`` the goal (never an error: benchmarks do not fail on time)."""
    ok = value >= goal if at_least else value <= goal
    return f"{'meets' if ok else 'misses'} goal {'>=' if at_least else '<='} {goal:g}"
