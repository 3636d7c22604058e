"""submitit's Slurm executor with hpcflow's batch script, and a Job that reads hpcflow's status.

:class:`SlurmBackend` subclasses ``submitit.SlurmExecutor`` and replaces one thing, the text of
the batch script (``_make_submission_file_text``): it is rendered from hpcflow's own template
(``sbatch_templates/train.sbatch.j2`` via :func:`hpcflow.jobs.script.job_script`) with
submitit's payload runner as the program. submitit keeps everything else: pickling the call,
``sbatch``, job ids, array bookkeeping, result pickles. Arrays are submitted here too (submitit's
own array path builds a plain ``SlurmExecutor`` and would bypass the template).

:class:`HpcflowJob` is submitit's ``SlurmJob`` with three answers taken from hpcflow instead of
``sacct`` (absent on clusters without accounting, where submitit's state stays ``UNKNOWN``):
``state`` and ``done()`` come from :func:`hpcflow.jobs.service.job_status` (squeue, scontrol, the
ledger), so a requeued job is neither done nor failed; ``result()`` of a multi-task job is rank
0's; ``stdout()``/``stderr()`` read the job log ``<run_dir>/<name>-<jobid>.out``. No result
pickle is read from a folder another user owns or can write (:meth:`HpcflowJob._check_folder`).
"""

from __future__ import annotations

import shlex
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import submitit
from submitit.core import core, utils

from hpcflow.errors import SlurmQueryError
from hpcflow.jobs import records
from hpcflow.jobs.status import FINAL_STATES
from hpcflow.launch.params import build_spec
from hpcflow.spec.job import JobSpec

#: Seconds a job status is reused before Slurm is asked again (one squeue + scontrol).
STATUS_CACHE_S = 2.0

_status_cache: dict[str, tuple[float, Any]] = {}


def _status(job_id: str) -> Any:
    from hpcflow.jobs.service import job_status

    hit = _status_cache.get(job_id)
    if hit is not None and time.monotonic() - hit[0] < STATUS_CACHE_S:
        return hit[1]
    try:
        st = job_status(job_id)
    except SlurmQueryError:
        st = None
    _status_cache[job_id] = (time.monotonic(), st)
    return st


class HpcflowJob(submitit.SlurmJob):
    """A submitit job whose state, completion and logs come from hpcflow (see module doc)."""

    @property
    def state(self) -> str:
        """Slurm's state word (``PENDING``, ``RUNNING``, ``COMPLETED``, ``FAILED``...), from
        squeue/scontrol and the ledger; ``REQUEUED`` while a requeued job waits to restart (never
        a final state for a job that will run again); ``UNKNOWN`` when nothing knows the job."""
        st = _status(self.job_id)
        if st is None:
            return "UNKNOWN"
        if not st.finished and st.state in FINAL_STATES:
            return "REQUEUED"
        return st.state

    def done(self, force_check: bool = False) -> bool:
        """True once the job will not run again: all its tasks' results are there and say
        success, or hpcflow's status says finished. A failure pickle alone is not enough: the
        job may still be requeued and its next attempt replaces it."""
        if self._sub_jobs:
            return all(sub.done(force_check) for sub in self._sub_jobs)
        self._check_folder()
        if force_check:
            _status_cache.pop(self.job_id, None)
        if self.paths.result_pickle.exists():
            try:
                outcome, _ = utils.pickle_load(self.paths.result_pickle)
            except Exception:  # noqa: BLE001 - being written: ask Slurm below
                outcome = None
            if outcome == "success":
                _status_cache.pop(self.job_id, None)  # the next state read asks Slurm
                return True
        st = _status(self.job_id)
        return st is not None and st.finished

    def result(self) -> Any:
        """The function's return value (rank 0's for a multi-task job); waits for the job.

        Raises:
            submitit.core.utils.FailedJobError: the function raised (the remote traceback is in
                the message), on any rank.
            submitit.core.utils.UncompletedJobError: the job ended without a result (killed,
                cancelled, out of requeues).
        """
        return self.results()[0]

    def _get_outcome_and_result(self) -> tuple[str, Any]:
        """submitit's reading of the result pickle (for ``result()``, ``results()``,
        ``exception()``), after :meth:`_check_folder`."""
        self._check_folder()
        return super()._get_outcome_and_result()

    def _check_folder(self) -> None:
        """Refuse to unpickle from a folder another user owns or can write, where a planted
        result pickle would run their code as this user (:mod:`hpcflow.jobs.trust`).

        Raises:
            SubmitError: naming the folder and why.
        """
        from hpcflow.jobs.trust import check_trusted_dir

        check_trusted_dir("folder", self.paths.folder, override=None)

    def _log_path(self) -> Path | None:
        rec = records.find_job(self.job_id)
        return rec.log_path if rec is not None else None

    def stdout(self) -> str | None:
        """The job log (every rank and the batch script write to it), or None before it exists:
        its last :data:`hpcflow.jobs.joblog.LOG_MAX_BYTES`, and ``""`` when it is not a regular
        file (a FIFO in its place would block the read; :func:`hpcflow.jobs.joblog.read_text`)."""
        from hpcflow.jobs.joblog import read_text

        path = self._log_path()
        if path is None or not path.exists():
            return None
        return read_text(path)

    def stderr(self) -> str | None:
        """The same job log as :meth:`stdout` (hpcflow's template sends both streams there)."""
        return self.stdout()


class SlurmBackend(submitit.SlurmExecutor):
    """submitit's Slurm executor whose batch script is hpcflow's (see module doc).

    Args:
        folder: submitit's folder (pickles and result pickles); each submission also gets a run
            directory ``<folder>/<name>-<8 hex>`` for its log, ledger and checkpoints.
        fields: job spec fields (:mod:`hpcflow.launch.params`), read at each submission.
        max_num_timeout: submitit's bound, unused by hpcflow (its requeue bound is
            ``preemption.max_requeues``).
    """

    job_class = HpcflowJob

    def __init__(self, folder: str | Path, fields: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(folder, python=shlex.quote(sys.executable), **kwargs)
        self.fields = fields
        self.array_parallelism: int | None = None
        self._pending: dict[str, tuple[JobSpec, str, int]] = {}

    def _num_tasks(self) -> int:
        return int(self.fields.get("nodes", 1)) * int(self.fields.get("tasks_per_node", 1))

    def job_spec(self, run_dir: Path) -> JobSpec:
        """The job spec of a submission into ``run_dir``."""
        argv = [sys.executable, "-u", "-m", "submitit.core._submit", str(self.folder)]
        signal = (self.fields.get("preemption") or {}).get("signal", "USR1")
        env = {"SUBMITIT_EXECUTOR": "slurm", "SUBMITIT_PREEMPT_SIGNAL": signal}
        return build_spec(self.fields, run_dir=run_dir, argv=argv, env=env)

    def _make_submission_file_text(self, command: str, uid: str) -> str:
        from hpcflow.jobs.script import job_script
        from hpcflow.jobs.service import spec_yaml

        name = self.fields["name"]
        run_dir = self.folder / f"{name}-{uid[:8]}"
        spec = self.job_spec(run_dir)
        count = self.parameters.get("map_count")
        array = None
        if count:
            array = f"0-{count - 1}%{min(count, self.array_parallelism or count)}"
        script = job_script(spec, python=sys.executable, array=array)
        # Slurm opens the log before the script runs: its folder must exist first.
        records.write_run_files(run_dir, spec_yaml(spec), script)
        for task in range(count or 0):
            (run_dir / str(task)).mkdir(exist_ok=True)
        self._pending[uid] = (spec, script, count or 0)
        return script

    def _write_job_id(self, job_id: str, uid: str) -> None:
        from hpcflow.jobs.service import spec_yaml

        spec, script, count = self._pending.pop(uid)
        if not count:
            rec = records.JobRecord(job_id, spec.name, str(spec.run_dir), records.now())
            records.record_submission(rec, script, spec_yaml(spec))
            return
        for task in range(count):  # one record per element, in its own run directory
            rec = records.JobRecord(f"{job_id}_{task}", spec.name, str(spec.run_dir / str(task)),
                                    records.now())
            records.record_submission(rec, script, spec_yaml(spec))

    def _internal_process_submissions(
        self, delayed_submissions: list[utils.DelayedSubmission]
    ) -> list[core.Job[Any]]:
        if len(delayed_submissions) == 1:
            return super()._internal_process_submissions(delayed_submissions)
        folder = utils.JobPaths.get_first_id_independent_folder(self.folder)
        folder.mkdir(parents=True, exist_ok=True)
        pickle_paths = []
        for delayed in delayed_submissions:
            path = folder / f"{uuid.uuid4().hex}.pkl"
            delayed.set_timeout(self.parameters.get("time", 5), self.max_num_timeout)
            delayed.dump(path)
            pickle_paths.append(path)
        self.parameters["map_count"] = len(delayed_submissions)
        try:
            first = self._submit_command(self._submitit_command_str)
        finally:
            del self.parameters["map_count"]
        tasks = list(range(first.num_tasks))
        jobs = [HpcflowJob(folder=self.folder, job_id=f"{first.job_id}_{i}", tasks=tasks)
                for i in range(len(delayed_submissions))]
        for job, path in zip(jobs, pickle_paths, strict=True):
            job.paths.move_temporary_file(path, "submitted_pickle")
        return jobs
