"""The researcher's verbs: ``hpcflow submit|status|logs|cancel|list``."""

from __future__ import annotations

import json
import sys

import click

from hpcflow.cli.output import (
    JsonCommand,
    check_job_id,
    emit_json,
    handles_errors,
    print_script,
    print_table,
)


def _fmt_elapsed(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _status_rows(statuses):  # noqa: ANN001, ANN202
    for st in statuses:
        state = st.state + ("" if st.finished else " (not finished)" if st.state in
                            ("REQUEUED", "PREEMPTED", "UNKNOWN") else "")
        yield (st.job_id, st.name, state, st.attempts, st.restarts, _fmt_elapsed(st.elapsed_s),
               "" if st.exit_code is None else st.exit_code, st.ending, st.reason)


COLUMNS = ["job", "name", "state", "attempts", "restarts", "elapsed", "exit", "ending", "reason"]


@click.command(cls=JsonCommand)
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a spec field, e.g. --set nodes=4 --set preemption.max_requeues=5.")
@click.option("--dry-run", is_flag=True, help="Print the rendered batch script; submit nothing.")
@click.option("--follow", "-f", is_flag=True,
              help="Follow the job's log until it finishes; exit 1 unless it COMPLETED.")
@click.option("--allow-shared-dir", is_flag=True,
              help="Accept a run_dir, checkpoint.dir or program.workdir that others own or can "
              "write (a shared project folder). Risk: whoever can write there can act as you "
              "(plant a checkpoint, a module, or the job's state; docs/job-spec.md).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@handles_errors
def submit(spec: str, overrides: tuple[str, ...], dry_run: bool, follow: bool,
           allow_shared_dir: bool, as_json: bool) -> None:
    """Render the batch script for SPEC (a job YAML) and submit it with sbatch; with
    platform: sagemaker, render the CreateTrainingJob request and create the training job.

    The spec, the script (or request) and the job id are kept in the job's run directory.
    """
    from hpcflow.jobs import service
    from hpcflow.spec.job import load_job_spec

    job = load_job_spec(spec, overrides)
    if job.platform == "sagemaker":
        _submit_sagemaker(job, dry_run=dry_run, follow=follow, allow_shared_dir=allow_shared_dir,
                          as_json=as_json)
        return
    result = service.submit(spec, overrides, dry_run=dry_run, allow_shared_dir=allow_shared_dir)
    for line in result.notes:
        click.echo(f"hpcflow: {line}", err=True)
    for line in result.warnings:
        click.echo(f"hpcflow: warning: {line}", err=True)
    if dry_run:
        if as_json:
            emit_json({"job_id": None, "run_dir": str(result.run_dir), "script": result.script,
                       "env": result.env, "warnings": list(result.warnings),
                       "notes": list(result.notes)})
        else:
            print_script(result.script)
        return
    if as_json:
        emit_json({"job_id": result.job_id, "run_dir": str(result.run_dir),
                   "script_path": str(result.script_path), "log": str(result.log_path),
                   "warnings": list(result.warnings), "notes": list(result.notes)})
    else:
        click.echo(f"submitted job {result.job_id}  run dir: {result.run_dir}")
        click.echo(f"log: {result.log_path}")
    if follow and result.job_id:
        _follow(result.job_id)


def _submit_sagemaker(job, *, dry_run: bool, follow: bool, allow_shared_dir: bool,  # noqa: ANN001
                      as_json: bool) -> None:
    from hpcflow.sagemaker import service as sagemaker

    if follow:
        raise click.UsageError("--follow follows Slurm jobs; a SageMaker training job's log is "
                               "in CloudWatch (leave --follow out)")
    result = sagemaker.submit(job, dry_run=dry_run, allow_shared_dir=allow_shared_dir)
    data = {"platform": "sagemaker", "job_name": result.job_name, "job_arn": result.job_arn,
            "run_dir": str(result.run_dir), "request": result.request, "env": result.env}
    if as_json:
        emit_json(data if dry_run else {**data, "request_path": str(result.request_path)})
    elif dry_run:
        click.echo(json.dumps(result.request, indent=2))
    else:
        click.echo(f"submitted SageMaker training job {result.job_name}  run dir: "
                   f"{result.run_dir}")
        click.echo(f"arn: {result.job_arn}")


@click.command(cls=JsonCommand)
@click.argument("job_id", required=False, callback=check_job_id)
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@handles_errors
def status(job_id: str | None, as_json: bool) -> None:
    """Show a job's state, attempts, restarts, elapsed time, how it ended and why (default: the
    newest job submitted with hpcflow). A requeued or preempted job is shown as not finished."""
    from hpcflow.jobs import service

    job_id = job_id or service.latest_job_id()
    if job_id is None:
        from hpcflow.jobs.records import index_problem

        if problem := index_problem():
            raise click.UsageError(f"no JOB_ID given, and {problem}; give the JOB_ID")
        raise click.UsageError("no JOB_ID given and no job was submitted with hpcflow yet")
    st = service.job_status(job_id)
    if st.ledger_skipped:
        click.echo(f"hpcflow: warning: skipped lines that do not decode: {st.ledger_skipped} "
                   "in the ledger", err=True)
    if as_json:
        emit_json(st.to_dict())
    else:
        print_table(None, COLUMNS, _status_rows([st]))
        if st.network:
            click.echo(f"network: {st.network}")
        if st.budgets:
            words = {"time_limit_requeues": "time-limit requeues", "preemptions": "preemptions",
                     "failures": "failures"}
            click.echo("left: " + ", ".join(f"{words.get(k, k)} {max(b - u, 0)} of {b}"
                                            for k, (u, b) in st.budgets.items()))


@click.command("list", cls=JsonCommand)
@click.option("--limit", default=20, show_default=True, type=click.IntRange(min=1),
              help="How many recent jobs to show.")
@click.option("--json", "as_json", is_flag=True, help="Print the jobs as JSON.")
@handles_errors
def list_jobs(limit: int, as_json: bool) -> None:
    """List the jobs you submitted with hpcflow, newest first."""
    from hpcflow.jobs import service
    from hpcflow.jobs.records import index_problem

    jobs = service.list_jobs(limit)
    if problem := index_problem():  # an empty list would read as "no job submitted yet"
        click.echo(f"hpcflow: warning: {problem}; no job is listed from it", err=True)
    if as_json:
        emit_json([st.to_dict() for st in jobs])
    else:
        print_table(None, COLUMNS, _status_rows(jobs))


@click.command()
@click.argument("job_id", callback=check_job_id)
@click.option("--follow", "-f", is_flag=True, help="Keep printing as the log grows, across "
              "requeues, until the job finishes; exit 1 unless it COMPLETED.")
@handles_errors
def logs(job_id: str, follow: bool) -> None:
    """Print a job's log (every attempt; a requeued job appends to the same file)."""
    from hpcflow.jobs import service

    if follow:
        _follow(job_id)
        return
    path, text, skipped = service.read_log(job_id)
    if skipped:
        click.echo(f"hpcflow: the first {skipped} bytes of {path} are left out; the last "
                   f"{service.LOG_TAIL_BYTES // (1024 * 1024)} MiB follow", err=True)
    click.echo(text, nl=False)


@click.command(cls=JsonCommand)
@click.argument("job_id", callback=check_job_id)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@handles_errors
def cancel(job_id: str, as_json: bool) -> None:
    """Cancel a job (scancel). A cancelled job is not requeued."""
    from hpcflow.jobs import service

    ended = service.cancel(job_id)
    if as_json:
        emit_json({"job_id": job_id, "cancelled": ended is None, "already_ended": ended})
    elif ended:
        click.echo(f"job {job_id} had already ended ({ended}): nothing to cancel")
    else:
        click.echo(f"cancelled job {job_id}")


def _follow(job_id: str) -> None:
    from hpcflow.jobs import service

    path = service.log_path(job_id)
    for chunk in service.follow_log(path, job_id):
        sys.stdout.write(chunk)
        sys.stdout.flush()
    st = service.job_status(job_id)
    if st.ending == "held":
        click.echo(f"hpcflow: job {job_id} is {st.reason}; not following a job that cannot run",
                   err=True)
        raise SystemExit(1)
    click.echo(f"hpcflow: job {job_id} {st.state} (exit {st.exit_code}, attempts {st.attempts})",
               err=True)
    if st.state != "COMPLETED":
        # `hpcflow submit job.yaml --follow && next-step` must not go on after a failed job.
        raise SystemExit(1)
