"""``hpcflow sagemaker status``: a SageMaker training job's state, from DescribeTrainingJob."""

from __future__ import annotations

import click

from hpcflow.cli.output import JsonCommand, emit_json, handles_errors, print_table


def _check_name(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """click callback: refuse what cannot be a TrainingJobName before SageMaker is asked."""
    from hpcflow.spec.job_sagemaker import TRAINING_JOB_NAME_RE

    if not TRAINING_JOB_NAME_RE.fullmatch(value):
        raise click.BadParameter(f"{value!r} is not a SageMaker training job name (1-63 letters, "
                                 "digits and hyphens; `hpcflow submit` prints it)")
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
