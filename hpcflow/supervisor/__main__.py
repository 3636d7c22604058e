"""``python -m hpcflow.supervisor run``: one attempt of a job, from its first step to its ending.

The batch script starts it once per attempt, passes Slurm's warning on to it, and waits
(docs/architecture.md, "The supervisor")::

    python -m hpcflow.supervisor run --config JSON --job-id ID --requeue-id ID --restart N \\
        --nodelist LIST --end-time UNIX_S --nnodes N --answer FILE

It runs the steps and everything beside them (:mod:`hpcflow.supervisor.attempt`) and makes
every decision (:mod:`hpcflow.supervisor.turns`). Its last word is one line written atomically
to ``--answer``: ``exit <status>``, the batch script's exit status (0 after a requeue). Without
that line (this process crashed or was killed) the batch script records ``job_end`` with
``supervisor_error`` itself and exits 1. Log lines go to stderr (the job log).

``python -m hpcflow.supervisor start ...`` is what batch scripts of protocol version 3 asked
first; it answers ``exit 1`` with the version-skew record and a message that says what to do.

Exit status: 0, or 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

from hpcflow import fsutil
from hpcflow import protocol as P
from hpcflow.supervisor.attempt import Attempt
from hpcflow.supervisor.turns import Job, Turns, log


def _job(args: argparse.Namespace) -> Job:
    return Job(json.loads(args.config), job_id=args.job_id, requeue_id=args.requeue_id,
               restart=args.restart, nodelist=args.nodelist,
               run_dir=Path(os.environ[P.ENV_RUN_DIR]),
               checkpoint_dir=Path(os.environ[P.ENV_CHECKPOINT_DIR]))


def _deadline(job: Job, end_time: str) -> int:
    """``SLURM_JOB_END_TIME`` (Slurm >= 23.02), else now plus the time limit."""
    if end_time.isdigit():
        return int(end_time)
    return int(time.time()) + job.cfg.time_limit_s


def _untrusted(job: Job) -> str | None:
    """Why this attempt must not run in its run directory, or None: submit's trust checks
    again (:func:`hpcflow.jobs.trust.check_attempt_dirs`), since a folder can be swapped
    after submit and before any attempt or requeue."""
    from hpcflow.errors import HpcflowError
    from hpcflow.jobs.trust import check_attempt_dirs

    try:
        check_attempt_dirs(job.paths.run_dir, job.paths.checkpoint_dir,
                           allow_shared_dir=job.cfg.allow_shared_dir)
    except HpcflowError as exc:
        return str(exc)
    return None


def cmd_run(args: argparse.Namespace) -> int:
    """Run the attempt; write ``exit <status>`` to the answer file. A failure of the
    supervisor itself is recorded (``job_end`` ``supervisor_error``) and ends the job with 1.
    A run directory that fails the trust checks at the attempt's start ends it with 1 before
    any step, and nothing is written into it but the answer (no ledger record)."""
    job = _job(args)
    if (refused := _untrusted(job)) is not None:
        log(f"the run directory is not safe at this attempt's start; no step runs: {refused}")
        fsutil.write_atomic(Path(args.answer), "exit 1\n", mode=0o600)
        return 0
    try:
        status = Attempt(job, deadline_s=_deadline(job, args.end_time), nnodes=args.nnodes).run()
    except Exception:  # noqa: BLE001 - the job must still end with a record
        log("hpcflow's supervisor failed; the job ends without a decision:\n"
            + traceback.format_exc().rstrip())
        job.event(P.EVENT_JOB_END, rc=1, reason=P.REASON_SUPERVISOR_ERROR)
        status = 1
    fsutil.write_atomic(Path(args.answer), f"exit {status}\n", mode=0o600)
    return 0


def cmd_start(args: argparse.Namespace) -> int:
    """The first question of a batch script rendered for protocol version 3: this hpcflow
    cannot run it (its script expects answers this version does not give)."""
    job = _job(args)
    turns = Turns(job, deadline_s=int(time.time()))
    if turns.version_ok():  # a version-4 script never asks `start`
        log("`python -m hpcflow.supervisor start` is not part of this protocol version: submit "
            "the job again with `hpcflow submit`")
        turns.end_early(1, P.REASON_VERSION_SKEW)
    print("exit 1", flush=True)
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m hpcflow.supervisor",
                                description=__doc__.split("::")[0])
    sub = p.add_subparsers(dest="command", required=True)
    for name in ("run", "start"):
        c = sub.add_parser(name)
        c.add_argument("--config", required=True, help="the job's settings as JSON (rendered)")
        c.add_argument("--job-id", required=True)
        c.add_argument("--requeue-id", default="")
        c.add_argument("--restart", type=int, default=0)
        c.add_argument("--nodelist", default="")
        if name == "run":
            c.add_argument("--end-time", default="", help="SLURM_JOB_END_TIME, Unix s")
            c.add_argument("--nnodes", default="", help="SLURM_NNODES (torchrun's --nnodes)")
            c.add_argument("--answer", required=True, help="file for the last word")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the command; 0, or 2 for bad arguments."""
    args = _parser().parse_args(argv)
    return cmd_run(args) if args.command == "run" else cmd_start(args)


if __name__ == "__main__":
    sys.exit(main())
