"""Pickling problems found at submission, with what cannot be pickled and what to do.

submitit pickles the call with cloudpickle and only finds out on the node that something does
not load. Two checks run before anything is written:

- the call is pickled here; on failure the culprit is searched in the arguments, the
  function's closure and the globals it uses, and named (``closure variable 'conn'
  (socket.socket)``);
- every module the call refers to by name (the function's, the classes of its arguments) must
  be importable by a fresh interpreter started the way the ranks are (same interpreter, current
  folder, environment): a module imported here through a ``sys.path`` change made at run time
  is not found on the node. Checked with ``importlib.util.find_spec`` on the top-level name, in a
  subprocess (about 50 ms; its answer is kept for the session).
"""

from __future__ import annotations

import functools
import subprocess
import sys
import types
from collections.abc import Iterator
from typing import Any

import cloudpickle

from hpcflow.errors import SubmitError

_BUILTIN_ROOTS = {"builtins", "__main__", "submitit", "hpcflow"}


def _pickles(obj: Any) -> Exception | None:
    try:
        cloudpickle.dumps(obj)
    except Exception as exc:  # noqa: BLE001 - any failure is the answer
        return exc
    return None


def _parts(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    for i, value in enumerate(args):
        yield f"argument {i}", value
    for key, value in kwargs.items():
        yield f"keyword argument {key!r}", value
    target = getattr(fn, "__func__", fn)
    code = getattr(target, "__code__", None)
    if code is not None:
        for name, cell in zip(code.co_freevars, target.__closure__ or (), strict=False):
            try:
                yield f"closure variable {name!r} of {target.__qualname__}", cell.cell_contents
            except ValueError:  # an empty cell
                continue
        glob = getattr(target, "__globals__", {})
        for name in code.co_names:
            if name in glob:
                yield f"global {name!r} used by {target.__qualname__}", glob[name]
    elif not isinstance(fn, type) and hasattr(fn, "__dict__"):
        for key, value in vars(fn).items():
            yield f"attribute {key!r} of the callable", value


def _describe(value: Any) -> str:
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}"


def check_picklable(call: Any, fn: Any) -> None:
    """Refuse a call that cannot be pickled, or that refers to a module the ranks cannot import.

    Args:
        call: the ``DelayedSubmission`` that submitit will pickle.
        fn: the user's callable (for the search and the message).

    Raises:
        SubmitError: naming what cannot be pickled (and where it is) or the module, with the fix.
    """
    exc = _pickles(call)
    if exc is not None:
        culprit = "the function itself"
        for where, value in _parts(fn, call.args, call.kwargs):
            if _pickles(value) is not None:
                culprit = f"{where} ({_describe(value)})"
                break
        raise SubmitError(
            f"cannot submit {getattr(fn, '__qualname__', fn)!r}: {culprit} cannot be pickled "
            f"({type(exc).__name__}: {exc}). The call is pickled and loaded again on every rank: "
            "open sockets, files, locks, processes and live connections cannot travel. Pass what "
            "is needed to create it (an address, a path) and create it inside the function.")
    for module in _referenced_modules(fn, call.args, call.kwargs):
        if not _importable_on_node(module):
            raise SubmitError(
                f"cannot submit {getattr(fn, '__qualname__', fn)!r}: it refers to module "
                f"{module!r}, which a fresh Python on the nodes cannot import (found here through "
                f"sys.path {_origin(module)!r}, not from the folder the job starts in, PYTHONPATH "
                "or the installed packages). Install it (pip install -e .), add its folder to "
                "PYTHONPATH before submitting, or define the function in the script you run.")


def _by_reference(obj: Any) -> bool:
    """Whether cloudpickle stores ``obj`` as "module.qualname" (to be imported on the node)
    rather than by value: only when that name leads back to ``obj`` (cloudpickle's rule;
    lambdas, local functions and everything in ``__main__`` travel by value)."""
    module = getattr(obj, "__module__", None)
    if not module or module == "__main__" or module not in sys.modules:
        return False
    found: Any = sys.modules[module]
    for part in getattr(obj, "__qualname__", "").split("."):
        found = getattr(found, part, None)
    return found is obj


def _referenced_modules(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[str]:
    """Top-level names of the modules the pickled call imports on the node."""
    target = getattr(fn, "__func__", fn)
    names: list[str] = []
    owners = [target if hasattr(target, "__code__") or isinstance(target, type) else type(fn)]
    owners += [type(v) for v in (*args, *kwargs.values())]
    for obj in owners:
        if _by_reference(obj):
            names.append(obj.__module__)
    if not _by_reference(target):  # by value: what its code uses is pickled with it
        code, glob = getattr(target, "__code__", None), getattr(target, "__globals__", {})
        for name in code.co_names if code is not None else ():
            value = glob.get(name)
            if isinstance(value, types.ModuleType):
                names.append(value.__name__)
            elif callable(value) and _by_reference(value):
                names.append(value.__module__)
    found: list[str] = []
    for module in names:
        root = module.split(".")[0]
        if root in _BUILTIN_ROOTS or root in sys.stdlib_module_names or root in found:
            continue
        found.append(root)
    return found


def _origin(module: str) -> str:
    mod = sys.modules.get(module)
    return str(getattr(mod, "__file__", None) or "?")


@functools.lru_cache(maxsize=256)
def _importable_on_node(module: str) -> bool:
    code = (f"import importlib.util, sys; "
            f"sys.exit(0 if importlib.util.find_spec({module!r}) else 3)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    return proc.returncode == 0
