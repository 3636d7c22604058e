"""The kernel's view of the warning signal: an ignore or a handler set from C (as NCCL does) is
seen, though Python's signal.getsignal still shows hpcflow's handler; warned once, with the fix."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hpcflow.runtime.sigstate import SignalMasks, foreign_use, parse_status

STATUS = """Name:\tpython3
SigQ:\t0/63457
SigPnd:\t0000000000000000
ShdPnd:\t0000000000000000
SigBlk:\t0000000000000000
SigIgn:\t{ign}
SigCgt:\t{cgt}
CapInh:\t0000000000000000
"""


@pytest.mark.parametrize(("ign", "cgt", "ignored", "caught"), [
    pytest.param("0000000000000000", "0000000000000200", set(), {10}, id="usr1-caught"),
    pytest.param("0000000000000200", "0000000000000000", {10}, set(), id="usr1-ignored"),
    pytest.param("0000000001001000", "0000000180000a02", {13, 25}, {2, 10, 12, 32, 33},
                 id="several"),
])
def test_the_masks_are_read_bit_by_bit(ign, cgt, ignored, caught):
    masks = parse_status(STATUS.format(ign=ign, cgt=cgt))
    assert (masks.ignored, masks.caught, masks.blocked) == (ignored, caught, frozenset())


def test_a_garbled_status_reads_as_unknown():
    assert parse_status("SigIgn:\tzz\n") is None and parse_status("") is None


def masks(ign=(), cgt=(), blk=()):
    return SignalMasks(frozenset(blk), frozenset(ign), frozenset(cgt))


@pytest.mark.parametrize(("m", "python", "ours", "now", "env", "words"), [
    pytest.param(masks(cgt=[10]), True, 0x1000, 0x1000, {}, None, id="ours"),
    pytest.param(masks(ign=[10]), True, 0x1000, 1, {}, "ignored", id="ignored-from-c"),
    pytest.param(masks(cgt=[10], blk=[10]), True, 0x1000, 0x1000, {}, "blocked", id="blocked"),
    pytest.param(masks(cgt=[10]), True, 0x1000, 0x2000, {}, "installed from C",
                 id="c-handler-replaced-ours"),
    pytest.param(masks(cgt=[10]), False, None, None, {}, "installed from C", id="c-handler"),
    pytest.param(masks(cgt=[10]), True, 0x1000, 0x1000, {"NCCL_PROXY_DUMP_SIGNAL": "10"},
                 "NCCL_PROXY_DUMP_SIGNAL=10", id="nccl-dump-signal"),
    pytest.param(masks(cgt=[10]), True, 0x1000, 0x1000, {"NCCL_PROXY_DUMP_SIGNAL": "12"},
                 None, id="nccl-dump-on-the-other-signal"),
    pytest.param(None, True, None, None, {}, None, id="no-proc"),
])
def test_foreign_use(m, python, ours, now, env, words):
    reason = foreign_use(10, m, python_handler=python, our_address=ours, now_address=now,
                         environ=env)
    assert (reason is None) if words is None else (words in reason)


PROGRAM = """
import ctypes, signal, sys
from hpcflow.runtime.preemption import PreemptionMonitor

libc = ctypes.CDLL(None)
mon = PreemptionMonitor(None, signal.SIGUSR1)
assert mon.foreign_use() is None
if sys.argv[1] == "ignore":
    libc.signal(signal.SIGUSR1, ctypes.c_void_p(1))      # SIG_IGN, from C
else:
    HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_int)(lambda n: None)
    libc.signal(signal.SIGUSR1, HANDLER)                  # a handler of its own, from C
assert signal.getsignal(signal.SIGUSR1) == mon._on_signal  # Python still shows ours
assert mon.handler_replaced() is False
print(mon.foreign_use())
print(mon.foreign_use())
"""


@pytest.mark.parametrize(("how", "words"), [("ignore", "ignored"),
                                            ("handler", "installed from C")])
def test_a_change_made_from_c_is_seen_and_warned_once(how, words):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("NCCL_PROXY_DUMP_SIGNAL", None)
    out = subprocess.run([sys.executable, "-c", PROGRAM, how], capture_output=True, text=True,
                         env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.splitlines()
    assert words in first and second == "None"
    assert out.stderr.count("warning: SIGUSR1 may not reach hpcflow") == 1
    assert "preemption.signal: USR2" in out.stderr
