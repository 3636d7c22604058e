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


#: Bytes the header writes to time the disk: enough to pass the page cache's write-back
#: threshold on a small VM, short enough (about 0.5 s at 0.25 GiB/s) for every benchmark.
RAW_WRITE_MIB = 128


def raw_write_gib_s(folder: Path, size_mib: int = RAW_WRITE_MIB) -> float:
    """The raw sequential write speed of the disk holding ``folder``, in GiB/s: ``size_mib`` MiB
    of zeros written with Python ``write`` in 16 MiB blocks into a new file there, then
    ``fsync`` (what ``dd bs=16M conv=fsync`` does); the file is removed. One sample: a shared
    disk's figure moves between runs, which is why each report prints its own.

    Raises:
        OSError: the file cannot be written (a read-only or full disk, a missing folder).
    """
    import tempfile
    import time

    block = bytes(16 * 2**20)
    blocks = max(1, size_mib // 16)
    with tempfile.NamedTemporaryFile(dir=folder, prefix=".hpcflow-raw-write-") as fh:
        started = time.perf_counter()
        for _ in range(blocks):
            fh.write(block)
        fh.flush()
        os.fsync(fh.fileno())
        took = time.perf_counter() - started
    return blocks * len(block) / 2**30 / took


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask), else the machine's count."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def where_measured(disk: Path | None = None, load_1m: float | None = None) -> str:
    """The facts a figure needs to carry to another machine, in the words bench/README.md uses:
    ``2 cores, disk raw write 0.23 GiB/s, load average 4.1 at start`` (the 1-minute load
    average, read now unless given, before the disk is timed; the disk of ``disk``, else the
    current folder)."""
    folder = disk if disk is not None else Path.cwd()
    load = os.getloadavg()[0] if load_1m is None else load_1m
    try:
        raw = f"disk raw write {raw_write_gib_s(folder):.2f} GiB/s"
    except OSError as exc:
        raw = f"disk raw write not measured ({folder}: {exc.strerror or exc})"
    return f"{usable_cores()} cores, {raw}, load average {load:.1f} at start"


def header(title: str, disk: Path | None = None) -> list[str]:
    """The report's opening lines: title, command, machine, versions, the disk (``disk``, else
    the current folder) and ``measured on:``, the facts a figure needs to be compared with one
    from another machine (:func:`where_measured`)."""
    mem = memory_gib()
    mem_text = f"{mem:.0f} GiB" if mem else "? GiB"
    loads = os.getloadavg()
    load = ", ".join(f"{x:.1f}" for x in loads)
    folder = disk if disk is not None else Path.cwd()
    return [
        f"# {title}",
        f"command:  {command_line()}",
        f"machine:  {cpu_model()}, {usable_cores()} usable cores, "
        f"{mem_text} memory, {platform.system()} "
        f"{platform.release()}; load average at start {load}",
        f"versions: {versions()}",
        f"disk:     {folder} on {filesystem(folder)}",
        f"measured on: {where_measured(folder, loads[0])}",
    ]


def median(values: list[float]) -> float:
    """The median, or NaN for no values."""
    return statistics.median(values) if values else float("nan")


def verdict(value: float, goal: float, *, at_least: bool) -> str:
    """``meets`` or ``misses`` the goal (never an error: benchmarks do not fail on time)."""
    ok = value >= goal if at_least else value <= goal
    return f"{'meets' if ok else 'misses'} goal {'>=' if at_least else '<='} {goal:g}"
