"""The ``resilience`` block of a job spec: hang detection and in-job restarts
(docs/protocol.md, "Hangs and in-job restarts"). It is on by default, with these defaults;
``resilience: false`` turns it off (the supervisor then runs one step per attempt);
``resilience: null`` is refused (:func:`resilience_switch`).

The defaults are chosen with false alarms in mind. A step that goes quiet for a minute gets its
ranks' stacks written (cheap, and harmless if it was only a long evaluation); the step is ended
only if it stays quiet for ``kill_after_s`` more: ten minutes in all, the default timeout of a
``torch.distributed`` NCCL process group (``init_process_group``'s docstring: "10 minutes for
NCCL"), past which NCCL aborts the ranks anyway. A program that never sends a heartbeat (it
does not use ``hpcflow.runtime.Run``) is never judged, and a step is restarted only from a
checkpoint that hpcflow's runtime committed."""

from __future__ import annotations

import os
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, WrapSerializer, model_validator

from hpcflow.pycommand import PYTHON_NAME_RE, STANDBY_PYTHON_OPTIONS, split_python_options
from hpcflow.spec.job_fields import MODULE_RE, SpecModel, StrictInt
from hpcflow.spec.numbers import bounded_float

#: A day: no section of a sane job waits longer without a heartbeat.
MAX_TIMEOUT_S = 86_400
#: Restarts within one allocation, and failures over the whole job: far above any useful count.
MAX_RESTARTS = 1000
#: Spare nodes of one job: far above any useful count (sbatch --nodes is nodes + spare_nodes).
MAX_SPARE_NODES = 1000


class TimeoutsSpec(SpecModel):
    """Seconds a rank may go without a heartbeat in each section before the step counts as hung."""

    startup_s: StrictInt = Field(
        default=600, ge=1, le=MAX_TIMEOUT_S,
        description="Start-up and restore (until the first step boundary), and leaving.",
    )
    checkpoint_s: StrictInt = Field(
        default=600, ge=1, le=MAX_TIMEOUT_S,
        description="A blocking checkpoint save (at least step_factor x the longest save seen).",
    )
    step_s: StrictInt | None = Field(
        default=None, ge=1, le=MAX_TIMEOUT_S,
        description="A training step, fixed; default: derived from the observed step times.",
    )
    step_floor_s: StrictInt = Field(
        default=60, ge=1, le=MAX_TIMEOUT_S,
        description="Least derived step timeout: max(step_factor x p99 step time, this).",
    )
    step_factor: bounded_float(1.0, 100.0) = Field(  # type: ignore[valid-type]
        default=3.0,
        description="Multiple of the p99 step time (and of the longest save) that is a hang.",
    )
    warmup_steps: StrictInt = Field(
        default=10, ge=1, le=1_000_000,
        description="Steps every rank times before the step timeout is derived (startup_s until then).",
    )
    kill_after_s: StrictInt = Field(
        default=540, ge=0, le=MAX_TIMEOUT_S,
        description=(
            "Seconds a hang must last after its stacks are written before the step is ended "
            "(ranks that report again in that time clear it); 0: end it at once."
        ),
    )


class ResilienceSpec(SpecModel):
    """Hang detection and in-job restarts inside the allocation."""

    watchdog: bool = Field(
        default=True,
        description="Run the hang watchdog beside each step (ranks send heartbeats).",
    )
    heartbeat_interval_s: StrictInt = Field(
        default=2, ge=1, le=600,
        description="Least seconds between two heartbeats of a rank inside one section.",
    )
    timeouts: TimeoutsSpec = Field(default=TimeoutsSpec(), description="Per-section timeouts.")
    max_in_job_restarts: StrictInt = Field(
        default=2, ge=0, le=MAX_RESTARTS,
        description=(
            "New steps in the same allocation after a failed one (a rank died, a hang): from the "
            "latest committed checkpoint, or from the start when none is committed yet and a "
            "rank that had joined the protocol was lost (killed, hung)."
        ),
    )
    max_failures: StrictInt = Field(
        default=3, ge=0, le=MAX_RESTARTS,
        description=(
            "Failures over the whole job (all attempts) that may be restarted; counted apart "
            "from preemption.max_requeues."
        ),
    )

    spare_nodes: StrictInt = Field(
        default=0, ge=0, le=MAX_SPARE_NODES,
        description=(
            "Nodes allocated beside `nodes` (sbatch --nodes is their sum); each step runs on "
            "`nodes` of them, so a node excluded after rank failures is replaced in the "
            "allocation. Without a spare left the job is requeued without that node."
        ),
    )
    warm_standby: bool = Field(
        default=False,
        description=(
            "Keep a standby step beside the running one (srun --overlap, the same layout): "
            "ranks started ahead, with torch and the libraries the program loaded imported, "
            "that an in-job restart is handed to instead of a cold start. Costs one idle "
            "interpreter per rank (host memory, no GPU). Needs launcher: srun, and a program "
            "that is program.module or an argv [python, script.py, ...] or [python, -m, "
            "module, ...] (interpreter options: -u, -B, -O, -OO, -s, -E)."
        ),
    )
    exclude_after_failures: StrictInt = Field(
        default=2, ge=1, le=MAX_RESTARTS,
        description=(
            "Rank failures blamed on one node (its ranks died without an exit record) after "
            "which that node is excluded from the job's steps."
        ),
    )

    @model_validator(mode="after")
    def _timeouts_cover_heartbeats(self) -> ResilienceSpec:
        """A section's timeout must exceed the heartbeat interval, or every rank looks hung."""
        t = self.timeouts
        for name in ("startup_s", "checkpoint_s", "step_s", "step_floor_s"):
            value = getattr(t, name)
            if value is not None and value <= self.heartbeat_interval_s:
                raise ValueError(
                    f"timeouts.{name}={value} must exceed heartbeat_interval_s="
                    f"{self.heartbeat_interval_s}: a rank writes a heartbeat at most that often")
        return self


def resilience_switch(value: Any) -> Any:
    """The spec's ``resilience`` as written: ``false`` turns the block off (None), ``true`` keeps
    its defaults (``{}``); anything else is validated as the block.

    ``null`` is refused rather than taken for either: it is what YAML reads for a key with
    nothing after it (``resilience:`` with every line below it commented out, which reads like
    "the defaults") as much as for ``resilience: ~`` (which reads like "off"), and guessing wrong
    either way is silent: protection off when it was wanted, or a watchdog that ends a step the
    user meant to leave alone. Every other block of the spec refuses ``null`` too.

    Raises:
        ValueError: ``value`` is None; the message says how to write each meaning.
    """
    if value is None:
        raise ValueError(
            "null is not allowed here: write `resilience: false` to switch protection off "
            "(no hang watchdog, no in-job restarts), or leave the key out (or write "
            "`resilience: {}`) for the defaults")
    if value is False:
        return None
    if value is True:
        return {}
    return value


def _dump_switch(value: ResilienceSpec | None, handler: Any) -> Any:
    """A spec written back (``job.yaml``, a submission's fields) says ``false`` for the block
    switched off, the form :func:`resilience_switch` reads back, never ``null``."""
    return False if value is None else handler(value)


#: The job spec's ``resilience`` field type: read with :func:`resilience_switch`, written with
#: ``false`` for "off".
ResilienceSwitch = Annotated[ResilienceSpec | None, BeforeValidator(resilience_switch),
                             WrapSerializer(_dump_switch)]


def warm_standby_problems(*, launcher: str, container: bool, module: str | None,
                          argv: list[str] | None,
                          max_in_job_restarts: int) -> list[tuple[str, Any, str]]:
    """What a warm standby (:mod:`hpcflow.runtime.standby`) needs: srun's ranks (torchrun
    starts its own), no container (pyxis starts one per step), an in-job restart to take, and a
    Python program it can run itself: ``program.module``, or an argv ``[python, SCRIPT,
    ARGS...]`` or ``[python, -m, MODULE, ARGS...]`` (interpreter options of
    :data:`~hpcflow.pycommand.STANDBY_PYTHON_OPTIONS` allowed, e.g. hpcflow.launch's ``python -u
    -m submitit.core._submit``). Returns ``(field, value, message)`` of each problem."""
    field = "resilience.warm_standby"
    if launcher != "srun":
        return [(field, True, f"needs launcher: srun (launcher is {launcher!r}): "
                 "torchrun starts the ranks itself")]
    if container:
        return [(field, True, "cannot run with container: the container starts with each step")]
    if max_in_job_restarts == 0:
        return [(field, True, "needs resilience.max_in_job_restarts of at least 1 (it is 0): "
                 "the standby only ever takes an in-job restart")]
    if module is not None or argv is None:
        return []
    _, program = split_python_options(argv[1:])
    # ``-m`` takes a module name: ``-m --flag`` is an option where the module should be.
    runs = (program[:1] == ["-m"] and len(program) >= 2
            and bool(MODULE_RE.fullmatch(program[1]))) or (
        bool(program) and not program[0].startswith("-"))
    if not (PYTHON_NAME_RE.fullmatch(os.path.basename(argv[0])) and runs):
        return [(field, True, "needs a Python program: program.module, or program.argv "
                 "[python, script.py, ...] or [python, -m, module, ...] (a module name after "
                 "-m, not an option), with no interpreter "
                 f"option but {', '.join(STANDBY_PYTHON_OPTIONS)} (argv is {argv[:3]!r}...)")]
    return []
