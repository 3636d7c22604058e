"""The shapes of what crosses a process or file boundary, encoded and decoded in one place.

:mod:`hpcflow.protocol` names the words (events, tags, file names); this module gives the lines
that carry them their types, so that a reader of a run directory (``status``, ``report``,
``plan goodput --from-job``, the supervisor reading its own ledger) gets a value of the type it
expects or a counted skip, never an exception:

- :func:`loads_bounded`: one JSON line, bounded in length and in nesting depth (``json.loads``
  of a line nested 100,000 levels deep raises ``RecursionError``, not ``ValueError``).
- :func:`decode_event`: one ledger event (docs/protocol.md, "The ledger"): the common members
  ``event``, ``time``, ``job_id``, ``restart`` and the members each event word is read for, each
  of its type (:data:`EVENT_FIELDS`); an event with a member of another type is skipped whole.
- :func:`decode_tagged`: one tagged line rank 0 prints (``hpcflow-step {...}``), the same way
  (:data:`TAG_FIELDS`): the *program* prints these, so any text may come.

Numbers: a boolean is never a number (``true`` is not ``1``), and a number is finite
(``1e400`` reads as infinity) and within :data:`MAX_MAGNITUDE`. Versioned with
:data:`hpcflow.protocol.PROTOCOL_VERSION`: a member added there is added here.

The supervisor's settings (:class:`SupervisorSettings`, with the step's, the watchdog's and the
S3 mirror's) are the batch script's config: one frozen record, written by
:func:`hpcflow.slurm.render.supervisor_config` and read by :mod:`hpcflow.supervisor`. The warm
standby's go file is :class:`GoRecord`, written by :mod:`hpcflow.supervisor.standby` and read by
:mod:`hpcflow.runtime.standby`.

Standard library only: the supervisor and the in-job runtime import it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from hpcflow import protocol as P

__all__ = ["EVENT_FIELDS", "MAX_DEPTH", "MAX_LINE_CHARS", "REQUIRED_SETTINGS", "TAG_FIELDS",
           "Decoded",
           "GoRecord", "MirrorSettings", "StepSettings", "SupervisorSettings", "TorchrunSettings",
           "WatchdogSettings", "decode_event", "decode_events", "decode_tagged", "is_int",
           "is_number", "loads_bounded"]

#: The deepest nesting a record line may have: an event is two levels deep (``first_failure``,
#: ``budgets``); a rank's error record one.
MAX_DEPTH = 16
#: The longest line decoded, in characters: an event is ~200 bytes, a rank's error record a few
#: KiB (its traceback is bounded by the runtime).
MAX_LINE_CHARS = 1024 * 1024
#: The largest magnitude a number may have: above any Unix time, step, byte count or exit
#: status a job writes, below where a float stops holding whole numbers exactly (2**53).
MAX_MAGNITUDE = 2**53


def loads_bounded(text: str | bytes, *, max_depth: int = MAX_DEPTH,
                  max_chars: int = MAX_LINE_CHARS) -> Any:
    """``json.loads(text)``, refusing a text longer than ``max_chars`` or nested deeper than
    ``max_depth`` (before the parser recurses: its ``RecursionError`` is caught too).

    Raises:
        ValueError: not JSON, too long or too deep.
    """
    if len(text) > max_chars:
        raise ValueError(f"longer than {max_chars} characters")
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    # Fast path: fewer openers than the bound cannot nest deeper than it.
    if text.count("[") + text.count("{") > max_depth and _depth(text) > max_depth:
        raise ValueError(f"nested deeper than {max_depth} levels")
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deep") from None


def _depth(text: str) -> int:
    """The deepest bracket nesting of ``text``, brackets inside JSON strings not counted (an
    upper bound for a text that is not JSON: the parser refuses it anyway)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_DEPTH * 4:
                    return deepest
        elif ch in "]}":
            depth -= 1
    return deepest


def is_number(value: Any) -> bool:
    """A JSON number hpcflow takes: an int or float, not a boolean, finite, at most
    :data:`MAX_MAGNITUDE` in magnitude."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and abs(value) <= MAX_MAGNITUDE)


def is_int(value: Any) -> bool:
    """A whole JSON number hpcflow takes (:func:`is_number`, and an ``int``)."""
    return isinstance(value, int) and is_number(value)


#: The kinds of member: a test of the value. ``?`` after a kind also allows null.
_KINDS = {
    "int": is_int,
    "count": lambda v: is_int(v) and v >= 0,
    "number": is_number,
    "str": lambda v: isinstance(v, str),
    "bool": lambda v: isinstance(v, bool),
    "list": lambda v: isinstance(v, list),
    "map": lambda v: isinstance(v, dict),
}

#: The members every ledger event has (:func:`hpcflow.ledger.event_line` writes them).
COMMON_FIELDS = {"event": "str", "time": "number", "job_id": "str", "restart": "count"}

#: Per event word, the members hpcflow's readers use and their kinds (a member that is absent
#: is fine: readers take their defaults; one of another kind skips the event). Text, lists,
#: mappings and flags may be null (a writer's "none": ``step_end``'s ``node`` and
#: ``first_failure`` are); numbers are null only where the protocol says so (``step``).
EVENT_FIELDS: dict[str, dict[str, str]] = {
    P.EVENT_ATTEMPT_START: {"nodelist": "str?", "budgets": "map?"},
    P.EVENT_SIGNAL: {"source": "str?", "signal": "str?", "cause": "str?"},
    P.EVENT_STEP_END: {"rc": "int", "ranks_exited": "count", "ranks_missing": "count",
                       "missing": "list?", "first_failure": "map?", "node": "str?"},
    P.EVENT_REQUEUE: {"by": "str?", "checkpoint": "bool?", "cause": "str?", "step": "int?",
                      "over_budget": "bool?"},
    P.EVENT_JOB_END: {"rc": "int", "reason": "str?"},
    P.EVENT_SPOT_NOTICE: {"action": "str?", "node": "str?", "notice_time": "int"},
    P.EVENT_NETWORK: {"summary": "str?", "problems": "list?", "fix": "str?", "stopped": "bool?"},
    P.EVENT_NODE_EXCLUDED: {"node": "str?", "failures": "count", "spare": "bool?"},
    P.EVENT_PROGRAM_ERROR: {"errors": "str?", "try": "count"},
    P.EVENT_STEP_RESTART: {"step": "int?", "try": "count"},
    P.EVENT_HANG: {"try": "count", "after_s": "number"},
    P.EVENT_HANG_SUSPECTED: {"try": "count", "step": "int?", "timeout_s": "number",
                             "stacks": "str?"},
    P.EVENT_HANG_CLEARED: {"try": "count", "after_s": "number"},
    P.EVENT_MIRROR_DONE: {"step": "int", "bytes": "count", "lag_s": "number"},
    P.EVENT_MIRROR_PULL: {"step": "int", "bytes": "count"},
}

#: Per tag rank 0 prints, the members the report reads and their kinds.
TAG_FIELDS: dict[str, dict[str, str]] = {
    P.TAG_STEP: {"step": "int", "step_time_s": "number"},
    P.TAG_RESUME: {"step": "int"},
    P.TAG_CHECKPOINT: {"save_s": "number", "failed": "bool", "step": "int?"},
    P.TAG_STARTUP: {},
}


def _fits(value: Any, kind: str) -> bool:
    if kind.endswith("?"):
        return value is None or _KINDS[kind[:-1]](value)
    return _KINDS[kind](value)


def _members_fit(obj: Mapping[str, Any], fields: Mapping[str, str]) -> bool:
    return all(name not in obj or _fits(obj[name], kind) for name, kind in fields.items())


def decode_event(obj: Any) -> dict[str, Any] | None:
    """The ledger event ``obj`` (a decoded JSON line), or None when it is not one.

    An event is a JSON object with an ``event`` word; its common members (:data:`COMMON_FIELDS`)
    and its event's members (:data:`EVENT_FIELDS`) must be of their kinds when present. A
    missing ``time`` or ``restart`` reads as 0 (what every reader took for it), and a whole
    ``job_id`` as its digits. An event word hpcflow does not know (a newer writer) is kept.
    """
    if not isinstance(obj, dict) or not isinstance(obj.get("event"), str):
        return None
    if is_int(obj.get("job_id")):
        obj["job_id"] = str(obj["job_id"])
    obj.setdefault("time", 0)
    obj.setdefault("restart", 0)
    if not _members_fit(obj, COMMON_FIELDS):
        return None
    if not _members_fit(obj, EVENT_FIELDS.get(obj["event"], {})):
        return None
    return obj


def decode_tagged(tag: str, payload: Any) -> dict[str, Any] | None:
    """A tagged line's JSON payload if it is an object whose members the report reads are of
    their kinds (:data:`TAG_FIELDS`); else None."""
    if not isinstance(payload, dict) or not _members_fit(payload, TAG_FIELDS.get(tag, {})):
        return None
    return payload


@dataclass(frozen=True)
class Decoded:
    """The events of some ledger lines, and how many lines were skipped.

    Attributes:
        events: the events that decoded, in line order.
        skipped: lines that were not a JSON object, too long or deep, or an event with a member
            of the wrong kind (a torn last line after a crash counts too).
    """

    events: list[dict[str, Any]]
    skipped: int


def decode_events(lines: Iterable[str], *, job_id: str | None = None) -> Decoded:
    """:func:`decode_event` of each line (blank lines ignored); with ``job_id``, that job's
    events only (an event of another job is not a skip)."""
    events: list[dict[str, Any]] = []
    skipped = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            event = decode_event(loads_bounded(line))
        except ValueError:
            event = None
        if event is None:
            skipped += 1
        elif job_id is None or event.get("job_id") == job_id:
            events.append(event)
    return Decoded(events, skipped)


# ---- The supervisor's settings: the batch script's config, one typed record ------------------

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
    """The hang watchdog beside each step (``resilience.watchdog``).

    Attributes:
        options: its command-line options (:func:`hpcflow.slurm.render.watchdog_options`).
        heartbeat_interval_s: seconds between a rank's heartbeats.
    """

    options: tuple[str, ...]
    heartbeat_interval_s: float


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
        env: the ranks' environment beside Slurm's (:func:`hpcflow.slurm.render.step_env`).
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
    env: Mapping[str, str] = field(default_factory=dict)
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
        out["env"] = dict(self.env)
        if self.step is not None:
            out["step"]["srun"] = list(self.step.srun)
            out["step"]["program"] = list(self.step.program)
        if self.watchdog is not None:
            out["watchdog"]["options"] = list(self.watchdog.options)
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
            if name in values and not _fits(values[name], kind):
                raise ValueError(f"supervisor setting {name!r}: {values[name]!r:.80} is not "
                                 f"{kind.rstrip('?')}")
        if "env" in values:
            values["env"] = {str(k): str(v) for k, v in values["env"].items()}
        if "step" in values:
            values["step"] = _step(values["step"])
        if values.get("watchdog") is not None:
            wd = values["watchdog"]
            interval = wd.get("heartbeat_interval_s", 0)
            if not is_number(interval):
                raise ValueError(f"supervisor setting 'watchdog.heartbeat_interval_s': "
                                 f"{interval!r:.80} is not a number")
            # Kept as JSON gave it (2 or 2.0): the ranks get its text.
            values["watchdog"] = WatchdogSettings(tuple(str(o) for o in wd.get("options", ())),
                                                  interval)
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


# ---- The warm standby's go record ---------------------------------------------------------

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
