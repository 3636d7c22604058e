"""The ``hpcflow`` command: a click group whose sub-commands are imported only when used,
so ``hpcflow --help`` stays fast (no torch, boto3 or fabric at import time)."""

from __future__ import annotations

import importlib

import click

from hpcflow import __version__
from hpcflow.cli.remote import check_remote_options, remote_options

# name -> "module:attribute". Top-level commands of the jobs group are listed one by one so
# they read as `hpcflow submit`, `hpcflow status`, ... (the researcher's everyday verbs).
COMMANDS: dict[str, str] = {
    "submit": "hpcflow.cli.jobs:submit",
    "status": "hpcflow.cli.jobs:status",
    "logs": "hpcflow.cli.jobs:logs",
    "cancel": "hpcflow.cli.jobs:cancel",
    "list": "hpcflow.cli.jobs:list_jobs",
    "report": "hpcflow.cli.report:report",
    "local-cluster": "hpcflow.cli.local_cluster:local_cluster",
    "cluster": "hpcflow.cli.cluster:cluster",
    "doctor": "hpcflow.cli.doctor:doctor",
    "bootstrap": "hpcflow.cli.bootstrap:bootstrap",
    "spot-watch": "hpcflow.cli.spot:spot_watch",
    "plan": "hpcflow.cli.plan:plan",
    "sagemaker": "hpcflow.cli.sagemaker:sagemaker",
}


class LazyGroup(click.Group):
    """A group that imports a sub-command's module only when that command is invoked or listed."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        return getattr(importlib.import_module(module_name), attr)

    def resolve_command(self, ctx: click.Context,
                        args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        name, cmd, rest = super().resolve_command(ctx, args)
        if ctx.params.get("host"):  # remote mode: the verb runs on the head node
            from hpcflow.cli.remote import remote_command

            cmd = remote_command(name, cmd)
        return name, cmd, rest


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hpcflow")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@remote_options
@click.pass_context
def cli(ctx: click.Context, debug: bool, **remote: object) -> None:
    """hpcflow: preemption-safe 3D-parallel training on Slurm.

    Submit and follow jobs (submit, status, logs, cancel, list), rehearse them on a local
    emulated Slurm cluster (local-cluster), build AWS ParallelCluster configs (cluster), and
    set up and check cluster nodes (bootstrap, doctor, spot-watch), and plan a run's goodput,
    cost and parallel layout from measured costs (plan).

    From a laptop, --host HEAD runs submit, status, logs, cancel, report and list on the
    cluster's head node over SSH (docs/remote.md).
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
    ctx.obj["remote"] = remote
    check_remote_options(remote)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="hpcflow")


if __name__ == "__main__":  # pragma: no cover
    main()
