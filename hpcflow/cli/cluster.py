"""``hpcflow cluster render|validate|import|instances|cost``: AWS ParallelCluster v3 configs from a
short cluster spec, checked by hpcflow's rules and the installed ParallelCluster schema.

``upload-bootstrap`` lives in cluster_upload.py (it talks to S3, not to the schema)."""

from __future__ import annotations

import click

from hpcflow.cli.output import JsonCommand, emit_json, handles_errors, print_table

# Ten years: beyond it an hourly on-demand estimate means nothing, and far beyond it the
# arithmetic overflows to inf and nan.
MAX_HOURS = 87_600

_JSON = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")


@click.group("cluster")
def cluster() -> None:
    """Build and check AWS ParallelCluster v3 configs for training clusters."""


def _cluster_name(value: str) -> str:
    """click callback: the cluster spec's name rule, before anything is loaded (exit 2)."""
    from hpcflow.spec.cluster_types import cluster_name_problem
    from hpcflow.spec.messages import short_value

    if (problem := cluster_name_problem(value)) is not None:
        raise click.BadParameter(f"{short_value(value)}: {problem}")
    return value


def _endpoint_url(value: str | None) -> str | None:
    """click callback: an ``http://`` or ``https://`` URL with a host (what botocore accepts as
    ``endpoint_url``), refused before any AWS client is built (exit 2)."""
    from urllib.parse import urlsplit

    from hpcflow.spec.messages import short_value

    if value is None:
        return None
    try:
        parts = urlsplit(value)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname) and value.isprintable()
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        ok = False
    if not ok:
        raise click.BadParameter(f"{short_value(value)}: not an http:// or https:// URL with a "
                                 "host; expected e.g. http://127.0.0.1:5000")
    return value


def _print_findings(findings, err: bool = True) -> None:  # noqa: ANN001
    for f in findings:
        click.echo(str(f), err=err)


@cluster.command("render")
@click.argument("spec")
@click.option("-o", "--output",
              help="Write the ParallelCluster YAML here (default: print it).")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a spec field, e.g. --set slurm.scaledown_idletime_min=5 "
                   "(repeatable; dotted keys walk into mappings, lists are replaced whole).")
@_JSON
@handles_errors
def render_cmd(spec: str, output: str | None, overrides: tuple[str, ...], as_json: bool) -> None:
    """Render SPEC to a ParallelCluster config; nothing is written unless every check passes."""
    from hpcflow.pcluster.render import render_file

    result, text = render_file(spec, output, overrides)
    notes = [f for f in result.findings if f.level != "error"]
    if as_json:
        emit_json({"output": output, "config": result.config,
                   "findings": [f.to_dict() for f in notes],
                   "schema": _schema_version()})
        return
    _print_findings(notes)
    if output:
        click.echo(f"wrote {output} (checked by the aws-parallelcluster "
                   f"{_schema_version()} schema)", err=True)
    else:
        click.echo(text, nl=False)


@cluster.command("validate", cls=JsonCommand)
@click.argument("config")
@click.option("--deep", is_flag=True,
              help="Also run ParallelCluster's validators, which call AWS with your credentials.")
@click.option("--endpoint-url", callback=lambda ctx, param, value: _endpoint_url(value),
              help="AWS endpoint for --deep (e.g. a moto server).")
@click.option("--cluster-name", default="hpcflow", show_default=True,
              callback=lambda ctx, param, value: _cluster_name(value),
              help="Cluster name the schema checks against.")
@_JSON
@handles_errors
def validate_cmd(config: str, deep: bool, endpoint_url: str | None, cluster_name: str,
                 as_json: bool) -> None:
    """Check a ParallelCluster YAML file with hpcflow's rules and the real schema."""
    from hpcflow.errors import SpecError
    from hpcflow.pcluster.render import validate_file

    result = validate_file(config, deep=deep, endpoint_url=endpoint_url,
                           cluster_name=cluster_name)
    data = {"file": config, "deep": deep, "schema": _schema_version(),
            "findings": [f.to_dict() for f in result.findings]}
    if result.errors:
        lines = [f"{config}: {f.path}: {f.message}" for f in result.errors]
        if not as_json:
            _print_findings([f for f in result.findings if f.level != "error"])
        err = SpecError(f"{config}: {len(lines)} problem(s)\n  " + "\n  ".join(lines), lines)
        err.data = data  # the JSON envelope keeps every finding, warnings included
        raise err
    if as_json:
        emit_json(data)
        return
    _print_findings(result.findings)
    how = " and ParallelCluster's validators" if deep else ""
    click.echo(f"{config}: valid (hpcflow rules, aws-parallelcluster {_schema_version()} "
               f"schema{how})")


@cluster.command("import")
@click.argument("config")
@click.option("-o", "--output", help="Write the cluster spec here (default: print it).")
@click.option("--name", help="Cluster name to record in the spec.")
@click.option("--region", help="Region for a config without Region: (else AWS_DEFAULT_REGION, "
                               "AWS_REGION, then the AWS config file, as pcluster does).")
@_JSON
@handles_errors
def import_cmd(config: str, output: str | None, name: str | None, region: str | None,
               as_json: bool) -> None:
    """Turn a ParallelCluster CONFIG into the shortest cluster spec that renders it back."""
    from hpcflow.pcluster.importer import import_file

    data, text, found = import_file(config, output, name, region=region)
    if as_json:
        emit_json({"output": output, "spec": data,
                   "region": {"region": found.region, "source": found.source}})
        return
    if found.source != "the config's Region":
        click.echo(f"region: {found.region} (from {found.source}; the config has no Region:)",
                   err=True)
    if output:
        raw = " (keys without a spec field are in its pcluster: block)" if "pcluster" in data \
            else ""
        click.echo(f"wrote {output}: `hpcflow cluster render {output}` gives back "
                   f"{config}{raw}", err=True)
    else:
        click.echo(text, nl=False)


@cluster.command("instances")
@click.option("--family", help="Only this family, e.g. p5, g6e, trn1.")
@click.option("--refresh", is_flag=True,
              help="Ask EC2 DescribeInstanceTypes now and update the on-disk cache.")
@click.option("--region", default="us-east-1", show_default=True, help="Region for --refresh.")
@click.option("--endpoint-url", callback=lambda ctx, param, value: _endpoint_url(value),
              help="EC2 endpoint for --refresh (e.g. a moto server).")
@_JSON
@handles_errors
def instances_cmd(family: str | None, refresh: bool, region: str, endpoint_url: str | None,
                  as_json: bool) -> None:
    """Instance facts for training families: GPUs, memory, EFA, network cards."""
    from hpcflow.pcluster.facts import list_instances

    rows, where = list_instances(family, refresh=refresh, region=region,
                                 endpoint_url=endpoint_url)
    if as_json:
        emit_json({"source": where, "instances": [r.to_dict() for r in rows],
                   "sources": _sources_legend(rows)})
        return
    _table(f"Instance facts ({where})",
                ["type", "vCPU", "GiB", "accel", "n", "acc GiB", "EFA", "cards", "EFA if"],
                [(r.instance_type, r.vcpus, r.memory_mib // 1024, r.accelerator or "-",
                  r.accelerator_count, round(r.accelerator_memory_mib / 1024, 1),
                  "yes" if r.efa_supported else "no", r.max_network_cards, r.max_efa_interfaces)
                 for r in rows])
    for key, text in _sources_legend(rows).items():
        click.echo(f"source {key}: {text}")


def _sources_legend(rows) -> dict[str, str]:  # noqa: ANN001
    from hpcflow.pcluster.catalog import SOURCES

    legend: dict[str, str] = {}
    for r in rows:
        for key in (r.source, *r.figure_sources.values()):
            legend.setdefault(key, SOURCES.get(key, "EC2 DescribeInstanceTypes (live answer)"))
    for r in rows:
        for fig, key in r.figure_sources.items():
            legend[f"{r.instance_type} {fig}"] = key
    return legend


@cluster.command("cost")
@click.argument("spec")
@click.option("--hours", "hours_text", required=True, metavar="H",
              help="Hours the cluster runs (a number above 0).")
@click.option("--price-source", type=click.Choice(["auto", "api", "table"]), default="auto",
              show_default=True,
              help="AWS Price List API, the shipped dated table, or the API then the table.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a spec field (repeatable).")
@_JSON
@handles_errors
def cost_cmd(spec: str, hours_text: str, price_source: str, overrides: tuple[str, ...],
             as_json: bool) -> None:
    """Estimate what SPEC costs over --hours: floor (static nodes) to ceiling (all nodes)."""
    from hpcflow.aws.pricing import lookup_prices
    from hpcflow.errors import SpecError
    from hpcflow.pcluster.cost import estimate_cost, instance_types_of
    from hpcflow.spec.cluster_loading import load_cluster_spec

    try:
        hours = float(hours_text)
    except ValueError:
        hours = float("nan")
    if not 0 < hours <= MAX_HOURS:
        raise SpecError(f"--hours: {hours_text!r} is not allowed; give a number of hours above "
                        f"0 and at most {MAX_HOURS:,} (ten years), e.g. --hours 72")
    cs = load_cluster_spec(spec, list(overrides))
    prices, notes = lookup_prices(instance_types_of(cs), cs.region, price_source)
    est = estimate_cost(cs, hours, prices, notes)
    if as_json:
        emit_json(est.to_dict())
        return
    labels: dict[str, str] = {}
    for ln in est.lines:
        labels.setdefault(ln.source, f"[{len(labels) + 1}]")
    _table(f"Estimated cost over {hours:g} h (USD)",
                ["what", "type", "capacity", "nodes", "$/node-h", "min", "max", "src"],
                [(ln.what, ln.instance_type, ln.capacity_type, f"{ln.nodes_min}-{ln.nodes_max}",
                  _rate(ln.usd_per_node_hour, ln.spot_usd_per_node_hour), _money(ln.usd_min),
                  _money(ln.usd_max, ln.spot_usd_max), labels[ln.source]) for ln in est.lines])
    left_out = f" (not counting {', '.join(est.not_counted)})" if est.not_counted else ""
    if len(est.not_counted) == len(est.lines):  # no line priced: a sum of 0.00 would mislead
        click.echo("total: not estimated: no line has a known price (see src)")
    else:
        click.echo(f"total: {_money(est.total_min)} to {_money(est.total_max)} USD{left_out}")
    for text, label in labels.items():
        click.echo(f"{label} {text}")
    for note in est.notes:
        click.echo(f"note: {note}")


def _table(title: str, columns: list[str], rows: list[tuple]) -> None:
    """A table whose first two columns (names) never wrap or get cut."""
    print_table(title, columns, rows, no_wrap=2, pipe_width=140)


def _rate(value: float | None, spot: tuple[float, float] | None = None) -> str:
    if spot:
        return f"{spot[0]:.4f}-{spot[1]:.4f}"
    return "-" if value is None else f"{value:.4f}"


def _money(value: float | None, spot: tuple[float, float] | None = None) -> str:
    if spot:
        return f"{spot[0]:,.2f}-{spot[1]:,.2f}"
    return "-" if value is None else f"{value:,.2f}"


def _schema_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("aws-parallelcluster")
    except PackageNotFoundError:
        return "?"


# Defined in its own module (it talks to S3, not to ParallelCluster's schema).
from hpcflow.cli.cluster_upload import upload_bootstrap  # noqa: E402

cluster.add_command(upload_bootstrap)

from hpcflow.cli.cluster_hyperpod import hyperpod  # noqa: E402

cluster.add_command(hyperpod)
