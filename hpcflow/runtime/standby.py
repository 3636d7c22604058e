"""A warm standby rank: an interpreter started ahead, with the program's libraries imported, that
waits until the supervisor hands it an in-job restart (``resilience.warm_standby``;
docs/protocol.md, "Warm standby").

The supervisor starts one standby step beside the running step (``srun --overlap``, the step's
own layout); each of its tasks runs ``python -m hpcflow.runtime.standby --go FILE --modules
FILE -- (-m MODULE | SCRIPT) ARGS...``:

1. rank 0 writes the step's id beside the go file (:func:`mark_step`);
2. it imports torch and the installed modules the previous program start had loaded by its
   first step (rank 0 lists them in the ``--modules`` file, :func:`record_loaded_modules`);
   an import that fails is skipped: the program imports what it needs itself;
3. it waits for the go file (:func:`wait_for_go`): ``{"env": {...}}`` (the new try's
   environment, docs/protocol.md, "Environment") or ``{"quit": true}``; one that comes with
   the wake-up signal while it still imports ends the imports at once (:func:`woken`);
4. on go it takes that environment and runs the program as ``python -m MODULE`` or ``python
   SCRIPT`` would (:mod:`runpy`: ``__name__ == "__main__"``, ``sys.argv``, ``sys.path[0]``);
   its exit status is the program's.

Its ``sys.path`` is the program's own: the supervisor starts it with ``-P`` (Python >= 3.11:
no working folder put first, so neither hpcflow nor the standard library can be taken from a
module planted in the step's working folder), and it puts first what the program's start
would (:func:`first_path`): the script's folder from the outset, or, for ``-m MODULE``, the
working folder only at go, after torch and the listed modules came from where they are
installed.

Before go it never prints and calls itself ``hpcflow-standby`` (``ps``); it leaves quietly
(status 0) on TERM (Slurm ending the job or a preemption) or on quit, so that an unused standby
never writes to the job log or reads as a failed step. USR1 and USR2 are ignored before go (a
warning is the running step's) and given back their default action at go, as a fresh
interpreter has them.
"""

from __future__ import annotations

import argparse
import builtins
import importlib
import os
import runpy
import signal
import sys
import sysconfig
import time
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from hpcflow.contract import GoRecord
from hpcflow.fsutil import write_atomic
from hpcflow.protocol import ENV_WARM_MODULES, ENV_WARM_T0, STANDBY_STEP_SUFFIX

__all__ = ["Go", "Program", "first_path", "loaded_package_modules", "main", "mark_step", "parse_program",
           "preload", "preload_names", "read_go", "record_loaded_modules", "wait_for_go"]

#: Seconds between two looks at the go file when no wake-up signal comes.
POLL_S = 0.5
#: The signal that wakes a standby to look at its go file: its default action is to do nothing
#: (signal(7)), so it harms no process it reaches by mistake, and Slurm never sends it itself.
WAKE_SIGNAL = signal.SIGURG
#: Most module names a list keeps (a large program loads a few thousand).
MAX_MODULES = 20000
#: Imported before any list: what a training program loads first.
ALWAYS = ("torch", "torch.distributed")


#: What a standby rank calls itself while it waits (``/proc/self/comm``, at most 15 bytes;
#: proc(5)), so that ``ps`` and ``top`` tell it from the ranks at work; at go it takes back its
#: interpreter's name.
WAITING_NAME = "hpcflow-standby"


def process_name() -> str:
    """This process's name (``/proc/self/comm``), ``python`` where it cannot be read."""
    try:
        return Path("/proc/self/comm").read_text().strip() or "python"
    except OSError:
        return "python"


def set_process_name(name: str) -> None:
    """This process's name as ``ps -o comm`` shows it (Linux ``/proc/self/comm``); nothing
    elsewhere."""
    try:
        with open("/proc/self/comm", "w") as fh:
            fh.write(name[:15])
    except OSError:
        pass


@dataclass(frozen=True)
class Program:
    """What the standby runs on go: ``module`` (``python -m``) or ``script`` (``python
    SCRIPT``), with its arguments."""

    module: str | None
    script: str | None
    args: tuple[str, ...]


def parse_program(words: Sequence[str]) -> Program:
    """``["-m", MODULE, *ARGS]`` or ``[SCRIPT, *ARGS]``: the program's words after the
    interpreter.

    Raises:
        ValueError: no words, ``-m`` without a module, or an interpreter option (a word starting
            with ``-`` before the script): the standby runs only these two forms.
    """
    if not words:
        raise ValueError("no program: expected '-m MODULE ARGS...' or 'SCRIPT ARGS...'")
    if words[0] == "-m":
        if len(words) < 2 or not words[1]:
            raise ValueError("'-m' needs a module name")
        return Program(module=words[1], script=None, args=tuple(words[2:]))
    if words[0].startswith("-"):
        raise ValueError(f"interpreter option {words[0]!r}: the standby runs 'python -m MODULE' "
                         "or 'python SCRIPT' only")
    return Program(module=None, script=words[0], args=tuple(words[1:]))


def package_roots() -> tuple[str, ...]:
    """The folders installed packages live in (sysconfig's ``purelib`` and ``platlib``), and
    hpcflow's own, with a trailing separator."""
    roots = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    roots.add(str(Path(__file__).resolve().parents[2]))
    return tuple(sorted(os.path.join(os.path.realpath(r), "") for r in roots))


def loaded_package_modules(modules: Mapping[str, Any], roots: Sequence[str]) -> list[str]:
    """Names of the loaded modules whose file lies under one of ``roots``, in import order.

    The program's own modules (beside its script, in its working folder) are left out: the
    standby imports installed libraries only, whose import has no effect on the program's run.
    """
    out: list[str] = []
    prefixes = tuple(roots)
    under: dict[str, bool] = {}  # a module's folder -> it lies under a root (one realpath each)
    for name, module in list(modules.items()):
        if name == "__main__" or name.startswith("__mp_main__"):
            continue
        path = getattr(module, "__file__", None)
        if not isinstance(path, str):
            continue
        folder = os.path.dirname(path)
        if folder not in under:
            under[folder] = os.path.join(os.path.realpath(folder), "").startswith(prefixes)
        if not under[folder]:
            continue
        out.append(name)
        if len(out) >= MAX_MODULES:
            break
    return out


def record_loaded_modules(environ: Mapping[str, str] | None = None) -> bool:
    """Write the installed modules this process has loaded to ``HPCFLOW_WARM_MODULES`` (one
    name a line, 0600, atomic), for the next standby. Called by :class:`~hpcflow.runtime.run.Run`
    on rank 0 at its first step. Returns False (and writes nothing) when the variable is unset;
    a write that fails is skipped (the standby then imports torch only)."""
    environ = os.environ if environ is None else environ
    target = environ.get(ENV_WARM_MODULES)
    if not target:
        return False
    names = loaded_package_modules(sys.modules, package_roots())
    try:
        write_atomic(Path(target), "".join(f"{n}\n" for n in names), mode=0o600,
                            durable=False)
    except OSError:
        return False
    return True


def preload_names(listed: Sequence[str], program: Program) -> list[str]:
    """What a standby imports ahead: :data:`ALWAYS`, then the listed modules, without the
    program's own module (``python -m MODULE``: runpy runs it fresh as ``__main__``; imported
    ahead, its top level would run twice)."""
    return [n for n in (*ALWAYS, *listed) if n != program.module]


def preload(names: Iterable[str], stop: Callable[[], bool] = lambda: False) -> tuple[int, int]:
    """Import each of ``names`` that is not loaded yet; skip any that fails; give up as soon as
    ``stop()`` says so (asked before each import). Returns (imported, skipped)."""
    imported = skipped = 0
    for name in names:
        if not name or name in sys.modules:
            continue
        if stop():
            break
        try:
            importlib.import_module(name)
            imported += 1
        except (Exception, SystemExit):  # noqa: BLE001 - the program imports what it needs itself
            skipped += 1
    return imported, skipped


#: The go file's content: the environment to take, or quit (the contract's record).
Go = GoRecord


def read_go(text: str) -> Go | None:
    """The go file's record (:meth:`hpcflow.contract.GoRecord.decode`), or None while it is not
    whole."""
    return GoRecord.decode(text)


def look(path: Path) -> Go | None:
    """The go record in ``path``, or None while there is none."""
    try:
        return read_go(path.read_text())
    except OSError:
        return None


def woken(path: Path) -> Go | None:
    """The go record, if the wake-up signal came (it is taken: a wake-up without a whole record
    is looked at again by :func:`wait_for_go`); None otherwise. One sigpending(2), no file
    access, when no signal came: cheap enough to ask between two imports."""
    if WAKE_SIGNAL not in signal.sigpending():
        return None
    signal.sigtimedwait([WAKE_SIGNAL], 0)
    return look(path)


def wait_for_go(path: Path, *, poll_s: float = POLL_S) -> Go:
    """Wait until ``path`` holds a whole go record; return it.

    Between two looks it sleeps in sigtimedwait(2) on :data:`WAKE_SIGNAL` (blocked by
    :func:`main` from the start, so one sent early stays pending): the supervisor sends it to the
    standby step once the file is written (``scancel --signal=URG <job>.<step>``; scancel(1)),
    so the hand-over does not wait for the next look, and a shared file system sees one look a
    rank every ``poll_s`` seconds, not a busy poll."""
    while True:
        if (go := look(path)) is not None:
            return go
        signal.sigtimedwait([WAKE_SIGNAL], poll_s)


def mark_step(go_path: Path, environ: Mapping[str, str]) -> None:
    """Rank 0 of the standby step writes its step id (``SLURM_STEP_ID``) beside the go file
    (``<go>.step``) as it starts: the supervisor's address for the wake-up signal and for TERM
    when the standby is not needed (``scancel <job>.<step>``)."""
    if environ.get("SLURM_PROCID", "0") != "0" or not environ.get("SLURM_STEP_ID"):
        return
    try:
        write_atomic(go_path.with_name(go_path.name + STANDBY_STEP_SUFFIX),
                            environ["SLURM_STEP_ID"], mode=0o600, durable=False)
    except OSError:
        pass  # the standby then finds its go file at its next look, without the wake-up


def first_path(program: Program, environ: Mapping[str, str] | None = None,
               ignore_environment: bool | None = None) -> str | None:
    """The folder the program's own interpreter would put first on ``sys.path``: the script's
    folder (symlinks resolved) for ``python SCRIPT``, the working folder for ``python -m
    MODULE``, none under ``PYTHONSAFEPATH`` (unless ``-E`` ignores the environment). Python's
    "The initialization of the sys.path module search path" and ``-P`` (Python >= 3.11)."""
    environ = os.environ if environ is None else environ
    ignore = sys.flags.ignore_environment if ignore_environment is None else ignore_environment
    if environ.get("PYTHONSAFEPATH") and not ignore:
        return None
    if program.script is not None:
        return os.path.dirname(os.path.realpath(program.script))
    return os.getcwd()


def run_program(program: Program) -> None:
    """Run ``program`` as the interpreter would (``python -m`` / ``python SCRIPT``: ``sys.argv``
    as given, ``__file__`` absolute, since Python 3.9). An exception it does not catch is
    reported as the interpreter reports it (``sys.excepthook``), from the program's own frames:
    the standby's and runpy's are left out; then the process exits with status 1, as the
    interpreter does."""
    try:
        if program.module is not None:
            sys.argv = ["-m", *program.args]
            runpy.run_module(program.module, run_name="__main__", alter_sys=True)
            return
        run_script(str(program.script), program.args)
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException as exc:  # noqa: BLE001 - reported as the interpreter would, then exit 1
        tb = programs_frames(exc.__traceback__)
        sys.excepthook(type(exc), exc.with_traceback(tb), tb)
        raise SystemExit(1) from None


def run_script(script: str, args: Sequence[str]) -> None:
    """``python SCRIPT ARGS``: ``sys.argv[0]`` as given, ``__file__`` and the code's file name
    absolute, ``sys.path[0]`` the script's folder, and the module ``__main__`` in
    ``sys.modules`` (where pickle and multiprocessing's spawn look for it). runpy.run_path
    would set ``sys.argv[0]`` to the path it is given."""
    path = os.path.abspath(script)
    with open(path, "rb") as fh:
        code = compile(fh.read(), path, "exec")
    main = types.ModuleType("__main__")
    main.__file__ = path
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    sys.argv = [script, *args]
    exec(code, main.__dict__)  # noqa: S102 - the job's own program, as the interpreter runs it


def programs_frames(tb: TracebackType | None) -> TracebackType | None:
    """``tb`` without its first frames that belong to this module or to runpy."""
    ours = {os.path.realpath(__file__), runpy.__file__ and os.path.realpath(runpy.__file__)}
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if name != "<frozen runpy>" and os.path.realpath(name) not in ours:
            break
        tb = tb.tb_next
    return tb


def _leave_quietly(signum: int, frame: Any) -> None:
    os._exit(0)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hpcflow.runtime.standby",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--go", type=Path, required=True, help="the go file to wait for")
    p.add_argument("--modules", type=Path, default=None,
                   help="the module list of the previous program start (one name a line)")
    p.add_argument("program", nargs=argparse.REMAINDER,
                   help="-- (-m MODULE | SCRIPT) ARGS...")
    args = p.parse_args(argv)
    words = args.program[1:] if args.program[:1] == ["--"] else args.program
    try:
        program = parse_program(words)
    except ValueError as exc:
        p.error(str(exc))
    own_name = process_name()
    set_process_name(WAITING_NAME)
    signal.pthread_sigmask(signal.SIG_BLOCK, [WAKE_SIGNAL])
    signal.signal(signal.SIGTERM, _leave_quietly)
    mark_step(args.go, os.environ)
    for name in ("SIGUSR1", "SIGUSR2"):
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    listed: list[str] = []
    if args.modules is not None:
        try:
            listed = args.modules.read_text().split()
        except OSError:
            pass
    names = preload_names(listed, program)
    first = first_path(program)
    if program.script is not None and first is not None:
        sys.path.insert(0, first)  # as ``python SCRIPT`` has it before the program's imports
    # A hand-over or a quit while it still imports: stop importing (the program imports the rest
    # itself), so that neither waits for the whole list.
    early: list[Go] = []

    def handed_over() -> bool:
        if not early and (go := woken(args.go)) is not None:
            early.append(go)
        return bool(early)

    preload(names, stop=handed_over)
    go = early[0] if early else wait_for_go(args.go)
    if go.quit:  # nothing to flush: leave without the interpreter's teardown (torch's is slow)
        os._exit(0)
    set_process_name(own_name)
    os.environ.update(go.env)
    os.environ[ENV_WARM_T0] = f"{time.time():.6f}"
    for name in ("SIGTERM", "SIGUSR1", "SIGUSR2"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [WAKE_SIGNAL])
    if program.module is not None and first is not None:
        sys.path.insert(0, first)  # ``python -m MODULE`` finds the module in its working folder
    run_program(program)
    return 0


if __name__ == "__main__":
    if not sys.flags.safe_path:  # started without -P: drop the working folder ``-m`` put first
        del sys.path[0]
    sys.exit(main())
