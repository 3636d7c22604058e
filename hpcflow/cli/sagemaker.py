"""``hpcflow sagemaker status|logs|report``: a SageMaker training job's state (DescribeTrainingJob),
its CloudWatch Logs, and its goodput."""

from __future__ import annotations

import re

import click

from hpcflow.cli.output import JsonCommand, emit_json, handles_errors, print_table, warn_read


def is_training_job_name(value: str) -> bool:
    """``value`` can be a ``TrainingJobName``: botocore's pattern and length bound."""
    from hpcflow.spec.job_sagemaker import TRAINING_JOB_NAME_MAX, TRAINING_JOB_NAME_RE

    return len(value) <= TRAINING_JOB_NAME_MAX and bool(TRAINING_JOB_NAME_RE.fullmatch(value))


def _check_name(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """click callback: refuse what cannot be a TrainingJobName before SageMaker is asked."""
    if not is_training_job_name(value):
        raise click.BadParameter(f"{value!r} is not a SageMaker training job name (1-63 letters, "
                                 "digits and hyphens; `hpcflow submit` prints it)")
    return value


#: The top-level commands that read Slurm jobs and have a SageMaker counterpart.
POINTED = ("status", "logs", "report")


def pointer(command: str | None, value: str) -> str:
    """What to add to the top-level ``hpcflow status|logs|report`` refusal of ``value`` (not a
    Slurm job id) when it can be a SageMaker training job's name: the command that reads it.
    Those commands read Slurm jobs from their run directories; a training job lives in
    SageMaker and its logs in CloudWatch, read by ``hpcflow sagemaker ...`` with AWS
    credentials."""
    if command not in POINTED or not is_training_job_name(value):
        return ""
    return (f"; a SageMaker training job (`hpcflow submit` of a spec with platform: sagemaker) "
            f"is read by `hpcflow sagemaker {command} {value}`")


def _check_host(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """click callback: a host is SageMaker's ``algo-N``."""
    if value is not None and not re.fullmatch(r"algo-[1-9][0-9]{0,5}", value):
        raise click.BadParameter(f"{value!r} is not a SageMaker host name (algo-1, algo-2, ...)")
    return value


@click.group("sagemaker")
def sagemaker() -> None:
    """SageMaker training jobs submitted with `hpcflow submit` (platform: sagemaker)."""


@sagemaker.command("status", cls=JsonCommand)
@click.argument("name", callback=_check_name)
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@handles_errors
def status(name: str, as_json: bool) -> None:
    """Show a training job's status and secondary status, its spot interruptions, the training
    and billable seconds (the managed spot saving) and why it ended."""
    from hpcflow.sagemaker.service import describe
    from hpcflow.sagemaker.status import status_from_describe

    st = status_from_describe(describe(name))
    if as_json:
        emit_json(st.to_dict())
        return
    saving = "-" if st.spot_saving is None else f"{100 * st.spot_saving:.1f}%"
    print_table(None, ["job", "status", "secondary", "interruptions", "training s", "billable s",
                       "spot saving", "reason"],
                [(st.job_name, st.status, st.secondary, st.interruptions,
                  "-" if st.training_s is None else st.training_s,
                  "-" if st.billable_s is None else st.billable_s, saving, st.reason)], no_wrap=1)


@sagemaker.command("logs")
@click.argument("name", callback=_check_name)
@click.option("--follow", "-f", is_flag=True, help="Keep printing as the streams grow, across "
              "restarts, until the job reaches a final status; exit 1 unless it Completed.")
@click.option("--host", metavar="algo-N", callback=_check_host,
              help="Only this instance's streams (algo-1 holds rank 0's lines).")
@handles_errors
def logs(name: str, follow: bool, host: str | None) -> None:
    """Print a training job's CloudWatch Logs (log group /aws/sagemaker/TrainingJobs, one
    stream per instance and container start), every instance's lines merged in time order,
    each after its instance's name (algo-1, algo-2, ...)."""
    from hpcflow.sagemaker import logs as cw
    from hpcflow.sagemaker.record import FINAL, decode_describe
    from hpcflow.sagemaker.service import describe, make_client

    reader = cw.JobLogs(cw.make_logs_client(), name, host=host)
    if not follow:
        _print_lines(reader.read())
    else:
        client = make_client()
        last = {"status": ""}

        def job_status() -> str:
            last["status"] = decode_describe(describe(name, client=client)).status
            return last["status"]

        for line in cw.follow(reader, job_status, final=FINAL):
            _print_lines([line])
    if reader.skipped:
        click.echo(f"hpcflow: warning: {reader.skipped} log streams, events or pages that do "
                   "not decode were skipped", err=True)
    if reader.truncated:
        click.echo(f"hpcflow: warning: reading stopped at its bound ({cw.MAX_BYTES // 2**20} "
                   "MiB); later lines are not shown", err=True)
    if follow and last["status"] != "Completed":
        click.echo(f"hpcflow: training job {name} ended {last['status'] or 'unknown'}", err=True)
        raise SystemExit(1)


def _print_lines(lines) -> None:  # noqa: ANN001
    """Each event's lines after its host; on a terminal, control characters other than tab
    are shown as \\xNN, so a log cannot redraw the screen."""
    import re
    import sys

    escape = sys.stdout.isatty()
    for line in lines:
        text = line.message.rstrip("\n")
        if escape:
            text = re.sub(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", lambda m: f"\\x{ord(m.group()):02x}",
                          text)
        for part in text.split("\n"):
            click.echo(f"{line.host} {part}")


@sagemaker.command("report", cls=JsonCommand)
@click.argument("name", callback=_check_name)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@handles_errors
def report(name: str, as_json: bool) -> None:
    """Goodput of a training job, with the same ledger as `hpcflow report` for a Slurm job:
    per attempt (each Training period; spot interruptions end one) the pending, startup,
    training, checkpointing and lost seconds, the steps that stayed useful and those redone;
    the interruptions and restarts; SageMaker's training and billable seconds (the managed spot
    saving); and the useful GPU-hours against those trained and billed. From
    DescribeTrainingJob and rank 0's lines in the job's CloudWatch Logs."""
    from hpcflow.sagemaker.report_load import load_report

    rep = load_report(name)
    warn_read(rep.notes, rep.skipped, "values")
    if as_json:
        emit_json(rep.to_dict())
        return
    goodput = "n/a" if rep.goodput is None else f"{100 * rep.goodput:.1f}%"
    t = rep.totals
    rows = [(a.attempt, a.start or "-", f"{a.pending_s:.0f}", f"{a.startup_s:.0f}",
             f"{a.training_s:.0f}", f"{a.checkpointing_s:.1f}", f"{a.lost_s:.1f}",
             "-" if a.first_step is None else f"{a.first_step}-{a.last_step}", a.useful_steps,
             a.lost_steps, a.ended_by) for a in rep.attempts]
    rows.append(("total", "", f"{t['pending']:.0f}", f"{t['startup']:.0f}",
                 f"{t['training']:.0f}", f"{t['checkpointing']:.1f}", f"{t['lost']:.1f}", "",
                 rep.useful_steps, rep.lost_steps, ""))
    print_table(f"training job {name}: goodput {goodput} of {rep.wall_s:.0f} s wall",
                ["attempt", "start (UTC)", "pending s", "startup s", "training s", "ckpt s",
                 "lost s", "steps", "useful steps", "redone steps", "ended by"], rows)
    for line in report_lines(rep):
        click.echo(line)


def report_lines(rep) -> list[str]:  # noqa: ANN001
    """The report's lines under its table: the job's state, SageMaker's seconds, the hours."""
    def num(v: float | int | None, unit: str = "") -> str:
        return "-" if v is None else f"{v:g}{unit}"

    state = f"status {rep.status or '-'} ({rep.secondary or '-'})"
    if rep.max_wait_exceeded:
        state += ", MaxWaitTimeInSeconds exceeded"
    out = [f"{state}; interruptions {rep.interruptions}, restarts {rep.restarts}"
           + (f"; {rep.reason}" if rep.reason else "")]
    saving = "" if rep.spot_saving is None else f", managed spot saving {100 * rep.spot_saving:.1f}%"
    out.append(f"SageMaker seconds per instance: training {num(rep.training_time_s)}, billable "
               f"{num(rep.billable_s)}{saving}")
    h = rep.hours
    kind = (f"{rep.instance_type or '?'} x {num(rep.instance_count)}")
    out.append(f"instance-hours ({kind}): useful {num(h['useful_instance'])}, training "
               f"{num(h['training_instance'])}, billed {num(h['billed_instance'])}")
    if h["useful_gpu"] is not None:
        out.append(f"GPU-hours ({rep.gpus_per_instance} per instance): useful "
                   f"{num(h['useful_gpu'])}, training {num(h['training_gpu'])}, billed "
                   f"{num(h['billed_gpu'])}")
    if rep.billed_per_useful is not None:
        out.append(f"billed per useful hour: {rep.billed_per_useful:g}")
    return out
