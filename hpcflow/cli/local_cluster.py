"""``hpcflow local-cluster up|down|status``: the emulated multi-node Slurm cluster."""

from __future__ import annotations

import click

from hpcflow.cli.output import emit_json, handles_errors, print_table


def _config(nodes: int, controller_port: int, node_base_port: int):  # noqa: ANN202
    import socket

    from hpcflow.local_cluster.config import LocalClusterConfig

    try:
        return LocalClusterConfig(nodes=nodes, controller_port=controller_port,
                                  node_base_port=node_base_port, hostname=socket.gethostname())
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _options(func):  # noqa: ANN001, ANN202
    func = click.option("--node-base-port", default=6818, show_default=True,
                        help="First slurmd port; node i uses base + i - 1.")(func)
    func = click.option("--controller-port", default=6817, show_default=True,
                        help="slurmctld port on 127.0.0.1.")(func)
    func = click.option("--nodes", default=2, show_default=True,
                        help="Number of emulated nodes (one slurmd each).")(func)
    return func


@click.group("local-cluster")
def local_cluster() -> None:
    """An emulated multi-node Slurm cluster on this machine, for rehearsing a job's
    preemption path (and for hpcflow's tests). Needs root; installs slurm-wlm and munge with
    apt-get when they are missing."""


@local_cluster.command("up")
@_options
@click.option("--no-install", is_flag=True, help="Fail instead of installing missing packages.")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@handles_errors
def up_cmd(nodes: int, controller_port: int, node_base_port: int, no_install: bool,
           as_json: bool) -> None:
    """Start the cluster (idempotent: a healthy cluster is left as it is)."""
    from hpcflow.local_cluster import manager

    cfg = _config(nodes, controller_port, node_base_port)
    st = manager.up(cfg, log=_log, install=not no_install)
    _show(st, as_json)


@local_cluster.command("down")
@_options
@handles_errors
def down_cmd(nodes: int, controller_port: int, node_base_port: int) -> None:
    """Stop the daemons that `up` started (and nothing else)."""
    from hpcflow.local_cluster import manager

    stopped = manager.down(_config(nodes, controller_port, node_base_port))
    click.echo(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running")


@local_cluster.command("status")
@_options
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@handles_errors
def status_cmd(nodes: int, controller_port: int, node_base_port: int, as_json: bool) -> None:
    """Show the daemons and the nodes. Exit code 1 when the cluster is not healthy."""
    from hpcflow.local_cluster import manager

    st = manager.status(_config(nodes, controller_port, node_base_port))
    _show(st, as_json)
    if not st.running:
        raise SystemExit(1)


@local_cluster.command("rehearse")
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a spec field, as in `hpcflow submit --set`.")
@click.option("--preemptions", default=1, show_default=True, type=click.IntRange(0, 20),
              help="How many preemption warnings to send, one per attempt.")
@click.option("--preempt-after-s", default=20.0, show_default=True, type=click.FloatRange(0),
              help="Seconds each attempt trains (from its first hpcflow-step line, or from its "
              "start for a program that prints none) before its warning.")
@click.option("--notice-s", default=120.0, show_default=True, type=click.FloatRange(1),
              help="The warning says the nodes go away this many seconds later (an EC2 spot "
              "notice: 120 s); a program that does not join the protocol is stopped and "
              "requeued preemption.requeue_margin_s before then.")
@click.option("--timeout-s", default=1800.0, show_default=True, type=click.FloatRange(1),
              help="Give up after this many seconds.")
@click.option("--by", type=click.Choice(["signal", "slurm"]), default="signal", show_default=True,
              help="signal: send the warning as --signal=B: does, with a notice. slurm: Slurm's "
              "own preemption: the job runs in the preemptible partition and an urgent job "
              "takes its nodes (TERM, then GraceTime to checkpoint and requeue).")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@handles_errors
def rehearse_cmd(spec: str, overrides: tuple[str, ...], preemptions: int, preempt_after_s: float,
                 notice_s: float, timeout_s: float, by: str, as_json: bool) -> None:
    """Submit SPEC and preempt it: after --preempt-after-s of each attempt, send the spec's
    warning signal (USR1 unless preemption.signal says USR2) to the batch shell exactly as
    Slurm's --signal=B:USR1@<lead> would, watch the job checkpoint,
    requeue itself and resume (or, for a program that does not join hpcflow's protocol, get
    stopped before the deadline and requeued), and follow it to its end. Exit code 0 when it
    COMPLETED."""
    from hpcflow.local_cluster.rehearse import rehearse

    result = rehearse(spec, overrides, preemptions=preemptions, preempt_after_s=preempt_after_s,
                      notice_s=notice_s, timeout_s=timeout_s, by=by, log=_log)
    if as_json:
        emit_json({"job_id": result.job_id, "status": result.status.to_dict(),
                   "preemptions_sent": result.preemptions_sent, "requeues": result.requeues})
    if result.status.state != "COMPLETED":
        raise SystemExit(1)


def _log(message: str) -> None:
    click.echo(f"hpcflow: {message}", err=True)


def _show(st, as_json: bool) -> None:  # noqa: ANN001
    if as_json:
        emit_json(st.to_dict())
        return
    rows = [(n.name, n.state, n.reason) for n in st.nodes]
    print_table("local cluster: " + ("healthy" if st.running else "NOT healthy"),
                ["node", "state", "reason"], rows)
    for name, pid in sorted(st.daemons.items()):
        click.echo(f"  {name:<12} pid {pid}")
    for name in st.dead:
        click.echo(f"  {name:<12} not running (run: hpcflow local-cluster up)")
    if not st.daemons and not st.dead:
        click.echo("  no daemons: the local cluster is not started (run: hpcflow local-cluster up)")
    click.echo(f"  slurm.conf: {st.slurm_conf}   logs: {st.log_dir}")
