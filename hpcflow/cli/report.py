"""``hpcflow report JOBID``: where a job's wall time went, with a timeline picture."""

from __future__ import annotations

from pathlib import Path

import click

from hpcflow.cli.output import (
    JsonCommand,
    check_job_id,
    emit_json,
    handles_errors,
    print_table,
    warn_read,
)


@click.command(cls=JsonCommand)
@click.argument("job_id", callback=check_job_id)
@click.option("--svg", "svg_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Where to write the timeline picture [default: <run_dir>/report-<JOBID>.svg].")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@handles_errors
def report(job_id: str, svg_path: Path | None, as_json: bool) -> None:
    """Goodput ledger of a job: pending, startup, training, checkpointing and lost time per
    attempt, how each attempt ended, every failure with the steps it lost, the checkpoint
    interval `checkpoint.interval: auto` chose and why, where each attempt's start-up went
    (programs on hpcflow's Run), the goodput (training / wall), and an SVG timeline. --json
    also carries the measured save, restart and start-up costs and failure rate that `hpcflow
    plan goodput --from-job` reads."""
    from hpcflow.errors import SpecError
    from hpcflow.fsutil import output_problem
    from hpcflow.jobs import mirror_report, records
    from hpcflow.jobs.endings import excluded_nodes
    from hpcflow.jobs.hangs import suspicion_line
    from hpcflow.jobs.intervals import interval_line
    from hpcflow.jobs.measured import measured_costs
    from hpcflow.jobs.notices import notice_outcomes
    from hpcflow.jobs.report_load import load_report
    from hpcflow.jobs.startup import startup_line
    from hpcflow.jobs.timeline import render_svg
    from hpcflow.jobs.tracebacks import error_lines

    if svg_path is not None and (problem := output_problem(svg_path)):
        raise SpecError(f"--svg: {problem}")
    rep, signals = load_report(job_id)
    rec = records.find_job(job_id)
    events = records.job_events(rec.run_dir, job_id) if rec else []
    notices = notice_outcomes(rec.run_dir, job_id, events) if rec else []
    mirror = mirror_report.summarise(events) if rec else None
    excluded = excluded_nodes(events)
    measured = measured_costs(rep)
    svg = render_svg(rep, signals)
    # Everything is known now: the timeline is the only thing written, and the last.
    problem = None
    if svg_path is None:
        svg_path = Path(rec.run_dir if rec else ".") / f"report-{job_id}.svg"
        problem = _foreign_folder(svg_path.parent) or output_problem(svg_path)
    try:
        if problem:  # never write by default into a folder (or through a link) not yours
            raise OSError(problem)
        records.write_atomic(svg_path, svg)
    except OSError as exc:  # a run directory gone, replaced, not writable or not yours
        click.echo(f"hpcflow: warning: the timeline {svg_path} is not written "
                   f"({exc.strerror or exc}); use --svg PATH", err=True)
        svg_path = None
    warn_read(rep.notes, rep.skipped)
    if as_json:
        emit_json({**rep.to_dict(), "svg": svg_path and str(svg_path), "excluded_nodes": excluded,
                   "spot_notices": [n.to_dict() for n in notices],
                   "mirror": mirror.to_dict() if mirror else None,
                   "measured": measured})
        return
    rows = [(a.restart + 1, f"{a.pending_s:.0f}", f"{a.startup_s:.0f}", f"{a.training_s:.0f}",
             f"{a.checkpointing_s:.1f}", f"{a.lost_s:.1f}",
             "-" if a.first_step is None else f"{a.first_step}-{a.last_step}",
             a.ending or a.outcome, a.outcome)
            for a in rep.attempts]
    t = rep.totals
    rows.append(("total", f"{t['pending']:.0f}", f"{t['startup']:.0f}", f"{t['training']:.0f}",
                 f"{t['checkpointing']:.1f}", f"{t['lost']:.1f}", "", "", ""))
    goodput = "n/a" if rep.goodput is None else f"{100 * rep.goodput:.1f}%"
    print_table(f"job {job_id}: goodput {goodput} of {rep.wall_s:.0f} s wall",
                ["attempt", "pending s", "startup s", "training s", "ckpt s", "lost s", "steps",
                 "ending", "outcome"], rows)
    if rep.failures:
        print_table("failures", ["attempt", "kind", "lost steps", "lost s", "steps lost",
                                 "detail"],
                    [(f.attempt, f.kind, f.lost_steps, f"{f.lost_s:.1f}", f.steps or "-",
                      f.detail) for f in rep.failures])
    if excluded:
        print_table("excluded nodes", ["attempt", "node", "failures", "then"],
                    [(x["attempt"], x["node"], x["failures"],
                      "a spare node took its place" if x["spare"] else "requeued without it")
                     for x in excluded])
    for f in rep.failures:
        if f.error:
            click.echo(f"attempt {f.attempt}, {f.kind}: " + "\n".join(error_lines(f.error)))
    for a in rep.attempts:
        if a.network:
            click.echo(f"attempt {a.restart + 1} network: {a.network}")
        for choice in a.intervals:
            click.echo(interval_line(a.restart + 1, choice))
        for hang in a.suspected_hangs:
            click.echo(suspicion_line(a.restart + 1, hang))
        if a.startup_phases:
            click.echo(startup_line(a.restart + 1, a.startup_phases))
    for n in notices:
        click.echo(n.line())
    if mirror is not None:
        click.echo(mirror.line())
    if svg_path is not None:
        click.echo(f"timeline: {svg_path}")


def _foreign_folder(folder: Path) -> str | None:
    """Why ``folder`` is not the user's own (gone, another owner, a link planted by one,
    writable by others), or None; a folder that cannot be looked at is left to the write to
    refuse. The timeline is never written by default through a folder it would have to create."""
    import os

    from hpcflow.jobs.trust import folder_problem

    try:
        return folder_problem(folder, own=True, uid=os.getuid())
    except FileNotFoundError:
        return "the run directory is gone"
    except OSError:
        return None
