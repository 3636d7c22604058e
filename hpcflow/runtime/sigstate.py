"""What the kernel says about the warning signal, beyond what Python's ``signal.getsignal`` sees.

``signal.getsignal`` knows only handlers installed through Python. A library that calls libc's
``signal``/``sigaction`` from C (NCCL has installed its own handler that way; submitit moved to
USR2 for that reason) is invisible to it. The kernel's view is in ``/proc/self/status``: the
hexadecimal masks ``SigBlk`` (blocked by the reading thread), ``SigIgn`` (ignored) and ``SigCgt``
(caught), where bit ``n - 1`` stands for signal ``n`` (proc(5), /proc/pid/status). The handler's
address itself comes from ``sigaction(signum, NULL, &old)`` (sigaction(2)).

NCCL also lets a user pick a signal that dumps its proxy state, ``NCCL_PROXY_DUMP_SIGNAL`` (NCCL
user guide, Environment Variables): when it names the warning signal, NCCL takes it.

Standard library only; Linux. Elsewhere every reader returns None.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class SignalMasks:
    """The signals a process blocks, ignores and catches (sets of signal numbers)."""

    blocked: frozenset[int]
    ignored: frozenset[int]
    caught: frozenset[int]


def _bits(hex_mask: str) -> frozenset[int]:
    value = int(hex_mask, 16)
    return frozenset(n + 1 for n in range(value.bit_length()) if value >> n & 1)


def parse_status(text: str) -> SignalMasks | None:
    """``/proc/<pid>/status`` text -> :class:`SignalMasks`; None when a mask line is missing or
    garbled. Pure."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("SigBlk", "SigIgn", "SigCgt"):
            fields[key] = value.strip()
    try:
        return SignalMasks(_bits(fields["SigBlk"]), _bits(fields["SigIgn"]),
                           _bits(fields["SigCgt"]))
    except (KeyError, ValueError):
        return None


def read_masks(path: str = "/proc/thread-self/status") -> SignalMasks | None:
    """The calling thread's masks (its ``SigBlk`` is per thread; the others per process), or
    None where ``/proc`` has no such file. One small read."""
    for candidate in (path, "/proc/self/status"):
        try:
            with open(candidate, encoding="ascii", errors="replace") as fh:
                return parse_status(fh.read(8192))
        except OSError:
            continue
    return None


def handler_address(signum: int) -> int | None:
    """The address of the C-level handler the kernel runs for ``signum`` (0 = default, 1 =
    ignore), from ``sigaction(signum, NULL, &old)``; None where libc cannot be asked.

    Only the first field of ``struct sigaction`` is read (``sa_handler``, a pointer, first in
    glibc's and musl's layout); the buffer is larger than the whole struct.
    """
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6", use_errno=True)
    except OSError:
        return None
    buf = ctypes.create_string_buffer(512)
    if libc.sigaction(ctypes.c_int(signum), None, buf) != 0:
        return None
    return ctypes.c_void_p.from_buffer(buf).value or 0


def proxy_dump_signal(environ: Mapping[str, str]) -> int | None:
    """``NCCL_PROXY_DUMP_SIGNAL`` as a signal number, or None (unset or not a number)."""
    raw = environ.get("NCCL_PROXY_DUMP_SIGNAL", "").strip()
    return int(raw) if raw.isdigit() else None


def foreign_use(signum: int, masks: SignalMasks | None, *, python_handler: bool,
                our_address: int | None, now_address: int | None,
                environ: Mapping[str, str] | None = None) -> str | None:
    """Why ``signum`` may not reach hpcflow's handler, or None. Pure.

    Args:
        signum: the warning signal.
        masks: the kernel's masks (:func:`read_masks`), or None.
        python_handler: Python's ``signal.getsignal`` shows a Python-level handler (hpcflow's
            or another): Python's own C trampoline then catches the signal.
        our_address: :func:`handler_address` right after hpcflow installed its handler.
        now_address: :func:`handler_address` now.
        environ: the environment (``NCCL_PROXY_DUMP_SIGNAL``); default ``os.environ``.

    Returns:
        A short reason: ignored, blocked, a handler installed from C, or NCCL's dump signal.
    """
    environ = os.environ if environ is None else environ
    if masks is not None and signum in masks.ignored:
        return "the signal is ignored (SIG_IGN set from C: SigIgn in /proc/self/status)"
    if masks is not None and signum in masks.blocked:
        return "the signal is blocked in this thread (SigBlk in /proc/self/status)"
    if python_handler and our_address and now_address is not None \
            and now_address not in (our_address, 0, 1):
        return (f"a handler installed from C (at {now_address:#x}) replaced Python's "
                "(sigaction)")
    if not python_handler and masks is not None and signum in masks.caught:
        return "a handler installed from C catches it (SigCgt in /proc/self/status)"
    if proxy_dump_signal(environ) == signum:
        return f"NCCL_PROXY_DUMP_SIGNAL={signum}: NCCL dumps its proxy state on it"
    return None
