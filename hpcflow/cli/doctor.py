"""``hpcflow doctor``: check a node for training (GPUs, EFA, NCCL, Slurm, shared storage);
``hpcflow doctor nccl``: run nccl-tests across nodes and judge the bandwidth."""

from __future__ import annotations

import sys

import click

from hpcflow.cli.output import emit_json, handles_errors

_STYLE = {"pass": ("PASS", "green"), "warn": ("WARN", "yellow"), "fail": ("FAIL", "red")}


def _print_results(results) -> None:  # noqa: ANN001
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


@click.group("doctor", invoke_without_command=True)
@click.option("--instance-type", help="EC2 instance type of this node (default: the instance "
                                      "metadata service, or the bootstrap health settings).")
@click.option("--shared-dir", default="/fsx", show_default=True,
              help="Shared file system that must be mounted.")
@click.option("--checkpoint-dir", help="Directory checkpoints go to; must be writable "
                                       "(default: --shared-dir).")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.pass_context
@handles_errors
def doctor(ctx: click.Context, instance_type: str | None, shared_dir: str,
           checkpoint_dir: str | None, as_json: bool) -> None:
    """Check this node: each line is PASS, WARN or FAIL, with the fix.

    Exit code 0 when nothing failed (warnings allowed), 1 when a check failed.
    """
    if ctx.invoked_subcommand:
        return
    from hpcflow.doctor.checks import run_all
    from hpcflow.doctor.probe import Probe

    results = run_all(Probe(), instance=instance_type, shared_dir=shared_dir,
                      checkpoint_dir=checkpoint_dir)
    failed = sum(r.level == "fail" for r in results)
    if as_json:
        emit_json({"checks": [r.to_dict() for r in results], "failed": failed},
                  failure=("ChecksFailed", f"{failed} check(s) failed", 1) if failed else None)
    else:
        _print_results(results)
    if failed:
        sys.exit(1)


@doctor.command("nccl")
@click.option("--nodes", default=2, show_default=True, help="Nodes to run across (2 or more).")
@click.option("--instance-type", help="Instance type of the nodes: GPUs per node, the env preset "
                                      "and the expected bandwidth come from it.")
@click.option("--gpus-per-node", type=int, help="Ranks (GPUs) per node (default: from "
                                                "--instance-type).")
@click.option("--no-gpus", is_flag=True, help="Ask Slurm for no GPUs (a rehearsal on a cluster "
                                              "without them).")
@click.option("--partition", help="Slurm partition (default: the cluster's default).")
@click.option("--binary", default="/opt/hpcflow/nccl-tests/2.17.6/bin/all_reduce_perf",
              show_default=True, help="The nccl-tests program (bootstrap step nccl-tests).")
@click.option("--mpi", default="pmix", show_default=True,
              help="srun --mpi plugin nccl-tests was built for; 'none' to leave it out.")
@click.option("--max-bytes", default="8G", show_default=True, help="Largest message size.")
@click.option("--workdir", default="hpcflow-nccl-tests", show_default=True,
              type=click.Path(file_okay=False), help="Where the script and output go.")
@click.option("--timeout", "timeout_s", default=1800, show_default=True,
              help="Seconds to wait for the job, queue time included.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@handles_errors
def nccl_cmd(nodes: int, instance_type: str | None, gpus_per_node: int | None, no_gpus: bool,
             partition: str | None, binary: str, mpi: str, max_bytes: str, workdir: str,
             timeout_s: int, as_json: bool) -> None:
    """Run nccl-tests all_reduce_perf across nodes through sbatch and judge the result.

    Checks the run (no wrong values, no failure), the transport (OFI/EFA, not NET/Socket) and
    the peak bus bandwidth against the instance type's EFA line rate. Exit 1 on a failure.
    """
    from pathlib import Path

    from hpcflow.errors import SpecError
    from hpcflow.nccl.job import NcclJob, judge, run_nccl_job
    from hpcflow.nccl.presets import preset_env
    from hpcflow.pcluster.catalog import Catalog, instance_type_problem

    catalog = Catalog.offline()
    facts = catalog.get(instance_type) if instance_type else None
    if instance_type and facts is None:
        raise SpecError("--instance-type: " + instance_type_problem(
            instance_type, catalog, "the GPUs per node and the EFA line rate this check judges by",
            "leave --instance-type out and give --gpus-per-node to run without them"))
    per_node = gpus_per_node or (facts.accelerator_count if facts else None)
    if not per_node:
        raise SpecError("--gpus-per-node: not given and no --instance-type to take it from")
    env = tuple(preset_env(instance_type).env.items()) if instance_type else ()
    job = NcclJob(nodes=nodes, tasks_per_node=per_node, gpus_per_node=0 if no_gpus else per_node,
                  binary=binary, partition=partition, mpi=None if mpi == "none" else mpi,
                  max_bytes=max_bytes, env=env)
    job.check()
    job_id, text = run_nccl_job(job, Path(workdir).resolve(), timeout_s=timeout_s)
    result, checks = judge(text, instance_type)
    failed = sum(c.level == "fail" for c in checks)
    if as_json:
        emit_json({"job_id": job_id, "result": result.to_dict(),
                   "checks": [c.to_dict() for c in checks], "failed": failed},
                  failure=("ChecksFailed", f"{failed} check(s) failed", 1) if failed else None)
    else:
        click.echo(f"nccl-tests job {job_id}: output in {Path(workdir).resolve()}")
        _print_results(checks)
    if failed:
        sys.exit(1)
