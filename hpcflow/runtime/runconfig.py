"""The ``HPCFLOW_*`` variables the batch script exports to the program (docs/protocol.md,
"Environment the batch script exports to the program"; the names live in :mod:`hpcflow.protocol`).
All are optional: without them a program trains without checkpoints and only reacts to SIGUSR1;
in a SageMaker training container the checkpoint folder defaults to the one SageMaker syncs.
No torch; the only files read are SageMaker's resource and checkpoint configs
(:mod:`hpcflow.runtime.sagemaker_env`).
"""

from __future__ import annotations

import math
import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import hpcflow.protocol as P
from hpcflow.protocol import EXIT_PREEMPTED
from hpcflow.runtime import sagemaker_env

__all__ = ["DEFAULT_KEEP", "EXIT_PREEMPTED", "RunConfig"]

DEFAULT_KEEP = 3


@dataclass(frozen=True)
class RunConfig:
    """Where the run keeps its state and how it hears about preemption.

    Attributes:
        run_dir: ``HPCFLOW_RUN_DIR``, the run directory, or ``None``.
        checkpoint_dir: ``HPCFLOW_CHECKPOINT_DIR``; defaults to ``<run_dir>/checkpoints`` when
            only the run directory is set; ``None`` = no checkpoints.
        checkpoint_interval: ``HPCFLOW_CHECKPOINT_INTERVAL``, save every N steps; 0 = only when
            preempted.
        checkpoint_interval_auto: ``HPCFLOW_CHECKPOINT_INTERVAL=auto``: the runtime chooses the
            interval (:mod:`hpcflow.runtime.auto_interval`); ``checkpoint_interval`` is then 0.
        failures_per_node_hour: ``HPCFLOW_FAILURES_PER_NODE_HOUR``, the failure rate ``auto``
            plans with, or ``None`` (:data:`hpcflow.protocol.DEFAULT_FAILURES_PER_NODE_HOUR`).
        checkpoint_keep: ``HPCFLOW_CHECKPOINT_KEEP``, committed checkpoints to keep (>= 1).
        preempt_flag: ``HPCFLOW_PREEMPT_FLAG``, the flag file the supervisor writes at the warning,
            or ``None``.
        preempt_committed: ``HPCFLOW_PREEMPT_COMMITTED``, the file rank 0 writes after committing
            the preemption checkpoint, or ``None``.
        max_requeues: ``HPCFLOW_MAX_REQUEUES``, for information only, or ``None``.
        joined_dir: ``HPCFLOW_JOINED_DIR``, where each rank announces that it installed its
            signal handler (the supervisor forwards USR1 only once every rank has), or ``None``.
        parallelism: ``HPCFLOW_PARALLELISM`` as ``{"dp", "pp", "tp"}`` (the job spec's
            ``parallelism``), or ``None`` when the spec gives none.
        preempt_signal: ``HPCFLOW_PREEMPT_SIGNAL``, the warning signal's number (SIGUSR1 by
            default).
        checkpoint_host_local: every host has its own checkpoint folder (a SageMaker job of
            several instances, :func:`hpcflow.runtime.sagemaker_env.host_local_checkpoints`):
            each host publishes its own files and rank 0 commits them all
            (:mod:`hpcflow.runtime.host_local`).
    """

    run_dir: Path | None = None
    checkpoint_dir: Path | None = None
    checkpoint_interval: int = 0
    checkpoint_interval_auto: bool = False
    failures_per_node_hour: float | None = None
    checkpoint_keep: int = DEFAULT_KEEP
    preempt_flag: Path | None = None
    preempt_committed: Path | None = None
    max_requeues: int | None = None
    joined_dir: Path | None = None
    parallelism: dict[str, int] | None = None
    preempt_signal: int = signal.SIGUSR1
    checkpoint_host_local: bool = False

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> RunConfig:
        """Read the ``HPCFLOW_*`` variables (unset or empty = default).

        Raises:
            ValueError: a number is garbled or out of range; the message names the variable.
        """
        run_dir = _path(environ, P.ENV_RUN_DIR)
        checkpoint_dir = _path(environ, P.ENV_CHECKPOINT_DIR)
        if checkpoint_dir is None and run_dir is not None:
            checkpoint_dir = run_dir / "checkpoints"
        if checkpoint_dir is None:  # in a SageMaker container: the folder SageMaker syncs
            checkpoint_dir = sagemaker_env.default_checkpoint_dir(environ)
        max_requeues = environ.get(P.ENV_MAX_REQUEUES, "").strip()
        parallelism = environ.get(P.ENV_PARALLELISM, "").strip()
        auto = environ.get(P.ENV_CHECKPOINT_INTERVAL, "").strip() == P.CHECKPOINT_INTERVAL_AUTO
        return cls(
            run_dir=run_dir,
            checkpoint_dir=checkpoint_dir,
            checkpoint_interval=0 if auto else _int(environ, P.ENV_CHECKPOINT_INTERVAL, 0,
                                                    minimum=0),
            checkpoint_interval_auto=auto,
            failures_per_node_hour=_rate(environ, P.ENV_FAILURES_PER_NODE_HOUR),
            checkpoint_keep=_int(environ, P.ENV_CHECKPOINT_KEEP, DEFAULT_KEEP, minimum=1),
            preempt_flag=_path(environ, P.ENV_PREEMPT_FLAG),
            preempt_committed=_path(environ, P.ENV_PREEMPT_COMMITTED),
            max_requeues=(
                _int(environ, P.ENV_MAX_REQUEUES, 0, minimum=0) if max_requeues else None
            ),
            joined_dir=_path(environ, P.ENV_JOINED_DIR),
            parallelism=P.parse_parallelism(parallelism) if parallelism else None,
            preempt_signal=_signal(environ),
            checkpoint_host_local=sagemaker_env.host_local_checkpoints(environ),
        )

    def overridden(self, *, checkpoint_dir: str | os.PathLike[str] | None = None,
                   interval_steps: int | None = None, keep: int | None = None) -> RunConfig:
        """A copy with the caller's own checkpoint folder, interval (steps) or number of
        checkpoints kept, where given (``Run.from_env``'s arguments win over the job's)."""
        changes: dict[str, Any] = {}
        if checkpoint_dir is not None:
            changes["checkpoint_dir"] = Path(checkpoint_dir)
        if interval_steps is not None:
            changes["checkpoint_interval"] = interval_steps
        if keep is not None:
            changes["checkpoint_keep"] = keep
        return replace(self, **changes) if changes else self


def _signal(environ: Mapping[str, str]) -> int:
    name = environ.get(P.ENV_PREEMPT_SIGNAL, "").strip() or "USR1"
    if name not in ("USR1", "USR2"):
        raise ValueError(f"{P.ENV_PREEMPT_SIGNAL}={name!r} must be USR1 or USR2")
    return int(getattr(signal, f"SIG{name}"))


def _rate(environ: Mapping[str, str], name: str) -> float | None:
    value = environ.get(name, "").strip()
    if not value:
        return None
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"{name}={value!r} is not a number") from None
    if not (math.isfinite(number) and number >= 0):
        raise ValueError(f"{name}={value!r} must be a finite number >= 0")
    return number


def _path(environ: Mapping[str, str], name: str) -> Path | None:
    value = environ.get(name, "").strip()
    return Path(value) if value else None


def _int(environ: Mapping[str, str], name: str, default: int, *, minimum: int) -> int:
    value = environ.get(name, "").strip()
    if not value:
        return default
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"{name}={value!r} is not an integer") from None
    if number < minimum:
        raise ValueError(f"{name}={value!r} must be at least {minimum}")
    return number
