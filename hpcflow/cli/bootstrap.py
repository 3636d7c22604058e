"""``hpcflow bootstrap``: run the node bootstrap scripts on many hosts over SSH, in parallel."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import click

from hpcflow.cli.output import emit_json, handles_errors


@click.command("bootstrap")
@click.option("--hosts", required=True, metavar="H1,H2,...",
              help="Hosts as [user@]host[:port], comma-separated; Slurm hostlists expand "
                   "(node[1-4]).")
@click.option("--steps", metavar="LIST",
              help="Steps to run, from efa,nccl,nccl-tests,enroot-pyxis,spot-watch,healthcheck "
                   "(default: all but enroot-pyxis and spot-watch).")
@click.option("--dry-run", is_flag=True, help="Each host prints what it would do; nothing changes.")
@click.option("--user", help="SSH user (default: your ~/.ssh/config or local user name).")
@click.option("--identity", type=click.Path(dir_okay=False), help="SSH private key file.")
@click.option("--port", default=22, show_default=True, help="SSH port for hosts without :port.")
@click.option("--known-hosts", type=click.Path(dir_okay=False),
              help="known_hosts file to check host keys against, only read (default: "
                   "~/.ssh/known_hosts).")
@click.option("--accept-new-host-keys", is_flag=True,
              help="Trust hosts missing from known_hosts on first use, saving their keys in "
                   "hpcflow's own known_hosts (a changed key is always refused).")
@click.option("--parallel", default=16, show_default=True, help="Hosts at a time.")
@click.option("--prefix", help="Install under this root on each host (default: /).")
@click.option("--instance-type", help="Instance type for the health check (default: instance "
                                      "metadata at check time).")
@click.option("--env", "env_items", multiple=True, metavar="HPCFLOW_NAME=VALUE",
              help="A setting for the steps on every host, e.g. HPCFLOW_ENROOT_SHA256=<sha256> "
                   "or HPCFLOW_NVCC_GENCODE=...; repeatable.")
@click.option("--log-dir", type=click.Path(file_okay=False),
              help="Write each host's full output to DIR/<host>.log.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@handles_errors
def bootstrap(hosts: str, steps: str | None, dry_run: bool, user: str | None,
              identity: str | None, port: int, known_hosts: str | None,
              accept_new_host_keys: bool, parallel: int, prefix: str | None,
              instance_type: str | None, env_items: tuple[str, ...], log_dir: str | None,
              as_json: bool) -> None:
    """Bootstrap nodes over SSH: EFA, NCCL, nccl-tests, enroot/pyxis, the health check.

    Runs bootstrap/hpcflow-bootstrap.sh on every host (as root, through sudo -n for other
    users), shows progress, then a table per host. Exit code 1 when any host failed; its log
    tail is printed.
    """
    from hpcflow.errors import SpecError
    from hpcflow.remote.bootstrap import bootstrap_hosts, parse_hosts, parse_steps
    from hpcflow.resources import data_dir

    targets = parse_hosts(hosts, default_port=port, default_user=user)
    step_list = parse_steps(steps)
    if parallel < 1:
        raise SpecError(f"--parallel: {parallel} is not allowed; give 1 or more")
    extra = (["--dry-run"] if dry_run else []) + (["--prefix", prefix] if prefix else [])
    extra += ["--instance-type", instance_type] if instance_type else []
    for item in env_items:
        if not re.fullmatch(r"HPCFLOW_[A-Z0-9_]+=.*", item, re.S) or "\n" in item:
            raise SpecError(f"--env: {item!r} is not allowed; give HPCFLOW_NAME=VALUE "
                            "(one line; only hpcflow's own settings reach the steps)")
        extra += ["--env", item]
    kwargs = dict(identity=identity, known_hosts=known_hosts,
                  accept_new_host_keys=accept_new_host_keys)
    root = data_dir("bootstrap")
    if as_json:
        results = bootstrap_hosts(targets, step_list, extra, root=root, parallel=parallel, **kwargs)
    else:
        results = _with_progress(targets, step_list, extra, root, parallel, kwargs)
    if log_dir:
        _write_logs(Path(log_dir), results)
    failed = [r for r in results if not r.ok]
    if as_json:
        emit_json({"hosts": [r.to_dict() for r in results], "failed": len(failed)})
    else:
        _report(results, failed)
    if failed:
        sys.exit(1)


def _with_progress(targets, steps, extra, root, parallel, kwargs):  # noqa: ANN001, ANN202
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from hpcflow.remote.bootstrap import bootstrap_hosts

    with Progress(TextColumn("bootstrap"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.description}"), TimeElapsedColumn(),
                  transient=True) as progress:
        task = progress.add_task("", total=len(targets))

        def done(result):  # noqa: ANN001, ANN202
            mark = "ok" if result.ok else "FAILED"
            progress.update(task, advance=1, description=f"{result.host} {mark}")

        return bootstrap_hosts(targets, steps, extra, root=root, parallel=parallel,
                               on_done=done, **kwargs)


def _report(results, failed) -> None:  # noqa: ANN001
    from hpcflow.cli.output import print_table

    print_table("hpcflow bootstrap", ["host", "result", "exit", "time s", "summary"],
                [(r.host, "ok" if r.ok else "FAILED", "-" if r.exit_code is None else r.exit_code,
                  f"{r.duration_s:.1f}", r.summary) for r in results])
    for r in failed:
        if r.output:
            click.echo(f"--- {r.host}: last lines of its log ---", err=True)
            for line in r.tail():
                click.echo(f"  {line}", err=True)
    click.echo(f"{len(results) - len(failed)} of {len(results)} hosts succeeded",
               err=bool(failed))


def _write_logs(log_dir: Path, results) -> None:  # noqa: ANN001
    log_dir.mkdir(parents=True, exist_ok=True)
    for r in results:
        (log_dir / f"{r.host.replace('/', '_')}.log").write_text(r.output or r.summary + "\n")
