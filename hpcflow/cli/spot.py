"""``hpcflow spot-watch``: the per-node daemon that turns an EC2 spot interruption notice into
hpcflow's preemption path (hpcflow.spot.watcher, docs/spot.md)."""

from __future__ import annotations

import os
import socket
import sys

import click

from hpcflow.cli.output import emit_json, handles_errors


def _check_job_ids(ctx: click.Context, param: click.Parameter,
                   values: tuple[str, ...]) -> tuple[str, ...]:
    from hpcflow.jobs import service

    for value in values:
        if problem := service.job_id_problem(value):
            raise click.BadParameter(problem)
    return values


@click.command("spot-watch")
@click.option("--endpoint", envvar="HPCFLOW_SPOT_ENDPOINT", default="http://169.254.169.254",
              show_default=True, show_envvar=True,
              help="Base URL of the instance metadata service.")
@click.option("--interval-s", envvar="HPCFLOW_SPOT_INTERVAL_S", default=5.0, show_default=True,
              show_envvar=True, type=click.FloatRange(0.2, 3600),
              help="Seconds between polls (AWS recommends 5).")
@click.option("--node", envvar="HPCFLOW_SPOT_NODE", show_envvar=True,
              help="This node's Slurm name, where it is not the host name [default: "
                   "SLURMD_NODENAME in a job step, else the short host name].")
@click.option("--timeout-s", default=2.0, show_default=True, type=click.FloatRange(0.1, 60),
              help="Timeout of each metadata request, in seconds.")
@click.option("--job", "only_jobs", multiple=True, metavar="JOBID", callback=_check_job_ids,
              help="Act only on this job, given as its SLURM_JOB_ID (repeatable) [default: every "
                   "hpcflow job on the node].")
@click.option("--once", is_flag=True,
              help="Poll once, print what was seen and done, and exit (1 line each; exit 7 when "
                   "the metadata service could not be asked, 4 when Slurm failed).")
@click.option("--json", "as_json", is_flag=True, help="With --once: print the result as JSON.")
@handles_errors
def spot_watch(endpoint: str, interval_s: float, node: str | None, timeout_s: float,
               only_jobs: tuple[str, ...], once: bool, as_json: bool) -> None:
    """Watch this node's instance metadata (IMDSv2) for a spot interruption notice.

    When one appears, every hpcflow job running on this node gets the notice's time as its
    deadline (the notice file in its run directory), a spot_notice ledger event, and its
    warning signal on the batch shell (scancel --signal=USR1 --batch), once per notice. A
    rebalance recommendation is logged as a warning. Errors are logged and polling goes on.
    Runs until TERM or INT (as a systemd unit: bootstrap step spot-watch).
    """
    import logging
    import signal
    import threading

    from hpcflow.aws.imds import ImdsClient
    from hpcflow.spot.watcher import SpotWatcher

    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s hpcflow-spot %(levelname)s: %(message)s")
    # In a job step (preemption.spot_watch) Slurm names the node (srun(1), SLURMD_NODENAME).
    node = node or os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".", 1)[0]
    watcher = SpotWatcher(ImdsClient(endpoint, timeout_s=timeout_s), node, only_jobs=only_jobs)
    if once:
        result = watcher.poll_once()
        if as_json:
            emit_json({"node": node,
                       "notice": None if result.notice is None else
                       {"action": result.notice.action, "time": result.notice.raw,
                        "time_s": result.notice.time_s},
                       "rebalance": result.rebalance,
                       "actions": [{"job_id": a.job_id, "signal": a.signal,
                                    "notice_file": str(a.notice_file)} for a in result.actions],
                       "errors": result.errors})
        else:
            click.echo(f"node {node}: " + ("no interruption notice" if result.notice is None else
                       f"interruption notice: {result.notice.action} at {result.notice.raw}"))
            if result.rebalance is not None:
                click.echo(f"rebalance recommendation: {result.rebalance}")
            for a in result.actions:
                click.echo(f"job {a.job_id}: sent {a.signal} to its batch shell, notice in "
                           f"{a.notice_file}")
        if result.error_codes:
            sys.exit(max(result.error_codes))
        return
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    watcher.run(interval_s, stop)
