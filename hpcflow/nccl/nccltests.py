"""Parse the text output of NVIDIA nccl-tests (``all_reduce_perf`` and friends).

Format (nccl-tests src/util.cu ``writeResultHeader``/``writeResultFooter``, v2.13 to v2.19): a
``#``-commented header with the column names ``size count type redop root time algbw busbw
#wrong`` then ``time algbw busbw #wrong`` again for in-place (``cputime`` instead of ``time`` with
``-C 1``; four more per-iteration columns each with ``-I 1``; a trailing timestamp with
``-Z 1``), one data row per message size, then ``# Out of bounds values : N OK|FAILED`` and
``# Avg bus bandwidth : X``. Before v2.13 (nccl-tests commit 51af557) there was no ``root``
column and the error column was ``error``, the largest deviation printed as ``%5.0le``
(``0e+00``). A failing run prints ``<host>: Test NCCL failure <file>:<line> '<reason>'`` (or
``Test CUDA failure``) from src/common.h and stops. Units: sizes in bytes, times in
microseconds, bandwidths in GB/s (10^9 bytes per second).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

_FAILURE = re.compile(r"Test (NCCL |CUDA )?failure.*$", re.M)
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)?", re.M)
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)", re.M)
_LEAD = ("size", "count", "type", "redop", "root")


@dataclass(frozen=True)
class Measurement:
    """One half of a row (out-of-place or in-place).

    Attributes:
        time_us: time per operation in microseconds.
        algbw_gbs: algorithm bandwidth, GB/s.
        busbw_gbs: bus bandwidth, GB/s (comparable across GPU counts).
        errors: wrong elements (``#wrong``) or the largest deviation (old ``error``); None for
            ``N/A`` (validation off).
    """

    time_us: float
    algbw_gbs: float
    busbw_gbs: float
    errors: float | None


@dataclass(frozen=True)
class Row:
    """One message size."""

    size_bytes: int
    count: int
    dtype: str
    redop: str
    root: int | None
    out_of_place: Measurement
    in_place: Measurement | None


@dataclass
class NcclTestsResult:
    """What one nccl-tests run printed.

    Attributes:
        rows: one per message size, in order.
        avg_busbw_gbs: the footer's average bus bandwidth (GB/s), or None when absent.
        out_of_bounds: the footer's count of out-of-bounds values, or None when absent.
        failures: ``Test ... failure`` lines.
    """

    rows: list[Row] = field(default_factory=list)
    avg_busbw_gbs: float | None = None
    out_of_bounds: int | None = None
    failures: list[str] = field(default_factory=list)

    @property
    def wrong_rows(self) -> list[Row]:
        """Rows whose out-of-place or in-place result had wrong elements."""
        return [r for r in self.rows
                if any(m is not None and m.errors for m in (r.out_of_place, r.in_place))]

    @property
    def ok(self) -> bool:
        """Completed, with rows, no failure line, no wrong or out-of-bounds value."""
        return (not self.failures and bool(self.rows) and self.avg_busbw_gbs is not None
                and not self.out_of_bounds and not self.wrong_rows)

    @property
    def peak_busbw_gbs(self) -> float | None:
        """Largest out-of-place bus bandwidth (GB/s), usually at the largest size."""
        return max((r.out_of_place.busbw_gbs for r in self.rows), default=None)

    def problems(self) -> list[str]:
        """Why the run is not ok, one line each."""
        out = list(self.failures)
        if not self.rows and not self.failures:
            out.append("no result rows (did the test start?)")
        for r in self.wrong_rows:
            out.append(f"size {r.size_bytes} B: wrong results (out-of-place "
                       f"{_num(r.out_of_place.errors)}, in-place "
                       f"{_num(r.in_place.errors if r.in_place else None)})")
        if self.out_of_bounds:
            out.append(f"{self.out_of_bounds} out-of-bounds values")
        if self.rows and self.avg_busbw_gbs is None and not self.failures:
            out.append("output ends before the summary (run cut short?)")
        return out

    def to_dict(self) -> dict:
        return {"ok": self.ok, "avg_busbw_gbs": self.avg_busbw_gbs,
                "peak_busbw_gbs": self.peak_busbw_gbs, "out_of_bounds": self.out_of_bounds,
                "failures": self.failures, "problems": self.problems(),
                "rows": [asdict(r) for r in self.rows]}


def _num(v: float | None) -> str:
    return "N/A" if v is None else f"{v:g}"


def _float(text: str) -> float | None:
    return None if text == "N/A" else float(text)


def _columns(text: str) -> list[str] | None:
    for line in text.splitlines():
        words = line.lstrip("#").split()
        if words[:2] == ["size", "count"] and "busbw" in words:
            return words
    return None


def _measure(names: list[str], values: list[str]) -> Measurement:
    got = dict(zip(names, values, strict=False))
    err = got.get("#wrong", got.get("error", "N/A"))
    return Measurement(float(got.get("time", got.get("cputime", "nan"))), float(got["algbw"]),
                       float(got["busbw"]), _float(err))


def parse_nccl_tests(text: str) -> NcclTestsResult:
    """Parse nccl-tests output (any of the formats in the module docstring).

    Never raises on odd input: a run that failed or printed nothing gives a result whose
    ``ok`` is False and whose ``problems()`` say why.
    """
    result = NcclTestsResult()
    result.failures = [m.group(0).strip() for m in _FAILURE.finditer(text)]
    if m := _OOB.search(text):
        result.out_of_bounds = int(m.group(1))
    if m := _AVG.search(text):
        result.avg_busbw_gbs = float(m.group(1))
    cols = _columns(text)
    if cols is None:
        return result
    lead = [c for c in cols[:5] if c in _LEAD]
    rest = cols[len(lead):]
    # Two halves, each starting at a time column; a trailing "timestamp" is ignored.
    starts = [i for i, c in enumerate(rest) if c in ("time", "cputime")]
    halves = [rest[s:e] for s, e in zip(starts, [*starts[1:], len(rest)], strict=False)]
    halves = [[c for c in h if c != "timestamp"] for h in halves]
    if not halves:
        return result
    for line in text.splitlines():
        words = line.split()
        if not words or not words[0].isdigit() or len(words) < len(lead) + len(halves[0]):
            continue
        head, vals = words[:len(lead)], words[len(lead):]
        info = dict(zip(lead, head, strict=False))
        try:
            oop = _measure(halves[0], vals[:len(halves[0])])
            ip_vals = vals[len(halves[0]):len(halves[0]) + len(halves[1])] if len(halves) > 1 else []
            ip = _measure(halves[1], ip_vals) if len(ip_vals) == len(halves[1]) and ip_vals else None
            root = info.get("root")
            result.rows.append(Row(int(info["size"]), int(info["count"]), info.get("type", ""),
                                   info.get("redop", ""), int(root) if root not in (None, "-") else None,
                                   oop, ip))
        except (ValueError, KeyError):
            continue  # a line that only looks like a row (e.g. interleaved log output)
    return result
