"""Render a :class:`~hpcflow.spec.job.JobSpec` into the batch script that ``sbatch`` runs.

Pure: the output depends only on the spec and the interpreter path. The template is
``sbatch_templates/train.sbatch.j2``; it implements docs/protocol.md. Every value that reaches
the shell goes through the ``shquote`` filter (:func:`shlex.quote`); values on ``#SBATCH`` lines
are double-quoted where needed (sbatch reads those lines itself, with its own quoting rules).
"""

from __future__ import annotations

import functools
import json
import re
import shlex
import sys
from dataclasses import dataclass

import jinja2

from hpcflow import protocol
from hpcflow.contract import (
    MirrorSettings,
    SpecEnv,
    StepSettings,
    SupervisorSettings,
    TorchrunSettings,
    WatchdogSettings,
)
from hpcflow.resources import data_dir
from hpcflow.spec.job import JobSpec
from hpcflow.spec.job_hyperpod import AUTO_RESUME_OPTION

TEMPLATE = "train.sbatch.j2"

#: Seconds a program that has not joined the protocol gets between TERM and KILL when it is
#: stopped before the deadline (the same role as slurm.conf's KillWait, default 30 s).
TERM_GRACE_S = 10

# The per-attempt files the batch script itself names (the supervisor names the rest); the
# shell fills in the ids.
_FILES = {
    "signals": protocol.signals_name("${hpcflow_job_id}", "${hpcflow_restart}"),
    "answer": protocol.answer_name("${hpcflow_job_id}", "${hpcflow_restart}"),
}
# The protocol words the batch script itself spells (everything else the supervisor writes).
_EVENTS = {"job_end": protocol.EVENT_JOB_END}
_REASONS = {"supervisor_error": protocol.REASON_SUPERVISOR_ERROR}

# sbatch parses "#SBATCH" lines itself (not with a shell): double quotes group a value with
# spaces, a backslash escapes the next character, '#' outside quotes starts a comment.
_SBATCH_BARE = re.compile(r"[A-Za-z0-9._,:@/+=-]+")


def sbatch_value(value: object, *, always_quote: bool = False) -> str:
    """Quote a value for an ``#SBATCH --flag=VALUE`` line.

    Args:
        value: the option value.
        always_quote: double-quote even a value that needs no quotes (used for paths).

    Returns:
        The value as is when it is made of plain characters, else in double quotes with ``\\``
        and ``"`` escaped.
    """
    text = str(value)
    if not always_quote and _SBATCH_BARE.fullmatch(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def sbatch_options(spec: JobSpec, *, array: str | None = None) -> list[tuple[str, str | None]]:
    """The ``#SBATCH`` options for ``spec``, sorted by flag, values already quoted.

    Sources: sbatch(1) ``--requeue``, ``--signal`` (``B:`` signals only the batch shell),
    ``--open-mode`` (``append`` keeps every attempt's log), ``--output`` (stderr goes to the
    same file when ``--error`` is not given; ``%x`` job name, ``%j`` job id), ``--array``
    (``%A`` array job id, ``%a`` task id).

    Args:
        spec: the job spec.
        array: an ``--array`` value such as ``0-3%2`` (hpcflow.launch's job arrays); each
            element's log goes into its own run directory ``<run_dir>/<task id>/``.
    """
    opts: dict[str, str | None] = {
        "--cpus-per-task": str(spec.cpus_per_task),
        "--job-name": sbatch_value(spec.name),
        # Spare nodes (resilience.spare_nodes) are allocated too; each step runs on spec.nodes.
        "--nodes": str(allocated_nodes(spec)),
        "--ntasks-per-node": str(spec.tasks_per_node),
        "--open-mode": "append",
        "--output": sbatch_value(f"{spec.run_dir}/%x-%j.out", always_quote=True),
        # Plain --requeue on every Slurm, never 25.11's --requeue=expedite: hpcflow.slurm.versions.
        "--requeue" if spec.preemption.requeue else "--no-requeue": None,
        "--time": spec.time_limit,
    }
    if spec.preemption.signal_lead_s:  # 0: no warning before the time limit
        opts["--signal"] = f"B:{spec.preemption.signal}@{spec.preemption.signal_lead_s}"
    if array is not None:
        opts["--array"] = array
        opts["--output"] = sbatch_value(f"{spec.run_dir}/%a/%x-%A_%a.out", always_quote=True)
    if spec.gpus_per_node > 0:
        opts["--gpus-per-node"] = str(spec.gpus_per_node)
    if spec.partition:
        opts["--partition"] = sbatch_value(spec.partition)
    if spec.account:
        opts["--account"] = sbatch_value(spec.account)
    return sorted(opts.items())


def allocated_nodes(spec: JobSpec) -> int:
    """The nodes the job allocates: ``nodes`` plus ``resilience.spare_nodes`` (each step runs on
    ``nodes`` of them; docs/protocol.md, "Spare nodes and node exclusion")."""
    return spec.nodes + (spec.resilience.spare_nodes if spec.resilience else 0)


def srun_options(spec: JobSpec) -> list[str]:
    """srun's options for the training step (literal words; the template shell-quotes them).

    Counts are given explicitly: since Slurm 22.05 srun no longer reads ``--cpus-per-task`` from
    the batch environment (Slurm 22.05 RELEASE_NOTES; srun(1) ``--cpus-per-task``), and
    ``SLURM_NTASKS`` from sbatch would otherwise override the torchrun layout. With
    ``hyperpod.auto_resume``, SageMaker HyperPod's ``--auto-resume=1`` (AWS, "Automatic node
    recovery and auto-resume", https://docs.aws.amazon.com/sagemaker/latest/dg/
    sagemaker-hyperpod-resiliency-slurm-auto-resume.html).
    """
    if spec.launcher == "torchrun":  # one torchrun per node spawns the node's ranks
        tasks_per_node, cpus_per_task = 1, spec.tasks_per_node * spec.cpus_per_task
    else:
        tasks_per_node, cpus_per_task = spec.tasks_per_node, spec.cpus_per_task
    words = [
        "--kill-on-bad-exit=1",
        f"--nodes={spec.nodes}",
        f"--ntasks={spec.nodes * tasks_per_node}",
        f"--ntasks-per-node={tasks_per_node}",
        f"--cpus-per-task={cpus_per_task}",
    ]
    if spec.gpus_per_node > 0:
        words.append(f"--gpus-per-node={spec.gpus_per_node}")
    if spec.program.workdir is not None:
        words.append(f"--chdir={spec.program.workdir}")
    if spec.container is not None:  # pyxis SPANK options (github.com/NVIDIA/pyxis, README)
        words.append(f"--container-image={spec.container.image}")
        if spec.container.mounts:
            words.append("--container-mounts=" + ",".join(spec.container.mounts))
    if spec.hyperpod is not None and spec.hyperpod.auto_resume:  # hpcflow.spec.job_hyperpod
        words.append(AUTO_RESUME_OPTION)
    return words


@dataclass(frozen=True)
class NetworkExports:
    """What the spec's ``network`` block adds to the batch script, computed by the service
    that knows the instance catalog and the NCCL/EFA presets
    (:func:`hpcflow.nccl.exports.network_exports`): the core renders it, never decides it.

    Attributes:
        settings: ``(name, value, why + source)`` of each exported variable, in order.
        efa_interfaces: EFA interfaces of the instance type when NCCL is expected to run over
            EFA there (the script then puts the aws-ofi-nccl plugin on the loader's path),
            else 0.
    """

    settings: tuple[tuple[str, str, str], ...] = ()
    efa_interfaces: int = 0


def program_words(spec: JobSpec, python: str) -> list[str]:
    """The program part of the step command (after srun's options, or after torchrun's)."""
    prog = spec.program
    if spec.launcher == "torchrun":
        if prog.module is not None:
            return ["-m", prog.module, *prog.args]
        return ["--no-python", *(prog.argv or [])]
    if prog.module is not None:
        return [python, "-m", prog.module, *prog.args]
    return list(prog.argv or [])


def watchdog_settings(spec: JobSpec) -> WatchdogSettings | None:
    """The hang watchdog's settings from ``resilience.timeouts`` and
    ``resilience.heartbeat_interval_s``; None with ``resilience: false`` or
    ``resilience.watchdog: false``."""
    res = spec.resilience
    if res is None or not res.watchdog:
        return None
    t = res.timeouts
    return WatchdogSettings(
        heartbeat_interval_s=res.heartbeat_interval_s, startup_s=t.startup_s,
        checkpoint_s=t.checkpoint_s, step_floor_s=t.step_floor_s, step_factor=t.step_factor,
        warmup_steps=t.warmup_steps, step_s=t.step_s, kill_after_s=t.kill_after_s)


def spec_env(spec: JobSpec) -> SpecEnv:
    """The spec's settings every rank gets (docs/protocol.md, "Environment"): the supervisor
    gives them to each step (:class:`~hpcflow.contract.StepEnv`), after the spec's own ``env``
    (so these win)."""
    auto = spec.checkpoint.interval == "auto"
    p = spec.parallelism
    return SpecEnv(
        checkpoint_interval=(protocol.CHECKPOINT_INTERVAL_AUTO if auto
                             else spec.checkpoint.interval_steps),
        checkpoint_keep=spec.checkpoint.keep,
        max_requeues=spec.preemption.max_requeues,
        failures_per_node_hour=spec.checkpoint.failures_per_node_hour if auto else None,
        parallelism=(p.dp, p.pp, p.tp) if p is not None else None)


def supervisor_config(spec: JobSpec, *, python: str | None = None,
                      allow_shared_dir: bool = False) -> str:
    """What :mod:`hpcflow.supervisor` needs to run an attempt, as JSON (one member a line,
    sorted): the job's limits (read by ``hpcflow.supervisor.rules.Limits``), the step's command
    (srun's options, torchrun's, the program's words), the ranks' environment, the watchdog's,
    the S3 mirror's and the spot watcher's settings, and the protocol version the script was
    rendered for, and whether steps get a warm standby.

    Args:
        spec: the job spec.
        python: the interpreter that runs hpcflow (the supervisor, the watchdog, the mirror);
            default :data:`sys.executable`.
        allow_shared_dir: the job was submitted with ``--allow-shared-dir``: the supervisor's
            check at each attempt's start leaves the run directory's owner and mode alone
            (``"allow_shared_dir": true``, a member only such a job has).
    """
    return json.dumps(supervisor_settings(spec, python=python,
                                          allow_shared_dir=allow_shared_dir).encode(),
                      indent=1, sort_keys=True)


def supervisor_settings(spec: JobSpec, *, python: str | None = None,
                        allow_shared_dir: bool = False) -> SupervisorSettings:
    """The :class:`~hpcflow.contract.SupervisorSettings` of ``spec`` (arguments as
    :func:`supervisor_config`'s): built here once, from the spec's values."""
    res = spec.resilience
    hpcflow_python = python or sys.executable
    interpreter = spec.program.python or hpcflow_python
    return SupervisorSettings(
        protocol_version=protocol.PROTOCOL_VERSION,
        ntasks=spec.ntasks,
        step_nodes=spec.nodes,
        max_requeues=spec.preemption.max_requeues,
        max_preemptions=spec.preemption.max_preemptions,
        requeue_allowed=spec.preemption.requeue,
        resilience=res is not None,
        program_protocol=spec.program.protocol,
        launcher=spec.launcher,
        requeue_margin_s=spec.preemption.requeue_margin_s,
        term_grace_s=TERM_GRACE_S,
        signal=spec.preemption.signal,
        signal_lead_s=spec.preemption.signal_lead_s,
        time_limit_s=spec.time_limit_s,
        hpcflow_python=hpcflow_python,
        env=spec_env(spec),
        step=StepSettings(
            srun=tuple(srun_options(spec)),
            torchrun=(TorchrunSettings(interpreter, spec.tasks_per_node)
                      if spec.launcher == "torchrun" else None),
            program=tuple(program_words(spec, interpreter))),
        watchdog=watchdog_settings(spec),
        mirror=(MirrorSettings(spec.checkpoint.s3_uri, spec.checkpoint.keep)
                if spec.checkpoint.s3_uri else None),
        spot_watch_nodes=allocated_nodes(spec) if spec.preemption.spot_watch else 0,
        warm_standby=bool(res is not None and res.warm_standby),
        max_in_job_restarts=res.max_in_job_restarts if res is not None else 0,
        max_failures=res.max_failures if res is not None else 0,
        exclude_after=res.exclude_after_failures if res is not None else 0,
        allow_shared_dir=allow_shared_dir,
        auto_resume=bool(spec.hyperpod is not None and spec.hyperpod.auto_resume),
    )


@functools.lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(data_dir("sbatch_templates"))),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # noqa: S701 - shell, not HTML: values go through shquote instead
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["shquote"] = lambda value: shlex.quote(str(value))
    return env


def render_sbatch(spec: JobSpec, *, python: str | None = None, array: str | None = None,
                  network: NetworkExports | None = None, allow_shared_dir: bool = False) -> str:
    """Render the batch script for ``spec``.

    Args:
        spec: a validated job spec.
        python: interpreter for ``program.module`` and torchrun when the spec names none;
            default :data:`sys.executable` (the interpreter that runs hpcflow).
        array: an ``--array`` value (``0-3%2``) for a job array, whose elements each get the
            run directory ``<run_dir>/<task id>`` and checkpoints in ``<checkpoint dir>/<task
            id>`` (used by hpcflow.launch; job specs have no array field).
        network: the ``network`` block's exports (:func:`hpcflow.nccl.exports.network_exports`;
            :func:`hpcflow.jobs.script.job_script` passes them); required when the spec has
            the block.
        allow_shared_dir: as for :func:`supervisor_config`.

    Returns:
        The script text, ending in a newline.

    Raises:
        ValueError: the spec has a ``network`` block and no ``network`` exports were given
            (the script would silently lack the preset).
        jinja2.UndefinedError: the template uses a name the renderer does not pass (a bug).
        FileNotFoundError: the template folder is missing from the installation.
    """
    if spec.network is not None and network is None:
        raise ValueError("the spec has a network block: pass network="
                         "hpcflow.nccl.exports.network_exports(spec), or render with "
                         "hpcflow.jobs.script.job_script")
    network = network or NetworkExports()
    context = {
        "name": spec.name,
        "sbatch_options": sbatch_options(spec, array=array),
        "array": array is not None,
        "launcher": spec.launcher,
        "run_dir": str(spec.run_dir),
        "checkpoint_dir": str(spec.checkpoint_dir),
        "hpcflow_python": python or sys.executable,  # the supervisor runs hpcflow itself
        "max_requeues": spec.preemption.max_requeues,
        "requeue": spec.preemption.requeue,
        "requeue_margin_s": spec.preemption.requeue_margin_s,
        "protocol": spec.program.protocol,
        "signal": spec.preemption.signal,
        "signal_lead_s": spec.preemption.signal_lead_s,
        "time_limit_s": spec.time_limit_s,
        "ntasks": spec.ntasks,
        "files": _FILES,
        # (name, literal value, None) or (name, "", path of a value read at run time)
        "env": [(k, v, None) if isinstance(v, str) else (k, "", v.from_file)
                for k, v in sorted(spec.env.items())],
        "network_preset": list(network.settings),
        "efa_expected": network.efa_interfaces > 0,
        "instance_type": spec.network.instance_type if spec.network else "",
        "events": _EVENTS,
        "reasons": _REASONS,
        "state_dir": protocol.STATE_DIR,
        "ledger_file": protocol.LEDGER_FILE,
        "supervisor_config": supervisor_config(spec, python=python,
                                               allow_shared_dir=allow_shared_dir),
    }
    return _environment().get_template(TEMPLATE).render(**context)
