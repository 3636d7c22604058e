"""Rendering and error handling shared by every CLI command.

Machine-readable output (``--json``) always has one stable envelope::

    {"ok": true, "data": ..., "error": null}
    {"ok": false, "data": null, "error": {"type": "SpecError", "message": "...", "exit_code": 2}}

An error may carry what was found before it failed in a ``data`` attribute (``cluster validate``
keeps every finding, warnings included); the envelope then holds it instead of null.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import click

from hpcflow.errors import HpcflowError

F = TypeVar("F", bound=Callable[..., Any])


def emit_json(data: Any, *, failure: tuple[str, str, int] | None = None) -> None:
    """Print ``data`` in the envelope: ``ok`` true, or with ``failure`` (type, message, exit
    code) ``ok`` false and that error beside the data (a command that ran but found problems)."""
    error = None
    if failure is not None:
        kind, message, code = failure
        error = {"type": kind, "message": message, "exit_code": code}
    click.echo(json.dumps({"ok": error is None, "data": data, "error": error}, indent=2,
                          default=str))


def print_table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]], *,
                no_wrap: int = 0, pipe_width: int = 200) -> None:
    """Print a rich table (imported lazily) to stdout; ``None`` cells are empty.

    Args:
        no_wrap: how many leading columns (names) never wrap or get cut.
        pipe_width: the width in characters when stdout is not a terminal (a pipe or a file has
            no width to respect: a wide one keeps every figure rather than truncating cells).
    """
    from rich.console import Console
    from rich.table import Table

    # At least as wide as its title: rich wraps a title to the table's width otherwise.
    table = Table(title=title, min_width=len(title) if title else None)
    for i, col in enumerate(columns):
        table.add_column(col, no_wrap=i < no_wrap)
    for row in rows:
        table.add_row(*("" if v is None else str(v) for v in row))
    console = Console(width=None if sys.stdout.isatty() else pipe_width)
    console.on_broken_pipe = _reader_left  # type: ignore[method-assign]
    console.print(table)


def _reader_left() -> None:
    """rich's own handler exits 1 on a closed pipe; raise instead, so that
    :func:`handles_errors` ends the command quietly with SIGPIPE's status (141), as for any
    other write (``hpcflow report J | head``)."""
    raise BrokenPipeError


_TERMINAL_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def warn_read(notes: Iterable[str], skipped: dict[str, int], what: str = "lines") -> None:
    """On stderr: each note of a reader, then how many ``what`` (lines, values) it skipped in
    each place because they do not decode (``{place: count}``; places with none are left out)."""
    for note in notes:
        click.echo(f"hpcflow: warning: {note}", err=True)
    if any(skipped.values()):
        click.echo(f"hpcflow: warning: skipped {what} that do not decode: " + ", ".join(
            f"{n} in the {where}" for where, n in skipped.items() if n), err=True)


def print_script(text: str) -> None:
    """Print a rendered batch script: byte-exact (UTF-8) when stdout is a file or a pipe, so
    ``hpcflow submit --dry-run job.yaml > job.sbatch`` gives the script that would be submitted.

    On a terminal, control characters other than newline and tab (an ANSI escape in an ``env``
    value, say) are shown escaped as ``\\xNN``, so the script cannot redraw the screen; a note
    on stderr says so.
    """
    sys.stdout.flush()
    out = sys.stdout.buffer
    if out.isatty() and _TERMINAL_CONTROL_RE.search(text):
        text = _TERMINAL_CONTROL_RE.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
        click.echo("hpcflow: control characters in the script are shown as \\xNN; redirect the "
                   "output to a file for the exact script", err=True)
    out.write(text.encode("utf-8"))
    out.flush()


class JsonCommand(click.Command):
    """A command whose usage errors (a malformed argument, an option out of range) come in the
    JSON envelope, with click's exit code 2, when ``--json`` is among its arguments."""

    def make_context(self, info_name: str | None, args: list[str],
                     parent: click.Context | None = None, **extra: Any) -> click.Context:
        words = list(args)
        wants_json = "--json" in (words[: words.index("--")] if "--" in words else words)
        try:
            return super().make_context(info_name, words, parent=parent, **extra)
        except click.ClickException as exc:
            if not wants_json:
                raise
            _report(exc.format_message(), "UsageError", exc.exit_code, True)
            sys.exit(exc.exit_code)


def check_job_id(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """click callback: refuse what is not a Slurm job id before Slurm is asked (exit 2); a
    SageMaker training job's name is pointed to its ``hpcflow sagemaker`` command."""
    from hpcflow.cli.sagemaker import pointer
    from hpcflow.jobs import service

    if value is not None and (problem := service.job_id_problem(value)):
        raise click.BadParameter(problem + pointer(ctx.info_name, value))
    return value


def handles_errors(func: F) -> F:
    """Decorator: turn :class:`HpcflowError` into a clean message and its exit code.

    With ``--json`` on the command the error is printed in the envelope on stdout. Any other
    exception is a bug: it is reported as such, with the traceback only under ``--debug``.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        root = ctx.find_root()
        debug = bool((root.obj or {}).get("debug"))
        as_json = bool(kwargs.get("as_json"))
        try:
            return func(*args, **kwargs)
        except HpcflowError as exc:
            if debug:
                traceback.print_exc()
            _report(str(exc), type(exc).__name__, exc.exit_code, as_json, getattr(exc, "data", None))
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)
        except BrokenPipeError:  # `hpcflow report J | head`: the reader left; say nothing more
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # Python docs, signal: "Note on SIGPIPE"
            sys.exit(141)
        except click.exceptions.ClickException as exc:
            if not as_json:
                raise
            _report(exc.format_message(), "UsageError", exc.exit_code, True)
            sys.exit(exc.exit_code)
        except (click.exceptions.Exit, click.exceptions.Abort):
            raise
        except Exception as exc:  # noqa: BLE001 - the last line of defence: no bare traceback
            if debug:
                traceback.print_exc()
            hint = "" if debug else "; run with --debug for the traceback"
            wrapped = RuntimeError(f"internal error ({type(exc).__name__}: {exc}); this is a bug in "
                                   f"hpcflow, please report it{hint}")
            _report(str(wrapped), "InternalError", 1, as_json)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


def _report(message: str, kind: str, code: int, as_json: bool, data: Any = None) -> None:
    if as_json:
        envelope = {"ok": False, "data": data,
                    "error": {"type": kind, "message": message, "exit_code": code}}
        click.echo(json.dumps(envelope, indent=2))
    else:
        click.echo(f"error: {message}", err=True)
