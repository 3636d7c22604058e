"""``hpcflow --host [user@]head[:port] <command> ...``: the global options of remote mode, and
the command that runs a verb on the head node instead of here.

The verb's arguments are parsed here first by the verb itself (same usage errors, same exit
code 2, same ``--help``), then sent as typed; only ``submit``'s spec path is replaced by its
place in the uploaded run folder. The work is :func:`hpcflow.remote.session.run_remote`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import click

REMOTE_COMMANDS = ("submit", "status", "logs", "cancel", "report", "list")

_OPTIONS = [
    click.option("--host", metavar="[USER@]HOST[:PORT]",
                 help=f"Run {', '.join(REMOTE_COMMANDS)} on this head node over SSH (keys or "
                      "agent; host key checked against known_hosts)."),
    click.option("--code", is_flag=True,
                 help="With --host submit: also send the spec's git repository as committed "
                      "(git archive HEAD); the spec keeps its place in it."),
    click.option("--code-with-secret-files", is_flag=True,
                 help="With --code: also send committed files named like credentials files "
                      "(.env, *.pem, secrets.yaml...), which --code refuses by default."),
    click.option("--remote-hpcflow", default="hpcflow", show_default=True,
                 envvar="HPCFLOW_REMOTE_HPCFLOW", metavar="COMMAND",
                 help="With --host: the command that runs hpcflow on the head node [env "
                      "HPCFLOW_REMOTE_HPCFLOW]."),
    click.option("--remote-dir", default="~/hpcflow-remote", show_default=True, metavar="DIR",
                 help="With --host submit: where run folders are made on the head node."),
    click.option("--identity", type=click.Path(dir_okay=False), metavar="KEYFILE",
                 help="With --host: SSH private key (default: your agent and ~/.ssh keys)."),
    click.option("--known-hosts", type=click.Path(dir_okay=False), metavar="FILE",
                 help="With --host: known_hosts file, only read (default: "
                      "~/.ssh/known_hosts)."),
    click.option("--accept-new-host-keys", is_flag=True,
                 help="With --host: trust an unknown head node and save its key in hpcflow's "
                      "own known_hosts (a changed key is always refused)."),
]


def remote_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator: the remote-mode options of the ``hpcflow`` group."""
    for option in reversed(_OPTIONS):
        func = option(func)
    return func


def check_remote_options(remote: dict[str, Any]) -> None:
    """Refuse remote-mode options given without ``--host`` (they would be ignored).

    Raises:
        click.UsageError: names the option (exit 2).
    """
    if remote.get("host"):
        return
    given = [name for name, value in (("--code", remote.get("code")),
                                      ("--code-with-secret-files",
                                       remote.get("code_with_secret_files")),
                                      ("--identity", remote.get("identity")),
                                      ("--known-hosts", remote.get("known_hosts")),
                                      ("--accept-new-host-keys", remote.get("accept_new_host_keys")))
             if value]
    if remote.get("remote_dir") not in (None, "~/hpcflow-remote"):
        given.append("--remote-dir")
    if given:
        raise click.UsageError(f"{', '.join(given)}: allowed only with --host [USER@]HOST[:PORT]")


def positional_index(cmd: click.Command, args: Sequence[str]) -> int | None:
    """Index in ``args`` of the command's first positional argument, or None: skips options and
    the values of options that take one (``--set X``), as click parses them."""
    takes_value = {name for p in cmd.params if isinstance(p, click.Option) and not p.is_flag
                   and not p.count for name in (*p.opts, *p.secondary_opts)}
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":
            return i + 1 if i + 1 < len(args) else None
        if word.startswith("-") and word != "-":
            if word in takes_value:
                i += 1  # its value is the next word; --opt=value is one word
            i += 1
            continue
        return i
    return None


class RemoteCommand(click.Command):
    """Stands in for a verb when ``--host`` is given: parses the arguments with the verb, then
    runs the verb on the head node and exits with its exit code."""

    def __init__(self, inner: click.Command) -> None:
        super().__init__(inner.name, help=inner.help, short_help=inner.short_help,
                         add_help_option=False)
        self.inner = inner

    def make_context(self, info_name: str | None, args: list[str],
                     parent: click.Context | None = None, **extra: Any) -> click.Context:
        raw = list(args)
        self.inner.make_context(info_name, list(args), parent=parent, **extra)  # usage, --help
        ctx = click.Context(self, info_name=info_name, parent=parent)
        ctx.params = {"raw": raw}
        return ctx

    def invoke(self, ctx: click.Context) -> Any:
        from hpcflow.cli.output import handles_errors

        raw: list[str] = ctx.params["raw"]
        words = raw[: raw.index("--")] if "--" in raw else raw
        code = handles_errors(self._run)(ctx, raw, as_json="--json" in words)
        sys.exit(code)

    def _run(self, ctx: click.Context, raw: list[str], as_json: bool) -> int:  # noqa: ARG002
        from hpcflow.remote.session import RemoteOptions, run_remote
        from hpcflow.remote.ssh import parse_host

        o = ctx.find_root().obj["remote"]
        if o["code"] and self.name != "submit":
            raise click.UsageError("--code goes with submit only")
        if o["code_with_secret_files"] and not o["code"]:
            raise click.UsageError("--code-with-secret-files goes with --code only")
        opts = RemoteOptions(parse_host(o["host"]), o["remote_hpcflow"], o["remote_dir"],
                             o["identity"], o["known_hosts"], o["accept_new_host_keys"], o["code"],
                             o["code_with_secret_files"])
        index = positional_index(self.inner, raw) if self.name == "submit" else None
        return run_remote(opts, self.name, raw, spec_index=index,
                          note=lambda line: click.echo(line, err=True))


def remote_command(name: str | None, cmd: click.Command | None) -> click.Command | None:
    """The remote stand-in for the verb ``name`` (``--host`` was given).

    Raises:
        click.UsageError: a command that only runs on this machine (exit 2).
    """
    if cmd is None:
        return cmd
    if name not in REMOTE_COMMANDS:
        raise click.UsageError(f"--host runs {', '.join(REMOTE_COMMANDS)} on the head node; "
                               f"`{name}` runs on this machine only (drop --host)")
    return RemoteCommand(cmd)
