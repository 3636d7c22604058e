"""Helpers for tests on the real local Slurm cluster: polling and a watched job."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from polling import wait_for  # noqa: F401 - the tests import it from here

from hpcflow import protocol
from hpcflow.jobs import records, service
from hpcflow.slurm.client import SlurmClient


class Job:
    """A job submitted through hpcflow's own submit path, with helpers to watch it."""

    def __init__(self, spec_path: Path | None, overrides: tuple[str, ...] = ()) -> None:
        if spec_path is None:  # Job.of: a job something else submitted
            return
        result = service.submit(spec_path, overrides)
        assert result.job_id
        self.job_id: str = result.job_id
        self.run_dir = result.run_dir
        self.log_path = result.log_path
        print(f"submitted job {self.job_id} in {self.run_dir}")

    @classmethod
    def of(cls, job_id: str, run_dir: Path) -> Job:
        """The job ``job_id`` of ``run_dir``, submitted by something else (a rehearsal)."""
        job = cls(None)
        job.job_id, job.run_dir = str(job_id), Path(run_dir)
        logs = sorted(job.run_dir.glob(f"*-{job_id}.out"))
        assert len(logs) == 1, logs
        job.log_path = logs[0]
        return job

    def events(self) -> list[dict[str, Any]]:
        return records.job_events(self.run_dir, self.job_id)

    def event(self, kind: str, restart: int | None = None) -> dict[str, Any] | None:
        return next((e for e in self.events() if e.get("event") == kind
                     and (restart is None or int(e.get("restart", -1)) == restart)), None)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def status(self):  # noqa: ANN201
        return service.job_status(self.job_id)

    def wait_finished(self, timeout_s: float = 240):  # noqa: ANN201
        return wait_for(lambda: (s := self.status()).finished and s, timeout_s,
                        f"job {self.job_id} to finish")

    def notice(self, deadline_in_s: float) -> None:
        """Leave a preemption notice: the job must be off its nodes ``deadline_in_s`` from now
        (what a spot-interruption watcher writes before it sends USR1)."""
        path = protocol.state_dir(self.run_dir) / protocol.notice_name(self.job_id)
        path.write_text(f"{int(time.time() + deadline_in_s)}\n")

    def signal_batch(self, sig: str = "USR1") -> None:
        """``scancel --signal=SIG --batch`` to this attempt only (never scancel's own retry,
        which can reach the next attempt: :meth:`SlurmClient.warn_batch`)."""
        print(f"+ scancel -v --signal={sig} --batch {self.job_id}")
        SlurmClient().warn_batch(self.job_id, sig)

    def dump(self) -> None:
        print(f"----- log of job {self.job_id} ({self.log_path}) -----\n{self.log()}")
        print("----- ledger -----")
        for e in self.events():
            print(e)
