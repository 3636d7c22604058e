"""The shapes of what crosses a process or file boundary, encoded and decoded in one place.

:mod:`hpcflow.protocol` names the words (events, tags, file names, variables); this package
gives the records that carry them their types. Every record is read from here
(``from hpcflow.contract import X``); each lives in the module of its idea:

- :mod:`~hpcflow.contract.bounded`: :func:`loads_bounded` (one JSON line, bounded in length and
  depth), :func:`is_number`, :func:`is_int` and the kinds of a member (:func:`fits`).
- :mod:`~hpcflow.contract.events`: :func:`decode_event` (one ledger event, docs/protocol.md,
  "Ledger": the common members and those each event word is read for, each of its kind,
  :data:`EVENT_FIELDS`; an event with a member of another kind is skipped whole),
  :func:`decode_events` (lines to events and a count of skips, :class:`Decoded`) and
  :func:`decode_tagged` (one tagged line rank 0 prints, :data:`TAG_FIELDS`).
- :mod:`~hpcflow.contract.settings`: the supervisor's settings, the batch script's config
  (:class:`SupervisorSettings`, with :class:`StepSettings`, :class:`TorchrunSettings`,
  :class:`WatchdogSettings`, :class:`MirrorSettings`).
- :mod:`~hpcflow.contract.env`: a rank's environment beside Slurm's: the spec's settings
  (:class:`SpecEnv`), everything the supervisor gives one step's ranks (:class:`StepEnv`), and
  the warm standby's go file (:class:`GoRecord`).

Versioned with :data:`hpcflow.protocol.PROTOCOL_VERSION`: a member added there is added here.
Standard library only: the supervisor, the watchdog and the in-job runtime import it.
"""

from hpcflow.contract.bounded import (
    KINDS,
    MAX_DEPTH,
    MAX_LINE_CHARS,
    MAX_MAGNITUDE,
    fits,
    is_int,
    is_number,
    loads_bounded,
)
from hpcflow.contract.env import GoRecord, SpecEnv, StepEnv
from hpcflow.contract.events import (
    COMMON_FIELDS,
    EVENT_FIELDS,
    TAG_FIELDS,
    Decoded,
    decode_event,
    decode_events,
    decode_tagged,
)
from hpcflow.contract.settings import (
    REQUIRED_SETTINGS,
    MirrorSettings,
    StepSettings,
    SupervisorSettings,
    TorchrunSettings,
    WatchdogSettings,
)

__all__ = ["COMMON_FIELDS", "EVENT_FIELDS", "KINDS", "MAX_DEPTH", "MAX_LINE_CHARS",
           "MAX_MAGNITUDE", "REQUIRED_SETTINGS", "TAG_FIELDS", "Decoded", "GoRecord",
           "MirrorSettings", "SpecEnv", "StepEnv", "StepSettings", "SupervisorSettings",
           "TorchrunSettings", "WatchdogSettings", "decode_event", "decode_events",
           "decode_tagged", "fits", "is_int", "is_number", "loads_bounded"]
