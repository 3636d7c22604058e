"""What a rank's environment holds beside Slurm's (docs/protocol.md, "Environment the program
gets"): the spec's settings (:class:`SpecEnv`), everything the supervisor gives one step's ranks
(:class:`StepEnv`), and the warm standby's go file, which hands a standby the new try's
variables (:class:`GoRecord`, written by :mod:`hpcflow.supervisor.standby`, read by
:mod:`hpcflow.runtime.standby`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hpcflow import protocol as P
from hpcflow.contract.bounded import is_number, loads_bounded

__all__ = ["GoRecord", "SpecEnv", "StepEnv"]


@dataclass(frozen=True)
class SpecEnv:
    """The job spec's settings every rank gets (docs/protocol.md, "Environment"): built once
    from the spec by :func:`hpcflow.slurm.render.spec_env`; their JSON form (in
    :class:`SupervisorSettings`, and SageMaker's container environment) is the variables
    themselves (:meth:`variables`, :meth:`decode`). None: not set.

    Attributes:
        checkpoint_interval: ``checkpoint.interval_steps``, or ``"auto"``
            (:data:`hpcflow.protocol.CHECKPOINT_INTERVAL_AUTO`).
        checkpoint_keep: ``checkpoint.keep``.
        max_requeues: ``preemption.max_requeues``.
        failures_per_node_hour: with ``auto``, the failure rate it plans with.
        parallelism: the spec's ``(dp, pp, tp)`` (dp may be -1).
    """

    checkpoint_interval: int | str | None = None
    checkpoint_keep: int | None = None
    max_requeues: int | None = None
    failures_per_node_hour: float | None = None
    parallelism: tuple[int, int, int] | None = None

    def variables(self) -> dict[str, str]:
        """The variables, by their names in :mod:`hpcflow.protocol` (the set members only)."""
        out = {P.ENV_CHECKPOINT_INTERVAL: self.checkpoint_interval,
               P.ENV_CHECKPOINT_KEEP: self.checkpoint_keep,
               P.ENV_MAX_REQUEUES: self.max_requeues,
               P.ENV_FAILURES_PER_NODE_HOUR: (None if self.failures_per_node_hour is None
                                              else repr(self.failures_per_node_hour)),
               P.ENV_PARALLELISM: (None if self.parallelism is None
                                   else P.format_parallelism(*self.parallelism))}
        return {name: str(value) for name, value in out.items() if value is not None}

    @classmethod
    def decode(cls, raw: Mapping[str, Any]) -> SpecEnv:
        """The settings of the variables ``raw`` (:meth:`variables`' form).

        Raises:
            ValueError: a variable hpcflow does not set here, or a value not of its form,
                naming it and its value.
        """
        values: dict[str, Any] = {}
        for name, text in raw.items():
            member = _SPEC_ENV.get(name)
            if member is None:
                raise ValueError(f"{name!r:.80} is not one of {', '.join(_SPEC_ENV)}")
            if not isinstance(text, str):
                raise ValueError(f"{name}={text!r:.80} is not text")
            values[member] = _spec_env_value(name, text)
        return cls(**values)


#: The variables of :class:`SpecEnv` and their members.
_SPEC_ENV = {P.ENV_CHECKPOINT_INTERVAL: "checkpoint_interval",
             P.ENV_CHECKPOINT_KEEP: "checkpoint_keep", P.ENV_MAX_REQUEUES: "max_requeues",
             P.ENV_FAILURES_PER_NODE_HOUR: "failures_per_node_hour",
             P.ENV_PARALLELISM: "parallelism"}


def _spec_env_value(name: str, text: str) -> Any:
    """The value of one :class:`SpecEnv` variable (ValueError naming it when not of its form)."""
    if name == P.ENV_PARALLELISM:
        p = P.parse_parallelism(text)
        return (p["dp"], p["pp"], p["tp"])
    if name == P.ENV_CHECKPOINT_INTERVAL and text == P.CHECKPOINT_INTERVAL_AUTO:
        return text
    if name == P.ENV_FAILURES_PER_NODE_HOUR:
        try:
            rate = float(text)
        except ValueError:
            rate = -1.0
        if not (is_number(rate) and rate >= 0):
            raise ValueError(f"{name}={text!r:.80} is not a number >= 0")
        return rate
    if not (text.isascii() and text.isdigit()):
        raise ValueError(f"{name}={text!r:.80} is not a whole number >= 0")
    return int(text)


@dataclass(frozen=True)
class StepEnv:
    """Every variable hpcflow's supervisor gives one step's ranks beside Slurm's
    (docs/protocol.md, "Environment"): built once per try by
    :func:`hpcflow.supervisor.commands.step_env`; each member meets its variable's name here
    only (:meth:`variables`).

    The batch script exports the rest itself, before any Python starts: the spec's own
    ``env`` (it may set what the supervisor's interpreter reads, and a value read from a file
    stays in the shell), the network preset, ``HPCFLOW_RUN_DIR``, ``HPCFLOW_CHECKPOINT_DIR`` and
    ``HPCFLOW_PREEMPT_SIGNAL`` (the supervisor reads the folders from them, an array element
    computes its own from ``SLURM_ARRAY_TASK_ID``, and the spot watcher reads all three from
    the script's text), and ``HPCFLOW_ATTEMPT_T0`` (the shell's own start).

    Attributes:
        spec: the spec's settings (:class:`SupervisorSettings`' ``env``).
        preempt_flag, preempt_committed, joined_dir: the attempt's protocol files.
        step_try: the in-job try of this step (0 first).
        error_dir: where a rank that raised leaves its exception.
        attempt_t0: after an in-job restart, the new step's start (Unix s; None on try 0,
            where the batch script's start stands).
        warm_modules: with a warm standby, where rank 0 lists the modules it loaded.
        heartbeat_dir, heartbeat_interval_s: with the watchdog, the step's heartbeat folder and
            the least seconds between two heartbeats.
    """

    spec: SpecEnv
    preempt_flag: str
    preempt_committed: str
    joined_dir: str
    step_try: int
    error_dir: str
    attempt_t0: float | None = None
    warm_modules: str | None = None
    heartbeat_dir: str | None = None
    heartbeat_interval_s: float | None = None

    def attempt_variables(self) -> dict[str, str]:
        """What every try of the attempt shares: the spec's settings and the attempt's files
        (the supervisor puts them in its own environment, which each step and a warm standby
        inherit)."""
        return {**self.spec.variables(), P.ENV_PREEMPT_FLAG: self.preempt_flag,
                P.ENV_PREEMPT_COMMITTED: self.preempt_committed,
                P.ENV_JOINED_DIR: self.joined_dir}

    def try_variables(self) -> dict[str, str]:
        """What this try adds (given to its step, or in a warm standby's go record)."""
        out = {P.ENV_STEP_TRY: str(self.step_try), P.ENV_ERROR_DIR: self.error_dir}
        if self.attempt_t0 is not None:
            out[P.ENV_ATTEMPT_T0] = f"{self.attempt_t0:.6f}"
        if self.warm_modules is not None:
            out[P.ENV_WARM_MODULES] = self.warm_modules
        if self.heartbeat_dir is not None:
            out[P.ENV_HEARTBEAT_DIR] = self.heartbeat_dir
            # As the spec gave it (2, not 2.0).
            out[P.ENV_HEARTBEAT_INTERVAL_S] = str(self.heartbeat_interval_s)
        return out

    def variables(self) -> dict[str, str]:
        """All of them: :meth:`attempt_variables` and :meth:`try_variables`."""
        return {**self.attempt_variables(), **self.try_variables()}


@dataclass(frozen=True)
class GoRecord:
    """The warm standby's go file (:func:`hpcflow.protocol.standby_go_name`): the supervisor
    hands the standby an in-job restart with the new try's environment, or tells it to quit.

    Attributes:
        env: the environment the standby's ranks take (docs/protocol.md, "Environment").
        quit: leave with status 0 (the standby is not needed).
    """

    env: Mapping[str, str] = field(default_factory=dict)
    quit: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The JSON form: ``{"quit": True}`` or ``{"env": {...}}``."""
        return {"quit": True} if self.quit else {"env": dict(self.env)}

    def encode(self) -> str:
        """The file's text (:meth:`as_dict` as JSON)."""
        return json.dumps(self.as_dict())

    @classmethod
    def decode(cls, text: str) -> GoRecord | None:
        """The record in ``text``, or None while it is not whole (the supervisor writes it
        atomically, so a partial read means another writer; it is read again)."""
        try:
            data = loads_bounded(text)
        except ValueError:
            return None
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: Any) -> GoRecord | None:
        """The record of a JSON form, or None when ``data`` is not one."""
        if not isinstance(data, Mapping):
            return None
        if data.get("quit"):
            return cls(env={}, quit=True)
        env = data.get("env")
        if not isinstance(env, dict):
            return None
        return cls(env={str(k): str(v) for k, v in env.items()}, quit=False)
