"""nccl-tests output parser, on samples built with the printf formats of nccl-tests' src/util.cu
(v2.13+: root column, ``#wrong``) and of src/all_reduce.cu before v2.13 (``error`` as %5.0le)."""

# The samples are built with nccl-tests' own printf formats, hence %-formatting.
# ruff: noqa: UP031

from __future__ import annotations

import pytest

from hpcflow.nccl.nccltests import parse_nccl_tests

PREAMBLE = (
    "# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 "
    "iters: 20 agg iters: 1 validation: 1 graph: 0\n"
) + """\
#
# Using devices
#  Rank  0 Group  0 Pid  41052 on ip-10-1-0-11 device  0 [0x53] NVIDIA H100 80GB HBM3
#  Rank  8 Group  0 Pid  32011 on ip-10-1-0-12 device  0 [0x53] NVIDIA H100 80GB HBM3
"""
ROWS = [  # size, count, time_us, algbw, busbw
    (8, 2, 58.31, 0.00, 0.00),
    (1048576, 262144, 98.52, 10.64, 19.95),
    (8589934592, 2147483648, 45123.0, 190.37, 356.94),
]


def _new(wrong=(0, 0), avg="125.63", oob=0, per_row_wrong=None):
    out = [PREAMBLE, "#\n"]
    out.append("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n"
               % ("", "", "", "", ""))
    out.append("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n"
               % ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
                  "time", "algbw", "busbw", "#wrong", 0, ""))
    out.append("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n"
               % ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)",
                  "(GB/s)", "(GB/s)", "", 0, ""))
    for i, (size, count, t, alg, bus) in enumerate(ROWS):
        w = (per_row_wrong or {}).get(i, wrong)
        line = "%12li  %12li  %8s  %6s  %6s" % (size, count, "float", "sum", "-1")
        for half in range(2):
            ts = "%7.2f" % t if t < 10000 else "%7.0f" % t
            line += "  %7s  %6.2f  %6.2f  %5g" % (ts, alg, bus, w[half])
        out.append(line + "\n")
    if avg is not None:
        out.append("# %-20s : %d %s\n" % ("Out of bounds values", oob, "FAILED" if oob else "OK"))
        out.append("# %-20s : %s \n" % ("Avg bus bandwidth", avg))
        out.append("#\n# Collective test concluded: all_reduce_perf\n")
    return "".join(out)


def _old(error=0.0):
    out = [PREAMBLE, "#\n"]
    out.append("# %10s  %12s  %8s  %6s            out-of-place                       in-place          \n"
               % ("", "", "", ""))
    out.append("# %10s  %12s  %8s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n"
               % ("size", "count", "type", "redop", "time", "algbw", "busbw", "error", "time",
                  "algbw", "busbw", "error"))
    for size, count, t, alg, bus in ROWS:
        line = "%12li  %12li  %8s  %6s" % (size, count, "float", "sum")
        for _ in range(2):
            line += "  %7s  %6.2f  %6.2f  %5.0e" % ("%7.2f" % t, alg, bus, error)
        out.append(line + "\n")
    out.append("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 125.63 \n#\n")
    return "".join(out)


def test_a_good_run():
    r = parse_nccl_tests(_new())
    assert r.ok, r.problems()
    assert [row.size_bytes for row in r.rows] == [8, 1048576, 8589934592]
    big = r.rows[-1]
    assert big.root == -1 and big.dtype == "float" and big.redop == "sum"
    assert big.out_of_place.busbw_gbs == 356.94 and big.in_place.busbw_gbs == 356.94
    assert big.out_of_place.time_us == 45123.0
    assert r.avg_busbw_gbs == 125.63 and r.peak_busbw_gbs == 356.94
    assert r.out_of_bounds == 0


def test_wrong_elements_in_the_out_of_place_column_fail_the_run():
    r = parse_nccl_tests(_new(per_row_wrong={1: (1024, 0)}))
    assert not r.ok
    assert [row.size_bytes for row in r.wrong_rows] == [1048576]
    assert r.rows[1].out_of_place.errors == 1024 and r.rows[1].in_place.errors == 0
    assert "size 1048576 B: wrong results (out-of-place 1024, in-place 0)" in r.problems()


def test_old_format_error_column():
    good = parse_nccl_tests(_old(0.0))
    assert good.ok and good.rows[0].root is None and good.rows[0].out_of_place.errors == 0.0
    bad = parse_nccl_tests(_old(2.0))
    assert not bad.ok and len(bad.wrong_rows) == 3
    assert bad.rows[0].out_of_place.errors == 2.0


def test_out_of_bounds_values_fail_the_run():
    r = parse_nccl_tests(_new(oob=3))
    assert not r.ok and "3 out-of-bounds values" in r.problems()


def test_a_failed_run():
    text = PREAMBLE + (
        "ip-10-1-0-11: Test NCCL failure common.cu:1005 'unhandled system error (run with "
        "NCCL_DEBUG=INFO for details) / '\n"
        " .. ip-10-1-0-11 pid 41052: Test failure common.cu:891\n")
    r = parse_nccl_tests(text)
    assert not r.ok and r.rows == []
    assert r.failures[0].startswith("Test NCCL failure common.cu:1005 'unhandled system error")
    assert len(r.problems()) == 2


def test_a_run_cut_short_is_not_ok():
    r = parse_nccl_tests(_new(avg=None))
    assert len(r.rows) == 3 and not r.ok
    assert "output ends before the summary (run cut short?)" in r.problems()


@pytest.mark.parametrize("text", ["", "garbage\n1 2 3\n", "#  size count busbw\n12 x y\n"])
def test_odd_input_never_raises(text):
    r = parse_nccl_tests(text)
    assert not r.ok and r.problems()
