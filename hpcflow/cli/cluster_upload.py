"""``hpcflow cluster upload-bootstrap``: the node bootstrap scripts to S3, and the custom action
that runs them."""

from __future__ import annotations

import click

from hpcflow.cli.output import emit_json, handles_errors


@click.command("upload-bootstrap")
@click.option("--bucket", required=True, help="S3 bucket to put the scripts in (must exist).")
@click.option("--prefix", default="hpcflow", show_default=True, help="Key prefix in the bucket.")
@click.option("--steps", help="Steps the custom action runs (default: efa,nccl,nccl-tests,healthcheck).")
@click.option("--region", default="us-east-1", show_default=True, help="AWS region of the bucket.")
@click.option("--endpoint-url", help="S3 endpoint (e.g. a moto server).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@handles_errors
def upload_bootstrap(bucket: str, prefix: str, steps: str | None, region: str,
                     endpoint_url: str | None, as_json: bool) -> None:
    """Upload bootstrap/ to s3://BUCKET/PREFIX/ and print the cluster spec lines that use it."""
    from hpcflow.aws.s3_bootstrap import (
        DEFAULT_STEPS,
        check_target,
        make_s3_client,
    )
    from hpcflow.aws.s3_bootstrap import (
        upload_bootstrap as upload,
    )
    from hpcflow.remote.bootstrap import parse_steps
    from hpcflow.resources import data_dir

    check_target(bucket, prefix)
    step_text = ",".join(parse_steps(steps)) if steps else DEFAULT_STEPS
    result = upload(make_s3_client(region, endpoint_url), data_dir("bootstrap"), bucket, prefix,
                    step_text)
    if as_json:
        emit_json(result.to_dict())
        return
    for url in result.urls:
        click.echo(url)
    click.echo(f"\nuploaded {len(result.urls)} files; in your cluster spec:\n")
    click.echo(result.spec_snippet(), nl=False)
