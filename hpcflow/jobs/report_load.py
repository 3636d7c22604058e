"""Read a job's records from its run directory and build its goodput report
(:func:`hpcflow.jobs.report.build_report`, which is pure): the I/O half of ``hpcflow report``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hpcflow.errors import HpcflowError, SlurmQueryError
from hpcflow.jobs import records
from hpcflow.jobs.joblog import read_text, steps_in
from hpcflow.jobs.report import GoodputReport, build_report

__all__ = ["load_report"]


def load_report(job_id: str, *, now_s: float | None = None) -> tuple[GoodputReport, list[dict[str, Any]]]:
    """Read a job's records from its run directory and build its report.

    When the job's last attempt has no end record, Slurm is asked whether the job may still
    run (:func:`hpcflow.jobs.service.job_status`); if it has ended, or Slurm no longer knows
    it, that attempt ends at its last known time. Steps trained again by jobs submitted later
    into the same run directory count as lost here.

    Returns:
        The report and the job's ledger ``signal`` events (for the timeline).

    Raises:
        SlurmQueryError: the job was not submitted with hpcflow by this user (no run directory
            is known to read the ledger from).
    """
    rec = records.find_job(job_id)
    if rec is None:
        raise SlurmQueryError(f"job {job_id}: no hpcflow record for it in {records.hpcflow_home()}; "
                              "a report needs the run directory of a job submitted with hpcflow")
    all_subs = records.read_jsonl(Path(rec.run_dir) / records.SUBMISSIONS_FILE)
    subs = [s for s in all_subs if str(s.get("job_id")) == job_id]
    submitted_at = min((float(s["submitted_at"]) for s in subs if "submitted_at" in s),
                       default=rec.submitted_at)
    events = records.job_events(rec.run_dir, job_id)
    alive, last_ending = True, ""
    if events and events[-1].get("event") not in ("job_end",):
        from hpcflow.jobs import service

        try:
            st = service.job_status(job_id)
            alive, last_ending = not (st.finished or st.state == "UNKNOWN"), st.ending
        except HpcflowError:  # Slurm cannot be asked: count the attempt as running
            alive = True
    later: set[int] = set()
    for sub in all_subs:
        other = str(sub.get("job_id", ""))
        if other != job_id and float(sub.get("submitted_at", 0) or 0) > submitted_at:
            log = Path(rec.run_dir) / f"{sub.get('name', rec.name)}-{other}.out"
            later |= steps_in(read_text(log), other)
    from hpcflow.jobs.tracebacks import step_errors

    report = build_report(job_id, submitted_at=submitted_at, events=events,
                          log_text=read_text(rec.log_path), alive=alive, later_steps=later,
                          last_ending=last_ending, errors=step_errors(rec.run_dir, job_id, events),
                          now_s=records.now() if now_s is None else now_s)
    return report, [e for e in events if e.get("event") == "signal"]
