"""The supervisor's settings, the batch script's config: one frozen record
(:class:`SupervisorSettings`, with the step's, torchrun's, the watchdog's and the S3 mirror's),
written by :func:`hpcflow.slurm.render.supervisor_config` and read by :mod:`hpcflow.supervisor`;
the watchdog's part also goes to ``python -m hpcflow.watchdog --settings``. The defaults here
are the only ones."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from hpcflow.contract.bounded import fits, is_int, is_number
from hpcflow.contract.env import SpecEnv

__all__ = ["REQUIRED_SETTINGS", "MirrorSettings", "StepSettings", "SupervisorSettings",
           "TorchrunSettings", "WatchdogSettings"]


@dataclass(frozen=True)
class TorchrunSettings:
    """torchrun's part of the step (``launcher: torchrun``).

    Attributes:
        python: the interpreter that runs ``torch.distributed.run``.
        nproc_per_node: ranks torchrun starts on each node.
    """

    python: str
    nproc_per_node: int


@dataclass(frozen=True)
class StepSettings:
    """The step's command: ``srun <srun> [torchrun ...] <program>``.

    Attributes:
        srun: srun's options (:func:`hpcflow.slurm.render.srun_options`).
        torchrun: torchrun's settings, or None with ``launcher: srun``.
        program: the program's words (interpreter first for a Python program).
    """

    srun: tuple[str, ...] = ()
    torchrun: TorchrunSettings | None = None
    program: tuple[str, ...] = ()


@dataclass(frozen=True)
class WatchdogSettings:
    """The hang watchdog beside each step (``resilience.timeouts``, docs/protocol.md, "Hangs and
    in-job restarts"): built from the spec by :func:`hpcflow.slurm.render.watchdog_settings`,
    carried in :class:`SupervisorSettings`, handed to ``python -m hpcflow.watchdog --settings
    JSON`` (:meth:`encode`, :meth:`decode`). Seconds throughout.

    Attributes:
        heartbeat_interval_s: seconds between a rank's heartbeats (the ranks get its text).
        startup_s, checkpoint_s: the start-up's and a checkpoint save's timeouts.
        step_floor_s, step_factor, warmup_steps: a step's derived timeout, ``max(step_factor x
            p99 step time, step_floor_s)`` after ``warmup_steps`` steps.
        step_s: a step's fixed timeout, or None (derived).
        kill_after_s: how much longer a suspected hang lasts before the step is ended.
    """

    heartbeat_interval_s: float
    startup_s: float
    checkpoint_s: float
    step_floor_s: float
    step_factor: float
    warmup_steps: int
    step_s: float | None = None
    kill_after_s: float = 0.0

    def encode(self) -> dict[str, Any]:
        """The JSON form: every member (numbers as the spec gave them)."""
        return asdict(self)

    @classmethod
    def decode(cls, raw: Any) -> WatchdogSettings:
        """The settings of the JSON form ``raw``.

        A batch script rendered before the settings had members (the same protocol version,
        requeued after an upgrade) carries the watchdog's command-line words instead,
        ``{"options": ["--startup-s=600", ...], "heartbeat_interval_s": 2}``: they read the
        same, and without ``--kill-after-s`` a hang is ended at once, as it was then.

        Raises:
            ValueError: not a mapping, a member missing or not a number of its range, naming
                it and its value.
        """
        if not isinstance(raw, Mapping):
            raise ValueError(f"the watchdog's settings are not a mapping: {raw!r:.80}")
        if "options" in raw:
            raw = {**_watchdog_words(raw["options"]),
                   "heartbeat_interval_s": raw.get("heartbeat_interval_s")}
        values: dict[str, Any] = {}
        for f in fields(cls):
            value = raw.get(f.name)
            if value is None and f.name in ("step_s", "kill_after_s"):
                continue  # their defaults: derived, and at once
            if f.name not in raw:
                raise ValueError(f"the watchdog's settings lack {f.name}")
            whole = f.name == "warmup_steps"
            positive = f.name == "heartbeat_interval_s"
            if not (is_int(value) if whole else is_number(value)) or value < 0 or (
                    positive and value == 0):
                raise ValueError(f"watchdog setting {f.name!r}: {value!r:.80} is not a "
                                 f"{'whole ' if whole else ''}number "
                                 f"{'above' if positive else 'at least'} 0")
            values[f.name] = value
        return cls(**values)


#: The watchdog's command-line words of a script rendered before :class:`WatchdogSettings` had
#: members, and the member each one gives.
_WATCHDOG_WORDS = {"--startup-s": "startup_s", "--checkpoint-s": "checkpoint_s",
                   "--step-floor-s": "step_floor_s", "--step-factor": "step_factor",
                   "--warmup-steps": "warmup_steps", "--step-s": "step_s",
                   "--kill-after-s": "kill_after_s"}


def _watchdog_words(options: Any) -> dict[str, Any]:
    """The members of the watchdog's words ``--name=value`` (``--interval-s`` is the settings'
    own ``heartbeat_interval_s``); a word of another form is refused."""
    out: dict[str, Any] = {}
    for word in options if isinstance(options, list) else [options]:
        name, _, text = str(word).partition("=")
        if name == "--interval-s":
            continue
        if name not in _WATCHDOG_WORDS:
            raise ValueError(f"watchdog setting 'options': {word!r:.80} is not one of "
                             f"{', '.join(_WATCHDOG_WORDS)}")
        try:
            out[_WATCHDOG_WORDS[name]] = int(text) if text.isdigit() else float(text)
        except ValueError:
            raise ValueError(f"watchdog setting 'options': {word!r:.80} is not a number"
                             ) from None
    return out


@dataclass(frozen=True)
class MirrorSettings:
    """The S3 checkpoint mirror (``checkpoint.s3_uri``).

    Attributes:
        s3_uri: where the mirror copies committed checkpoints.
        keep: checkpoints kept there.
    """

    s3_uri: str
    keep: int


@dataclass(frozen=True)
class SupervisorSettings:
    """What :mod:`hpcflow.supervisor` needs to run an attempt: built from the spec by
    :func:`hpcflow.slurm.render.supervisor_config`, written into the batch script as JSON
    (:meth:`encode`), read back by the supervisor (:meth:`decode`). The defaults here are the
    only ones: a member absent from the JSON (a batch script of another protocol version, which
    the supervisor then ends as version skew) reads as its default.

    Attributes:
        protocol_version: :data:`hpcflow.protocol.PROTOCOL_VERSION` the script was rendered for.
        ntasks, step_nodes: the step's ranks and nodes.
        max_requeues, max_preemptions: the requeue budgets (``preemption.*``).
        requeue_allowed: ``preemption.requeue``.
        resilience: the ``resilience`` block is on; then ``max_in_job_restarts``,
            ``max_failures`` and ``exclude_after`` are its bounds (0 without it).
        program_protocol: ``program.protocol`` (``auto``, ``requeue``, ``handles_signal``).
        launcher: ``srun`` or ``torchrun``.
        requeue_margin_s: seconds before the deadline the program is stopped.
        term_grace_s: seconds from TERM to KILL when the supervisor stops the program.
        signal: the warning signal's name (``USR1``).
        signal_lead_s: ``preemption.signal_lead_s`` (the batch script's ``--signal``).
        time_limit_s: the job's time limit in seconds (the deadline without
            ``SLURM_JOB_END_TIME``).
        hpcflow_python: the interpreter that runs hpcflow's own processes.
        env: the spec's settings every rank gets (:class:`SpecEnv`; the ranks' whole
            environment is :class:`StepEnv`).
        step: the step's command (None in a config without one: the supervisor fails when it
            would start the step, as it always did).
        watchdog: the hang watchdog's settings, or None without it.
        mirror: the S3 mirror's settings, or None without it.
        spot_watch_nodes: nodes to run a spot watcher on (0: none).
        warm_standby: steps get a warm standby (``resilience.warm_standby``).
        allow_shared_dir: the job was submitted with ``--allow-shared-dir``.
        auto_resume: the step runs as ``srun --auto-resume=1`` (``hyperpod.auto_resume``):
            SageMaker HyperPod replaces a faulty node and reruns the step, and the supervisor's
            rules leave node faults to it (:func:`hpcflow.supervisor.rules.after_failed_step`).
    """

    protocol_version: int | None = None
    ntasks: int = 0
    step_nodes: int = 0
    max_requeues: int = 0
    max_preemptions: int = 0
    requeue_allowed: bool = False
    resilience: bool = False
    program_protocol: str = "auto"
    launcher: str = "srun"
    requeue_margin_s: int = 0
    term_grace_s: int = 0
    signal: str = "USR1"
    signal_lead_s: int = 0
    time_limit_s: int = 0
    hpcflow_python: str = "python3"
    env: SpecEnv = field(default_factory=SpecEnv)
    step: StepSettings | None = None
    watchdog: WatchdogSettings | None = None
    mirror: MirrorSettings | None = None
    spot_watch_nodes: int = 0
    warm_standby: bool = False
    max_in_job_restarts: int = 0
    max_failures: int = 0
    exclude_after: int = 0
    allow_shared_dir: bool = False
    auto_resume: bool = False

    def encode(self) -> dict[str, Any]:
        """The JSON form (what the batch script carries): every member, but the resilience
        bounds only with ``resilience``, and ``allow_shared_dir`` and ``auto_resume`` only when
        true."""
        out = asdict(self)
        out["env"] = self.env.variables()
        if self.step is not None:
            out["step"]["srun"] = list(self.step.srun)
            out["step"]["program"] = list(self.step.program)
        if self.watchdog is not None:
            out["watchdog"] = self.watchdog.encode()
        if not self.resilience:
            for name in ("max_in_job_restarts", "max_failures", "exclude_after"):
                del out[name]
        for name in ("allow_shared_dir", "auto_resume"):
            if not out[name]:
                del out[name]
        return out

    @classmethod
    def decode(cls, raw: Mapping[str, Any] | SupervisorSettings, *,
               required: tuple[str, ...] = ()) -> SupervisorSettings:
        """The settings of the JSON form ``raw`` (a settings object is returned as it is).

        Args:
            raw: the JSON form, or a part of it (a member left out takes its default).
            required: members that must be present (the supervisor's job requires
                :data:`REQUIRED_SETTINGS`, the limits its rules decide by).

        Raises:
            ValueError: a required member is missing, or a member is not of its kind, naming
                it and its value.
        """
        if isinstance(raw, SupervisorSettings):
            return raw
        if not isinstance(raw, Mapping):
            raise ValueError(f"the supervisor's settings are not a mapping: {raw!r:.80}")
        if missing := [name for name in required if name not in raw]:
            raise ValueError(f"the supervisor's settings lack {', '.join(missing)}")
        known = {f.name for f in fields(cls)}
        values: dict[str, Any] = {k: v for k, v in raw.items() if k in known}
        for name, kind in _SETTINGS_KINDS.items():
            if name in values and not fits(values[name], kind):
                raise ValueError(f"supervisor setting {name!r}: {values[name]!r:.80} is not "
                                 f"{kind.rstrip('?')}")
        if "env" in values:
            try:
                values["env"] = SpecEnv.decode(values["env"])
            except ValueError as exc:
                raise ValueError(f"supervisor setting 'env': {exc}") from None
        if "step" in values:
            values["step"] = _step(values["step"])
        if values.get("watchdog") is not None:
            try:
                values["watchdog"] = WatchdogSettings.decode(values["watchdog"])
            except ValueError as exc:
                raise ValueError(f"supervisor setting 'watchdog': {exc}") from None
        if values.get("mirror") is not None:
            values["mirror"] = MirrorSettings(str(values["mirror"].get("s3_uri", "")),
                                              int(values["mirror"].get("keep", 0)))
        return cls(**values)


#: The members a job's settings must have: the limits the supervisor's rules decide by.
REQUIRED_SETTINGS = ("ntasks", "step_nodes", "max_requeues", "requeue_allowed", "resilience")

#: The kinds of the supervisor's settings, checked by :meth:`SupervisorSettings.decode`.
_SETTINGS_KINDS = {
    "protocol_version": "int?", "ntasks": "count", "step_nodes": "count",
    "max_requeues": "count", "max_preemptions": "count", "requeue_allowed": "bool",
    "resilience": "bool", "program_protocol": "str", "launcher": "str",
    "requeue_margin_s": "count", "term_grace_s": "count", "signal": "str",
    "signal_lead_s": "count", "time_limit_s": "count", "hpcflow_python": "str", "env": "map",
    "step": "map", "watchdog": "map?", "mirror": "map?", "spot_watch_nodes": "count",
    "warm_standby": "bool", "max_in_job_restarts": "count", "max_failures": "count",
    "exclude_after": "count", "allow_shared_dir": "bool", "auto_resume": "bool",
}


def _step(raw: Mapping[str, Any]) -> StepSettings:
    torchrun = raw.get("torchrun")
    return StepSettings(
        srun=tuple(str(w) for w in raw.get("srun") or ()),
        torchrun=(TorchrunSettings(str(torchrun["python"]), int(torchrun["nproc_per_node"]))
                  if isinstance(torchrun, Mapping) and torchrun else None),
        program=tuple(str(w) for w in raw.get("program") or ()))
