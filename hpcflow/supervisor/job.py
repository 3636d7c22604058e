"""One attempt of one job as the supervisor knows it: its ids, paths and limits, its ledger,
and the ranks that joined (:class:`Job`). Built once per attempt from the batch script's
arguments and settings; :mod:`hpcflow.supervisor.turns` takes its decisions over it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpcflow import ledger
from hpcflow.contract import REQUIRED_SETTINGS, SupervisorSettings
from hpcflow.hostlist import expand_hostlist
from hpcflow.supervisor import facts, rules

__all__ = ["Job"]


class Job:
    """One attempt of one job: its ids, paths and limits, and its ledger.

    Args:
        cfg: the job's settings as rendered into the batch script
            (:func:`hpcflow.slurm.render.supervisor_config`).
        job_id: ``SLURM_JOB_ID``.
        requeue_id: the id that names the job to requeue (``<arrayjob>_<task>`` for an array
            element); the ledger's ``job_id``.
        restart: ``SLURM_RESTART_COUNT`` (0 on the first run).
        nodelist: ``SLURM_JOB_NODELIST``.
        run_dir, checkpoint_dir: ``HPCFLOW_RUN_DIR``, ``HPCFLOW_CHECKPOINT_DIR``.
    """

    def __init__(self, cfg: Mapping[str, Any] | SupervisorSettings, *, job_id: str,
                 requeue_id: str, restart: int, nodelist: str, run_dir: Path,
                 checkpoint_dir: Path) -> None:
        self.cfg = cfg = SupervisorSettings.decode(cfg, required=REQUIRED_SETTINGS)
        self.job_id = job_id
        self.requeue_id = requeue_id or job_id
        self.restart = restart
        self.nodelist = nodelist
        self.paths = facts.Paths(Path(run_dir), Path(checkpoint_dir), job_id, restart)
        self.limits = rules.Limits(
            ntasks=cfg.ntasks, step_nodes=cfg.step_nodes, max_requeues=cfg.max_requeues,
            # A batch script of an older protocol (version skew) has none: 0; it runs no step.
            max_preemptions=cfg.max_preemptions,
            requeue_allowed=cfg.requeue_allowed, resilience=cfg.resilience,
            max_in_job_restarts=cfg.max_in_job_restarts,
            max_failures=cfg.max_failures, exclude_after=cfg.exclude_after,
            auto_resume=cfg.auto_resume)

    @property
    def protocol(self) -> str:
        """``program.protocol`` (``auto``, ``requeue``, ``handles_signal``)."""
        return self.cfg.program_protocol

    @property
    def tasks(self) -> int:
        """The srun tasks of a step: its ranks, or one torchrun per node."""
        if self.cfg.launcher == "torchrun":
            return self.cfg.step_nodes
        return self.limits.ntasks

    def hosts(self) -> list[str]:
        """The allocation's hosts, or ``[]`` when the node list cannot be expanded."""
        try:
            return expand_hostlist(self.nodelist)
        except ValueError:
            return []

    def event(self, name: str, **fields: Any) -> None:
        """Append one event of this attempt to the ledger."""
        ledger.append_event(self.paths.ledger, name, job_id=self.requeue_id,
                            restart=self.restart, **fields)

    def history(self) -> rules.History:
        """What the ledger says of this job so far."""
        events = ledger.read_events(self.paths.ledger, job_id=self.requeue_id)
        return rules.History.from_events(events, self.restart)

    def joined(self) -> int:
        """Ranks of the running step that joined the protocol (their joined files)."""
        return sum(node is not None
                   for node in facts.ranks_joined(self.paths.joined, self.limits.ntasks))
