"""Read a job's records from its run directory and build its goodput report
(:func:`hpcflow.jobs.report.build_report`, which is pure): the I/O half of ``hpcflow report``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hpcflow import protocol as P
from hpcflow.contract import is_number
from hpcflow.errors import HpcflowError, SlurmQueryError
from hpcflow.jobs import records
from hpcflow.jobs.joblog import read_text, steps_in
from hpcflow.jobs.report import GoodputReport, build_report

__all__ = ["MAX_LATER_JOBS", "load_report"]

#: The most later jobs of the same run directory whose logs a report reads (each log is read
#: up to its cap): far above any real resubmission chain.
MAX_LATER_JOBS = 1000


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
    all_subs = [s for s in records.read_jsonl(Path(rec.run_dir) / records.SUBMISSIONS_FILE)
                if is_number(s.get("submitted_at")) and isinstance(s.get("job_id"), str)]
    subs = [s for s in all_subs if s["job_id"] == job_id]
    submitted_at = min((float(s["submitted_at"]) for s in subs), default=rec.submitted_at)
    ledger = records.job_ledger(rec.run_dir, job_id)
    events = ledger.events
    alive, last_ending = True, ""
    if events and events[-1].get("event") != P.EVENT_JOB_END:
        from hpcflow.jobs import service

        try:
            st = service.job_status(job_id)
            alive, last_ending = not (st.finished or st.state == "UNKNOWN"), st.ending
        except HpcflowError:  # Slurm cannot be asked: count the attempt as running
            alive = True
    later: set[int] = set()
    logs = {(s["job_id"], str(s.get("name", rec.name))) for s in all_subs
            if s["job_id"] != job_id and s["submitted_at"] > submitted_at
            and records.JOB_ID_RE.fullmatch(s["job_id"]) and "/" not in str(s.get("name"))}
    for other, name in sorted(logs)[:MAX_LATER_JOBS]:
        later |= steps_in(read_text(Path(rec.run_dir) / f"{name}-{other}.out"), other)
    from hpcflow.jobs.tracebacks import step_errors

    report = build_report(job_id, submitted_at=submitted_at, events=events,
                          log_text=read_text(rec.log_path), alive=alive, later_steps=later,
                          last_ending=last_ending, errors=step_errors(rec.run_dir, job_id, events),
                          now_s=records.now() if now_s is None else now_s,
                          ledger_skipped=ledger.skipped)
    return report, [e for e in events if e.get("event") == P.EVENT_SIGNAL]
