"""``hpcflow doctor``: check a node for training (GPUs, EFA, NCCL, Slurm, shared storage)."""

from __future__ import annotations

import sys

import click

from hpcflow.cli.output import emit_json, handles_errors

_STYLE = {"pass": ("PASS", "green"), "warn": ("WARN", "yellow"), "fail": ("FAIL", "red")}


@click.command("doctor")
@click.option("--instance-type", help="EC2 instance type of this node (default: the instance "
                                      "metadata service, or the bootstrap health settings).")
@click.option("--shared-dir", default="/fsx", show_default=True,
              help="Shared file system that must be mounted.")
@click.option("--checkpoint-dir", help="Directory checkpoints go to; must be writable "
                                       "(default: --shared-dir).")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@handles_errors
def doctor(instance_type: str | None, shared_dir: str, checkpoint_dir: str | None,
           as_json: bool) -> None:
    """Check this node: each line is PASS, WARN or FAIL, with the fix.

    Exit code 0 when nothing failed (warnings allowed), 1 when a check failed.
    """
    from hpcflow.doctor.checks import run_all
    from hpcflow.doctor.probe import Probe

    results = run_all(Probe(), instance=instance_type, shared_dir=shared_dir,
                      checkpoint_dir=checkpoint_dir)
    failed = sum(r.level == "fail" for r in results)
    if as_json:
        emit_json({"checks": [r.to_dict() for r in results], "failed": failed})
    else:
        color = sys.stdout.isatty()
        width = max(len(r.name) for r in results)
        for r in results:
            word, hue = _STYLE[r.level]
            tag = click.style(word, fg=hue, bold=True) if color else word
            click.echo(f"{tag}  {r.name:<{width}}  {r.message}")
            if r.fix:
                click.echo(f"      {'':<{width}}  fix: {r.fix}")
        counts = {lvl: sum(r.level == lvl for r in results) for lvl in ("pass", "warn", "fail")}
        click.echo(f"doctor: {counts['pass']} passed, {counts['warn']} warnings, "
                   f"{counts['fail']} failed")
    if failed:
        sys.exit(1)
