"""``hpcflow cluster hyperpod create|describe``: a cluster spec's SageMaker HyperPod (Slurm)
request and lifecycle bundle; the logic is in :mod:`hpcflow.hyperpod.service`."""

from __future__ import annotations

import json

import click

from hpcflow.cli.output import JsonCommand, emit_json, handles_errors

_JSON = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")


def _endpoint(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    from hpcflow.cli.cluster import _endpoint_url

    return _endpoint_url(value)


_ENDPOINT = click.option("--endpoint-url", callback=_endpoint,
                         help="AWS endpoint for S3 and SageMaker (e.g. a moto server).")


@click.group("hyperpod")
def hyperpod() -> None:
    """SageMaker HyperPod (Slurm) clusters from the same cluster spec (its hyperpod: block)."""


@hyperpod.command("create", cls=JsonCommand)
@click.argument("spec")
@click.option("--dry-run", is_flag=True,
              help="Check and print the CreateCluster request; upload and create nothing.")
@click.option("--bundle-dir", metavar="DIR",
              help="Also write the lifecycle-script bundle to this local folder.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a spec field (repeatable).")
@_ENDPOINT
@_JSON
@handles_errors
def create_cmd(spec: str, dry_run: bool, bundle_dir: str | None, overrides: tuple[str, ...],
               endpoint_url: str | None, as_json: bool) -> None:
    """Upload SPEC's lifecycle bundle to S3 and create the HyperPod cluster (or, with
    --dry-run, print the checked request)."""
    from hpcflow.hyperpod import service

    checked = service.check_file(spec, overrides)
    if bundle_dir:
        service.write_files(checked, bundle_dir)
    data = checked.to_dict()
    if not dry_run:
        s3, sagemaker = service.make_clients(checked.spec.region, endpoint_url)
        data.update(service.create(checked, s3, sagemaker))
    if as_json:
        emit_json(data)
        return
    for f in checked.findings:
        click.echo(str(f), err=True)
    if dry_run:
        click.echo(json.dumps(checked.request, indent=2))
        return
    click.echo(f"uploaded {len(data['uploaded'])} files to {data['lifecycle_s3_uri']}")
    click.echo(f"created {data['cluster_arn']}")


@hyperpod.command("describe", cls=JsonCommand)
@click.argument("name")
@click.option("--region", default="us-east-1", show_default=True, help="AWS region.")
@_ENDPOINT
@_JSON
@handles_errors
def describe_cmd(name: str, region: str, endpoint_url: str | None, as_json: bool) -> None:
    """Show SageMaker's view of the HyperPod cluster NAME (DescribeCluster)."""
    from hpcflow.hyperpod import service

    _, sagemaker = service.make_clients(region, endpoint_url)
    answer = service.describe(sagemaker, name)
    if as_json:
        emit_json(answer)
        return
    click.echo(f"{answer.get('ClusterName')}: {answer.get('ClusterStatus')} "
               f"({answer.get('ClusterArn')})")
    for g in answer.get("InstanceGroups") or []:
        click.echo(f"  {g.get('InstanceGroupName')}: {g.get('InstanceType')} x "
                   f"{g.get('TargetCount', g.get('CurrentCount'))}")
