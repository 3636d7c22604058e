"""bench/machine.py, the header every benchmark prints: it says where the figures were measured
(cores, the disk's raw write speed, the load at start), in the words bench/README.md uses."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import machine  # noqa: E402

MEASURED_ON = re.compile(r"^measured on: (\d+) cores, disk raw write (\d+\.\d\d) GiB/s, "
                         r"load average (\d+\.\d) at start$")


def test_the_header_says_where_it_was_measured(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(machine.os, "getloadavg", lambda: (3.25, 2.0, 1.0))
    lines = machine.header("t", tmp_path)
    assert lines[0] == "# t"
    assert lines[-2].startswith(f"disk:     {tmp_path} on ")
    m = MEASURED_ON.match(lines[-1])
    assert m, lines[-1]
    assert int(m[1]) == machine.usable_cores() and float(m[2]) > 0 and m[3] == "3.2"
    assert "load average at start 3.2, 2.0, 1.0" in lines[2]  # the same reading
    assert list(tmp_path.iterdir()) == []  # the timing file is gone


def test_the_raw_write_is_timed_on_the_disk_asked_for(tmp_path: Path, monkeypatch):
    seen = []
    real = machine.os.fsync
    monkeypatch.setattr(machine.os, "fsync", lambda fd: (seen.append(fd), real(fd))[1])
    assert machine.raw_write_gib_s(tmp_path, size_mib=16) > 0
    assert len(seen) == 1 and list(tmp_path.iterdir()) == []


def test_a_disk_that_cannot_be_written_is_said_not_measured(tmp_path: Path):
    missing = tmp_path / "missing"
    text = machine.where_measured(missing, 1.0)
    assert re.fullmatch(rf"\d+ cores, disk raw write not measured \({re.escape(str(missing))}: "
                        r"[^)]+\), load average 1\.0 at start", text), text
    with pytest.raises(OSError):
        machine.raw_write_gib_s(missing)


@pytest.mark.parametrize("script", sorted(p.name for p in BENCH.glob("bench_*.py")))
def test_every_benchmark_prints_the_shared_header(script: str):
    text = (BENCH / script).read_text()
    assert re.search(r"^from machine import (.*\b)?header\b", text, re.M), script
    assert "header(" in text
