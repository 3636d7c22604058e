"""``hpcflow plan goodput|layout``: decide before paying. ``goodput`` predicts a job's goodput,
lost GPU-hours, best checkpoint interval and bill from measured costs; ``layout``
(cli/plan_layout.py) lists the (dp, pp, tp) layouts that fit a model in GPU memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from hpcflow.cli.output import JsonCommand, emit_json, handles_errors, print_table
from hpcflow.cli.plan_args import MAX_HOURS, MAX_NODES, gpu_instance, known_region, number
from hpcflow.cli.plan_layout import layout

_COSTS = (("save_s", "--save-s", "blocking seconds of one checkpoint save"),
          ("restart_s", "--restart-s", "seconds from a failure to training again"),
          ("startup_s", "--startup-s", "seconds from the job's start to its first step"))


@click.group("plan")
def plan() -> None:
    """Plan before you pay: goodput and cost at scale from a small run's measured costs
    (goodput), and the parallel layouts that fit a model in GPU memory (layout)."""


plan.add_command(layout)


@plan.command("goodput", cls=JsonCommand)
@click.option("--nodes", "nodes_text", required=True, metavar="N", help="Nodes the job holds.")
@click.option("--instance", "instance_type", required=True, metavar="TYPE",
              help="EC2 instance type of the nodes, e.g. p5.48xlarge.")
@click.option("--hours", "hours_text", required=True, metavar="H",
              help="Hours the job holds the nodes.")
@click.option("--from-job", "job_id", metavar="JOBID",
              help="Take the save, restart and start-up costs (and a failure rate, if the job "
                   "had failures) from this job's ledger (`hpcflow report JOBID --json`).")
@click.option("--failure-rate", "rate_text", metavar="F",
              help="Unwarned failures per node-hour [default: Llama 3's, 1.58e-4].")
@click.option("--save-s", "save_text", metavar="S", help="Blocking seconds of one save.")
@click.option("--restart-s", "restart_text", metavar="S",
              help="Seconds from a failure to training again (requeue or in-job restart).")
@click.option("--startup-s", "startup_text", metavar="S",
              help="Seconds from the job's start to its first step.")
@click.option("--detection-s", "detection_text", metavar="S", default="0", show_default=True,
              help="Seconds from a failure to its detection (a hang timeout, say).")
@click.option("--interval-s", "interval_text", metavar="S",
              help="Training seconds between saves [default: the best interval].")
@click.option("--price-source", type=click.Choice(["auto", "api", "table"]), default="auto",
              show_default=True,
              help="AWS Price List API, the shipped dated tables, or the API then the tables "
                   "(EC2, SageMaker training and HyperPod prices alike).")
@click.option("--region", default="us-east-1", show_default=True, help="Region to price.")
@click.option("--runs", "runs_text", default="200", show_default=True, metavar="N",
              help="Simulated jobs (Monte-Carlo).")
@click.option("--seed", "seed_text", default="0", show_default=True, metavar="N",
              help="Seed of the simulation.")
@click.option("--svg", "svg_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write a plot of goodput against interval and node count here.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@handles_errors
def goodput(nodes_text: str, instance_type: str, hours_text: str, job_id: str | None,
            rate_text: str | None, save_text: str | None, restart_text: str | None,
            startup_text: str | None, detection_text: str, interval_text: str | None,
            price_source: str, region: str, runs_text: str, seed_text: str,
            svg_path: Path | None, as_json: bool) -> None:
    """Expected goodput of NODES x INSTANCE for HOURS: lost GPU-hours split into checkpointing,
    lost work, restarts and start-ups, the best checkpoint interval, and the bill (on-demand and
    spot) with the cost of one useful GPU-hour. The closed form and a seeded simulation are
    shown side by side (docs/plan.md). The same run is priced on each platform: ParallelCluster
    on-demand and spot (EC2 prices), a SageMaker HyperPod cluster on-demand, and SageMaker
    training on-demand and managed spot (SageMaker's ml. prices)."""
    from hpcflow.errors import SpecError
    from hpcflow.fsutil import output_problem
    from hpcflow.plan.goodput import predict
    from hpcflow.plan.simulate import affordable_runs, simulate

    if svg_path is not None and (problem := output_problem(svg_path)):
        raise SpecError(f"--svg: {problem}")

    inputs, sources, doubts = _inputs(nodes_text, instance_type, hours_text, job_id, rate_text,
                              {"save_s": save_text, "restart_s": restart_text,
                               "startup_s": startup_text}, detection_text, interval_text, region)
    pred = predict(inputs)
    for note in doubts:  # figures of the --from-job job that cannot be right
        click.echo(f"hpcflow: warning: {note}", err=True)
    runs = number("--runs", runs_text, low=1, high=100_000, integer=True, example="200")
    seed = number("--seed", seed_text, low=0, high=2**32 - 1, integer=True, example="0")
    fit = affordable_runs(inputs, pred.interval_s, runs)
    sim = simulate(inputs, pred.interval_s, runs=fit, seed=seed) if fit else None
    if fit < runs:
        pred.notes.append(f"simulation: {fit} of {runs} runs (the rest would take too long: "
                          "too many failures or saves per job)")
    cost, price_notes, ec2_price = _cost(instance_type, region, price_source, inputs.nodes,
                                         inputs.hours, pred.gpu_hours["useful"])
    platforms, platform_notes = _platforms(instance_type, region, price_source, inputs,
                                           pred.gpu_hours["useful"], ec2_price)
    price_notes.extend(n for n in platform_notes if n not in price_notes)
    if svg_path is not None:
        _write_svg(svg_path, inputs, instance_type)
    if as_json:
        emit_json({"inputs": {**pred.to_dict()["inputs"], "instance_type": instance_type},
                   "sources": sources, "closed_form": pred.to_dict(),
                   "simulation": sim.to_dict() if sim else None,
                   "cost": cost.to_dict() if cost else None, "price_notes": price_notes,
                   "platforms": [row.to_dict() for row in platforms],
                   "svg": str(svg_path) if svg_path else None, "doubts": doubts})
        return
    _print(pred, sim, sources, cost, price_notes, instance_type, svg_path)
    _print_platforms(platforms, instance_type, region)


def _inputs(nodes_text: str, instance_type: str, hours_text: str, job_id: str | None,
            rate_text: str | None, given: dict[str, str | None], detection_text: str,
            interval_text: str | None, region: str) -> tuple[Any, dict[str, str], list[str]]:
    """The :class:`GoodputInputs`; per input, where it came from; and the doubts about the
    ``--from-job`` job's figures (its report's notes: goodput over 100%)."""
    from hpcflow.errors import SpecError
    from hpcflow.plan.goodput import FAILURE_RATE_SOURCE, GoodputInputs
    from hpcflow.protocol import DEFAULT_FAILURES_PER_NODE_HOUR

    known_region("--region", region)
    nodes = number("--nodes", nodes_text, low=1, high=MAX_NODES, integer=True, example="16")
    hours = number("--hours", hours_text, low=0, high=MAX_HOURS, low_open=True, example="720")
    gpus, _ = gpu_instance("--instance", instance_type, region)
    measured: dict[str, Any] = {}
    if job_id is not None:
        from hpcflow.jobs.measured import job_measured_costs
        from hpcflow.jobs.service import job_id_problem

        if problem := job_id_problem(job_id):
            raise SpecError(f"--from-job: {problem}")
        measured = job_measured_costs(job_id)
    values: dict[str, float] = {}
    sources: dict[str, str] = {}
    doubts = [f"job {job_id}: {note}; the costs measured in it may be as wrong"
              for note in measured.get("notes", [])]
    for key, option, what in _COSTS:
        if given[key] is not None:
            values[key] = number(option, given[key], low=0, high=MAX_HOURS * 3600, example="30")
            sources[key] = "given"
        elif measured.get(key) is not None:
            values[key], sources[key] = float(measured[key]), f"measured in job {job_id}"
        else:
            why = (f"job {job_id} did not measure it" if job_id else "no --from-job given")
            raise SpecError(f"{option}: no value ({why}); give {option} SECONDS, the {what}, "
                            "or --from-job JOBID of a job that measured it")
    if rate_text is not None:
        rate, sources["failures_per_node_hour"] = number(
            "--failure-rate", rate_text, low=0, high=1000, example="1.6e-4"), "given"
    elif measured.get("failures") and measured.get("failures_per_node_hour") is not None:
        rate = float(measured["failures_per_node_hour"])
        sources["failures_per_node_hour"] = (f"measured in job {job_id}: {measured['failures']} "
                                             f"failure(s) in {measured['node_hours']:.2f} "
                                             "node-hours")
    else:
        rate, sources["failures_per_node_hour"] = (DEFAULT_FAILURES_PER_NODE_HOUR,
                                                   f"default: {FAILURE_RATE_SOURCE}")
    detection = number("--detection-s", detection_text, low=0, high=MAX_HOURS * 3600,
                       example="60")
    interval = None if interval_text is None else number(
        "--interval-s", interval_text, low=0, high=MAX_HOURS * 3600, low_open=True,
        example="1800")
    inputs = GoodputInputs(nodes, gpus, hours, rate, values["save_s"], values["restart_s"],
                           values["startup_s"], detection, interval)
    if problems := inputs.problems():
        raise SpecError("; ".join(problems), problems)
    return inputs, sources, doubts


def _cost(instance_type: str, region: str, source: str, nodes: int, hours: float,
          useful_gpu_hours: float) -> tuple[Any, list[str], Any]:
    """The :class:`~hpcflow.plan.cost.PlanCost`, or None when no price is known; notes; and
    the EC2 price used (or None)."""
    from hpcflow.aws.pricing import lookup_prices
    from hpcflow.pcluster.cost import SPOT_HIGH_FRACTION, SPOT_LOW_FRACTION
    from hpcflow.plan.cost import plan_cost

    prices, notes = lookup_prices([instance_type], region, source)
    price = prices.get(instance_type)
    if price is None:
        notes.append(f"no price known for {instance_type} in {region}: not in the shipped table, "
                     "and the Price List API gave none")
        return None, notes, None
    notes.append("spot: from 10% of the on-demand price (AWS: 'up to 90% off') to the "
                 "on-demand price; spot capacity is not guaranteed")
    return plan_cost(nodes, hours, useful_gpu_hours, price.usd_per_hour,
                     (SPOT_LOW_FRACTION, SPOT_HIGH_FRACTION), price.source, price.caveat), notes, \
        price


def _platforms(instance_type: str, region: str, source: str, inputs: Any,
               useful_gpu_hours: float, ec2_price: Any) -> tuple[list[Any], list[str]]:
    """The run on ParallelCluster (EC2 prices), on a HyperPod cluster and as a SageMaker
    training job (SageMaker's prices), and notes on where SageMaker's prices came from."""
    from hpcflow.aws import sagemaker_pricing as sm
    from hpcflow.pcluster.cost import SPOT_HIGH_FRACTION, SPOT_LOW_FRACTION
    from hpcflow.plan.platforms import Rate, compare_platforms

    pc = None if ec2_price is None else Rate(ec2_price.usd_per_hour,
                                             (SPOT_LOW_FRACTION, SPOT_HIGH_FRACTION),
                                             ec2_price.source, ec2_price.caveat)
    prices, notes = sm.lookup_sagemaker_prices(instance_type, region, source)
    rates = {use: Rate(p.usd_per_hour, (sm.SPOT_LOW_FRACTION, sm.SPOT_HIGH_FRACTION)
                       if use == sm.TRAINING else None, p.source, p.caveat)
             for use, p in prices.items()}
    rows = compare_platforms(inputs.nodes, inputs.hours, useful_gpu_hours, parallelcluster=pc,
                             sagemaker=rates.get(sm.TRAINING), hyperpod=rates.get(sm.HYPERPOD))
    return rows, notes


def _print_platforms(rows: list[Any], instance_type: str, region: str) -> None:
    from hpcflow.plan.platforms import HYPERPOD_NOTE, PLATFORMS

    def span(low: float, high: float) -> str:
        return f"{low:,.2f}" if low == high else f"{low:,.2f}-{high:,.2f}"

    if not rows:
        return
    print_table(f"the same run on each platform ({instance_type}, {region})",
                ["platform", "USD", "USD per useful GPU-h", "USD per node-h"],
                [(row.platform, span(*row.usd),
                  "-" if row.usd_per_useful_gpu_hour is None else span(*row.usd_per_useful_gpu_hour),
                  span(*row.usd_per_node_hour)) for row in rows], no_wrap=1)
    known = {row.platform for row in rows}
    for name in PLATFORMS:
        if name not in known:
            click.echo(f"note: {name}: no price known for {instance_type} in {region}")
    sources = dict.fromkeys(row.source for row in rows)
    for source in sources:
        click.echo(f"price source: {source}")
    for row in rows:
        if row.caveat and row.platform.endswith("-on-demand"):
            click.echo(f"note: {row.platform.removesuffix('-on-demand')}: {row.caveat}")
    if "hyperpod-on-demand" in known:
        click.echo(f"note: {HYPERPOD_NOTE}")


def _write_svg(path: Path, inputs: Any, instance_type: str) -> None:
    from hpcflow.jobs.records import write_atomic
    from hpcflow.plan.plot import goodput_curves, render_svg

    counts = sorted({max(1, inputs.nodes * k // 4) for k in (1, 2, 4, 8, 16)})
    title = (f"goodput on {instance_type} for {inputs.hours:g} h, "
             f"{inputs.failures_per_node_hour:.3g} failures per node-hour")
    write_atomic(path, render_svg(goodput_curves(inputs, counts), title))


def _print(pred: Any, sim: Any, sources: dict[str, str], cost: Any, price_notes: list[str],
           instance_type: str, svg_path: Path | None) -> None:
    i = pred.inputs
    mtbf = "no failures" if pred.mtbf_s == float("inf") else f"MTBF {pred.mtbf_s / 3600:.1f} h"
    print_table("inputs", ["input", "value", "from"], [
        ("failures per node-hour", f"{i.failures_per_node_hour:.3g}",
         sources["failures_per_node_hour"]),
        ("save s", f"{i.save_s:g}", sources["save_s"]),
        ("restart s", f"{i.restart_s:g}", sources["restart_s"]),
        ("start-up s", f"{i.startup_s:g}", sources["startup_s"]),
        ("detection s", f"{i.detection_s:g}", "given"),
    ], no_wrap=1)
    sim_head = f"simulation ({sim.runs} runs, seed {sim.seed})" if sim else "simulation"
    rows = [("goodput", f"{100 * pred.goodput:.2f}%",
             f"{100 * sim.goodput:.2f}% (5-95%: {100 * sim.goodput_p05:.2f}-"
             f"{100 * sim.goodput_p95:.2f})" if sim else "-")]
    for key, label in (("useful", "useful GPU-h"), ("checkpointing", "lost: checkpointing GPU-h"),
                       ("lost_work", "lost: lost work GPU-h"), ("restarts", "lost: restarts GPU-h"),
                       ("startups", "lost: start-ups GPU-h")):
        rows.append((label, f"{pred.gpu_hours[key]:,.1f}",
                     f"{sim.gpu_hours[key]:,.1f}" if sim else "-"))
    rows.append(("failures", f"{pred.expected_failures:.1f}", f"{sim.failures:.1f}" if sim
                 else "-"))
    print_table(f"{i.nodes} x {instance_type} ({i.nodes * i.gpus_per_node} GPUs) for "
                f"{i.hours:g} h, {mtbf}: {pred.gpu_hours['total']:,.0f} GPU-h",
                ["", "closed form", sim_head], rows, no_wrap=1)
    iv = pred.intervals_s
    click.echo(f"interval: {pred.interval_s:.0f} s ({pred.interval_source}); best "
               f"(availability-optimal) {iv['availability_optimal']:.0f} s, Young "
               f"{iv['young']:.0f} s, Daly {iv['daly']:.0f} s")
    if cost is not None:
        per = "-" if cost.usd_per_useful_gpu_hour is None else f"{cost.usd_per_useful_gpu_hour:.2f}"
        spot_per = ("-" if cost.spot_usd_per_useful_gpu_hour is None else
                    "{:.2f}-{:.2f}".format(*cost.spot_usd_per_useful_gpu_hour))
        click.echo(f"cost: on-demand {cost.on_demand_usd:,.2f} USD, spot "
                   f"{cost.spot_usd[0]:,.2f}-{cost.spot_usd[1]:,.2f} USD; per useful GPU-hour "
                   f"{per} USD on-demand, {spot_per} USD spot")
        click.echo(f"price: {cost.usd_per_node_hour:g} USD per node-hour ({cost.source})")
        if cost.caveat:
            click.echo(f"note: {instance_type}: {cost.caveat}")
    for note in [*pred.notes, *price_notes]:
        click.echo(f"note: {note}")
    if svg_path is not None:
        click.echo(f"plot: {svg_path}")
