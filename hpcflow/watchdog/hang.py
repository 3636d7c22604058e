"""Deciding that a step hangs, from the ranks' heartbeats (docs/protocol.md, "Hangs and in-job
restarts"). Pure: the caller reads the files and the clock.

Each section has its own timeout (seconds without a new heartbeat):

- ``startup`` (joining, restoring, up to the first step boundary) and ``end`` (leaving):
  ``startup_s``;
- ``checkpoint`` (a blocking save): ``max(checkpoint_s, factor x the longest save seen)``;
- ``step``: ``step_s`` when the spec sets it; else, once every rank has timed ``warmup_steps``
  steps, ``max(factor x p99 step time, step_floor_s)`` (the p99 is the largest of the ranks'
  own p99 over their last steps); before that warm-up, ``startup_s``.

A rank is stale when its last heartbeat is older than its section's timeout plus the heartbeat
interval (a rank writes at most once per interval inside a section). A rank that never wrote one
is stale ``startup_s`` after the first heartbeat of any rank.

A hang is handled in two stages (:func:`next_action`): when it is first found the stacks are
written and the hang is only suspected; the step is ended when it has lasted ``kill_after_s``
more, and a suspicion is cleared when every rank reports in time again.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from hpcflow.protocol import SECTION_CHECKPOINT, SECTION_STARTUP, SECTION_STEP


@dataclass(frozen=True)
class Timeouts:
    """The watchdog's settings (seconds): ``resilience.timeouts`` and
    ``resilience.heartbeat_interval_s`` of the job spec, passed by the batch script. They have no
    defaults here: the spec models (hpcflow.spec.job_resilience) are the one place they live.
    ``step_s`` is ``None`` when the step timeout is derived from the heartbeats."""

    startup_s: float
    checkpoint_s: float
    step_floor_s: float
    step_factor: float
    warmup_steps: int
    step_s: float | None
    interval_s: float
    kill_after_s: float


@dataclass(frozen=True)
class Hang:
    """A hang: ``first`` is the stale rank at the lowest step (then the oldest heartbeat; a hint,
    not proof), ``section``, ``timeout_s`` and ``step`` are its; ``ranks`` are every rank whose
    heartbeat is stale, ascending."""

    section: str
    ranks: list[int]
    first: int
    timeout_s: float
    step: int | None


def step_timeout(beats: Mapping[int, Mapping[str, Any]], t: Timeouts) -> float:
    """The step section's timeout in seconds for these heartbeats (see the module docstring)."""
    if t.step_s is not None:
        return t.step_s
    timed = [int(b.get("steps_timed") or 0) for b in beats.values()]
    p99s = [float(b["step_p99_s"]) for b in beats.values() if b.get("step_p99_s") is not None]
    if not timed or min(timed) < t.warmup_steps or not p99s:
        return t.startup_s
    return max(t.step_factor * max(p99s), t.step_floor_s)


def section_timeout(section: str, beats: Mapping[int, Mapping[str, Any]], t: Timeouts) -> float:
    """Seconds a rank in ``section`` may go without a heartbeat."""
    if section == SECTION_STEP:
        return step_timeout(beats, t)
    if section == SECTION_CHECKPOINT:
        saves = [float(b.get("save_max_s") or 0.0) for b in beats.values()]
        return max(t.checkpoint_s, t.step_factor * max(saves, default=0.0))
    return t.startup_s


def find_hang(beats: Mapping[int, Mapping[str, Any]], ntasks: int, now: float,
              armed_at: float, t: Timeouts) -> Hang | None:
    """The hang among ``ntasks`` ranks, or ``None`` while every rank reports in time.

    Args:
        beats: rank -> its last heartbeat (``section``, ``time`` in Unix seconds, ``step``,
            ``steps_timed``, ``step_p99_s``, ``save_max_s``); ranks may be missing.
        ntasks: the ranks expected (0..ntasks-1).
        now: Unix time in seconds.
        armed_at: Unix time of the first heartbeat seen from any rank.
        t: the timeouts.
    """
    stale: list[tuple[float, int, str, float, int | None]] = []
    for rank in range(ntasks):
        beat = beats.get(rank)
        if beat is None:
            if now - armed_at > t.startup_s + t.interval_s:
                stale.append((armed_at, rank, SECTION_STARTUP, t.startup_s, None))
            continue
        section = str(beat.get("section", SECTION_STARTUP))
        timeout = section_timeout(section, beats, t)
        seen = float(beat.get("time", 0.0))
        if now - seen > timeout + t.interval_s:
            step = beat.get("step")
            stale.append((seen, rank, section, timeout, int(step) if step is not None else None))
    if not stale:
        return None
    # The lowest step first, then the oldest heartbeat: a hint only, since a rank writes at most
    # once per interval and the ranks waiting for a stuck one stop reporting too.
    seen, first, section, timeout, step = min(stale, key=lambda s: (
        s[4] if s[4] is not None else -1, s[0], s[1]))
    return Hang(section=section, ranks=sorted(r for _, r, *_ in stale), first=first,
                timeout_s=timeout, step=step)


#: :func:`next_action`'s answers.
WAIT = "wait"
SUSPECT = "suspect"
CLEAR = "clear"
KILL = "kill"


def next_action(hang: Hang | None, suspected_since: float | None, now: float,
                kill_after_s: float) -> str:
    """What the watchdog does after one poll.

    Args:
        hang: :func:`find_hang`'s answer for this poll.
        suspected_since: Unix time (seconds) the current suspicion began, or None.
        now: Unix time in seconds.
        kill_after_s: ``resilience.timeouts.kill_after_s``.

    Returns:
        :data:`SUSPECT` (write the stacks, record the suspicion) for a new hang, or :data:`KILL`
        at once when ``kill_after_s`` is 0; :data:`KILL` (write the stacks again, end the step)
        once a suspicion has lasted ``kill_after_s``; :data:`CLEAR` when the ranks report in
        time again after a suspicion; else :data:`WAIT`.
    """
    if hang is None:
        return CLEAR if suspected_since is not None else WAIT
    if suspected_since is None:
        return KILL if kill_after_s <= 0 else SUSPECT
    return KILL if now - suspected_since >= kill_after_s else WAIT


def live_beats(beats: Mapping[int, Mapping[str, Any]],
               live_steps: Collection[str]) -> dict[int, Mapping[str, Any]]:
    """The heartbeats of ranks whose Slurm step still runs (``slurm_step_id`` among
    ``live_steps``, the job's running steps as ``squeue --steps`` lists them); a heartbeat without
    a step id (a program not under srun) is kept.

    Under SageMaker HyperPod's auto-resume (``srun --auto-resume=1``) a step whose node failed
    ends while its srun lives on: HyperPod replaces the node and runs the step again (AWS,
    "Automatic node recovery and auto-resume", https://docs.aws.amazon.com/sagemaker/latest/dg/
    sagemaker-hyperpod-resiliency-slurm-auto-resume.html). The heartbeats its ranks left say
    nothing of the run to come: judged, they would end that run as a hang.
    """
    return {rank: beat for rank, beat in beats.items()
            if not beat.get("slurm_step_id") or str(beat["slurm_step_id"]) in live_steps}


def first_beat_s(beats: Mapping[int, Mapping[str, Any]]) -> float:
    """Unix time (seconds) of the oldest of ``beats`` (not empty): the watchdog's ``armed_at``
    for the ranks of a step run it first sees."""
    return min(float(b.get("time", 0.0)) for b in beats.values())
