"""The commands and environment of an attempt's processes (pure: no process is started here):
the step (``srun [torchrun] <program>``), the hang watchdog and the spot watcher beside it,
what each try's ranks get beside the attempt's environment, and the supervisor's own cost line.
:mod:`hpcflow.supervisor.attempt` starts them."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from hpcflow import protocol as P
from hpcflow.contract import StepEnv, SupervisorSettings
from hpcflow.supervisor import facts

#: The settings as the functions here take them: the record, or its JSON form (decoded once).
Settings = SupervisorSettings | Mapping[str, Any]

__all__ = ["COST_LINE", "own_cost_line", "sigprobe_argv", "spot_watch_argv", "step_argv",
           "step_env", "step_status", "try_env", "watchdog_argv"]


def step_status(returncode: int) -> int:
    """srun's status as the shell reports it: ``128 + N`` for a process killed by signal N
    (bash(1), EXIT STATUS), where :mod:`subprocess` gives ``-N``."""
    return 128 - returncode if returncode < 0 else returncode


def step_argv(cfg: Settings, *, job_id: str, exclude: Sequence[str] = (),
              rdzv_host: str = "", nnodes: str = "") -> list[str]:
    """The step's command: ``srun <options> [--exclude=<hosts>] [torchrun ...] <program>``.

    Under SageMaker HyperPod's auto-resume (``cfg.auto_resume``; the options then hold
    ``--auto-resume=1``, :func:`hpcflow.slurm.render.srun_options`) the step never gets
    ``--exclude``: HyperPod replaces a faulty node in the job and reruns this same command (AWS,
    "Automatic node recovery and auto-resume", https://docs.aws.amazon.com/sagemaker/latest/dg/
    sagemaker-hyperpod-resiliency-slurm-auto-resume.html), so a host named here could be the
    node it put in.

    Args:
        cfg: the supervisor's settings (:func:`hpcflow.slurm.render.supervisor_config`).
        job_id: ``SLURM_JOB_ID`` (torchrun's rendezvous id and port).
        exclude: hosts the step avoids (nodes excluded after failures; ignored under
            auto-resume).
        rdzv_host: torchrun's rendezvous host, the allocation's first.
        nnodes: ``SLURM_NNODES`` for torchrun's ``--nnodes`` ("": the spec's ``nodes``).
    """
    cfg = SupervisorSettings.decode(cfg)
    step = cfg.step
    if step is None:
        raise ValueError("the supervisor's settings have no step")
    argv = ["srun", *step.srun]
    if exclude and not cfg.auto_resume:
        argv.append(f"--exclude={','.join(exclude)}")
    torchrun = step.torchrun
    if torchrun:
        # c10d's rendezvous on the first node, on the port derived from the job id
        # (hpcflow.protocol.port_for_job_number), so two jobs sharing a node do not collide.
        argv += [torchrun.python, "-m", "torch.distributed.run",
                 f"--nnodes={nnodes or cfg.step_nodes}",
                 f"--nproc-per-node={torchrun.nproc_per_node}",
                 "--rdzv-backend=c10d",
                 f"--rdzv-endpoint={rdzv_host}:{P.port_for_job_number(int(job_id))}",
                 f"--rdzv-id={job_id}"]
    return argv + list(step.program)


#: The start of the supervisor's own cost line in the job log (bench/bench_goodput.py reads it).
COST_LINE = "the supervisor used"


def own_cost_line(wall_s: float) -> str:
    """``the supervisor used <cpu> s of CPU in <wall> s``: this process's own CPU time (user +
    system, getrusage(2) RUSAGE_SELF: not the steps', not the watchdog's), so that what it adds
    to an attempt is measured, not assumed."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return f"{COST_LINE} {usage.ru_utime + usage.ru_stime:.2f} s of CPU in {wall_s:.1f} s"


def step_env(cfg: Settings, paths: facts.Paths, try_: int, *,
             now: float | None = None) -> StepEnv:
    """The environment of one step's ranks (:class:`~hpcflow.contract.StepEnv`), built here
    once per try: the spec's settings, the attempt's files, the try, where a failing rank
    leaves its exception, with the watchdog its heartbeat folder and interval, with a warm
    standby where rank 0 lists the modules it loaded, and for an in-job restart (``try_`` > 0)
    the step's start (``now``, default the clock), so that the restarted ranks'
    ``hpcflow-startup`` line times the restart from the supervisor's start of the new step (the
    batch script's start otherwise)."""
    cfg = SupervisorSettings.decode(cfg)
    wd = cfg.watchdog
    return StepEnv(
        spec=cfg.env, preempt_flag=str(paths.flag), preempt_committed=str(paths.committed),
        joined_dir=str(paths.joined), step_try=try_, error_dir=str(paths.errors(try_)),
        attempt_t0=(time.time() if now is None else now) if try_ > 0 else None,
        warm_modules=str(paths.warm_modules) if cfg.warm_standby else None,
        heartbeat_dir=str(paths.heartbeat(try_)) if wd is not None else None,
        heartbeat_interval_s=wd.heartbeat_interval_s if wd is not None else None)


def try_env(cfg: Settings, paths: facts.Paths, try_: int) -> dict[str, str]:
    """What one step's ranks get beside the attempt's environment (docs/protocol.md,
    "Environment"): :meth:`StepEnv.try_variables` of :func:`step_env`."""
    return step_env(cfg, paths, try_).try_variables()


def watchdog_argv(cfg: Settings, paths: facts.Paths, try_: int) -> list[str]:
    """The hang watchdog beside one step (``python -m hpcflow.watchdog``): the try's folders and
    ids, the :class:`~hpcflow.contract.WatchdogSettings` as one JSON word (``--settings``),
    and ``--auto-resume`` under HyperPod's auto-resume (it then judges only ranks of a step
    that still runs: :func:`hpcflow.watchdog.hang.live_beats`); ``[]`` without the
    watchdog."""
    cfg = SupervisorSettings.decode(cfg)
    wd = cfg.watchdog
    if wd is None:
        return []
    return [cfg.hpcflow_python, "-m", "hpcflow.watchdog",
            "--heartbeat-dir", str(paths.heartbeat(try_)), "--ntasks", str(cfg.ntasks),
            "--run-dir", str(paths.run_dir), "--job-id", paths.job_id,
            "--restart", str(paths.restart), "--try", str(try_),
            "--settings", json.dumps(wd.encode(), separators=(",", ":"), sort_keys=True),
            *(["--auto-resume"] if cfg.auto_resume else []), "--parent-pid", str(os.getpid())]


def spot_watch_argv(cfg: Settings, job_id: str) -> list[str]:
    """``preemption.spot_watch`` (docs/spot.md): one spot watcher per node of the allocation
    (spares included), for this job only, in a step of its own that shares the job's resources
    (``srun --overlap``); Slurm ends it with the job. ``[]`` when the spec does not ask."""
    cfg = SupervisorSettings.decode(cfg)
    nodes = cfg.spot_watch_nodes
    if not nodes:
        return []
    return ["srun", "--overlap", "--kill-on-bad-exit=0", f"--nodes={nodes}", f"--ntasks={nodes}",
            "--ntasks-per-node=1", "--cpus-per-task=1", cfg.hpcflow_python, "-m",
            "hpcflow", "spot-watch", "--job", job_id]


def sigprobe_argv(cfg: Settings, *, job_id: str, try_: int, nnodes: str = "") -> list[str]:
    """The catch probe (:mod:`hpcflow.supervisor.sigprobe`): one task on every node of the
    allocation, in a step of its own beside the program (``srun --overlap``), that says whether
    the program step's processes catch the warning signal."""
    cfg = SupervisorSettings.decode(cfg)
    nodes = nnodes or str(cfg.step_nodes)
    return ["srun", "--overlap", "--kill-on-bad-exit=0", f"--nodes={nodes}", f"--ntasks={nodes}",
            "--ntasks-per-node=1", "--cpus-per-task=1", "--quiet", cfg.hpcflow_python,
            "-m", "hpcflow.supervisor.sigprobe", "--job", job_id, "--try", str(try_),
            "--signal", cfg.signal]
