"""The public API a training loop adopts to join hpcflow's preemption protocol (docs/protocol.md).

A few lines around any loop (plain PyTorch, DDP, FSDP2, tensor or pipeline parallel)::

    from hpcflow.runtime import Run

    with Run.from_env() as run:                 # process group joined, USR1 handler installed
        model, optim = build(run)
        state = {"model": model, "optim": optim, "sched": sched}
        step = run.restore(state)               # latest committed checkpoint, or 0
        while step < total_steps:
            train_one_step(...)
            step += 1
            run.step_done(step, state, {"loss": loss})   # interval save; on preemption: save,
                                                         # commit, leave every rank with 75

What each part does:

- :meth:`Run.from_env` installs the USR1 handler first (before anything slow), announces the rank
  to the job's supervisor in ``HPCFLOW_JOINED_DIR`` (only then does it forward USR1 to the
  step), and joins the process group from the Slurm or torchrun environment (gloo on CPU, NCCL
  on GPU).
- :meth:`Run.restore` removes partial checkpoints and loads the latest committed one into the
  objects of ``state`` (:mod:`hpcflow.runtime.appstate` says how each kind is saved).
- :meth:`Run.step_done` is the step boundary: the ranks agree (one all-reduce) whether anyone
  was asked to stop, save on the interval (in the background with ``async_save``), and on a stop
  save synchronously, commit, write ``HPCFLOW_PREEMPT_COMMITTED`` and raise :class:`Preempted`,
  which leaves the ``with`` block and the process with status 75 on every rank together.

Outside an hpcflow job (no ``HPCFLOW_*`` variables) the same code runs: a single process trains
without checkpoints unless ``checkpoint_dir`` is given, and still reacts to USR1.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from hpcflow.errors import CheckpointError, HpcflowError
from hpcflow.protocol import (
    SECTION_CHECKPOINT,
    SECTION_END,
    SECTION_STARTUP,
    SECTION_STEP,
    TAG_CHECKPOINT,
    TAG_RESUME,
    TAG_START,
    TAG_STARTUP,
    TAG_STEP,
    checkpoint_key_path,
)
from hpcflow.runtime import dist as hdist
from hpcflow.runtime import leaving
from hpcflow.runtime.async_guard import check_async
from hpcflow.runtime.auto_guard import interval_saved, make_auto
from hpcflow.runtime.env import DistEnv, dist_env_from
from hpcflow.runtime.heartbeat import Heartbeat
from hpcflow.runtime.leaving import Preempted
from hpcflow.runtime.lines import emit, log
from hpcflow.runtime.network import NetworkExpectation, check_network, start_nccl_log
from hpcflow.runtime.preemption import PreemptionMonitor
from hpcflow.runtime.runconfig import RunConfig
from hpcflow.runtime.standby import record_loaded_modules
from hpcflow.runtime.startup import StartupClock

__all__ = ["Preempted", "Run"]

class Run:
    """One rank's side of an hpcflow job. Build it with :meth:`from_env`.

    Attributes:
        env: this rank's place in the job (rank, world size, local rank, job id, restart count).
        config: the ``HPCFLOW_*`` settings the batch script exported.
        parallelism: the job spec's ``{"dp", "pp", "tp"}`` (dp may be -1), or ``None``.
        backend: ``"nccl"`` or ``"gloo"``.
        step: the last step reported to :meth:`step_done` (or restored).
    """

    def __init__(self, env: DistEnv, config: RunConfig, monitor: PreemptionMonitor, backend: str,
                 *, async_save: bool = False, overlap: bool = False, rng: bool = True,
                 heartbeat: Heartbeat | None = None, startup: StartupClock | None = None) -> None:
        from hpcflow.runtime.checkpoint import CheckpointManager

        self.env = env
        self.config = config
        self.parallelism = config.parallelism
        self.monitor = monitor
        self.backend = backend
        self.async_save = async_save
        self.overlap = overlap
        self.rng = rng
        self.step = 0
        self._last_saved: int | None = None
        self._done = False  # the final checkpoint is committed and the done record written
        self._async_pending: int | None = None  # a background save not yet known committed
        self._last_boundary = time.monotonic()
        self.heartbeat = heartbeat  # only under a resilience block (HPCFLOW_HEARTBEAT_DIR)
        self.startup = startup or StartupClock(None, None)  # hpcflow-startup at the first step
        self.started_wall = time.time()  # Unix time; checkpoint.interval: auto measures from it
        self.first_step_wall: float | None = None
        self.auto = make_auto(env, config)  # checkpoint.interval: auto, else None
        self.ckpt = None
        if config.checkpoint_dir is not None:
            self.ckpt = CheckpointManager(
                config.checkpoint_dir, keep=config.checkpoint_keep,
                interval_steps=config.checkpoint_interval,
                extra_record={"job_id": env.job_id, "restart_count": env.restart_count,
                              "parallelism": config.parallelism},
                host=(env.node_rank, env.local_rank) if config.checkpoint_host_local else None,
                key_file=None if config.run_dir is None else checkpoint_key_path(config.run_dir),
            )

    # ---- construction

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        checkpoint_dir: str | os.PathLike[str] | None = None,
        interval_steps: int | None = None,
        keep: int | None = None,
        async_save: bool = False,
        overlap: bool = False,
        timeout_s: float = hdist.DEFAULT_TIMEOUT_S,
        join_process_group: bool = True,
        torch_env: bool = False,
        rng: bool = True,
    ) -> Run:
        """Join the job: install the USR1 handler, announce the rank, join the process group.

        Collective: every rank calls it. Call it first, before building the model: a warning
        that arrives earlier still reaches the ranks through the flag file.

        Args:
            environ: the process environment (default ``os.environ``).
            checkpoint_dir: overrides ``HPCFLOW_CHECKPOINT_DIR`` (e.g. outside an hpcflow job).
            interval_steps: overrides ``HPCFLOW_CHECKPOINT_INTERVAL`` (save every N steps).
            keep: overrides ``HPCFLOW_CHECKPOINT_KEEP``.
            async_save: write interval saves in the background while training goes on (the
                preemption save is always synchronous).
            overlap: with ``async_save``, the copy into the staging buffers runs during the
                next step too; an optimizer's ``step`` waits for it (:mod:`hpcflow.runtime.overlap`).
            timeout_s: seconds a collective may wait for the other ranks.
            join_process_group: False leaves the process group to a framework that makes its
                own (Lightning); the agreement then uses whatever group is active.
            torch_env: also export torchrun's variables (``RANK``, ``WORLD_SIZE``,
                ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``; torch
                ``torchrun`` docs) from the Slurm ones, for libraries that read only those
                (Hugging Face accelerate).
            rng: save every rank's RNG streams with the state (False when the state keeps its
                own).

        Raises:
            ValueError: the Slurm, torchrun or ``HPCFLOW_*`` variables are garbled (the message
                names the variable).
            RuntimeError: the process group could not be joined.

        On a node where EFA is expected (``HPCFLOW_EFA_EXPECTED``), NCCL logs its network
        choice to a per-rank file and, after the first collective, rank 0 records the
        ``network`` ledger event; with ``network.require_efa`` a fall back to TCP sockets ends
        every rank here with status 78 (:mod:`hpcflow.runtime.network`).
        """
        environ = os.environ if environ is None else environ
        startup = StartupClock.from_environ(environ)
        startup.mark("from_env")
        env = dist_env_from(environ)
        config = RunConfig.from_environ(environ).overridden(
            checkpoint_dir=checkpoint_dir, interval_steps=interval_steps, keep=keep)
        monitor = PreemptionMonitor(config.preempt_flag, config.preempt_signal)
        monitor.announce(config.joined_dir, env.rank, environ.get("SLURMD_NODENAME"))
        heartbeat = Heartbeat.from_environ(environ, env.rank)
        if heartbeat is not None:
            heartbeat.beat(SECTION_STARTUP, 0)
        if torch_env:
            os.environ.update(env.torchrun_variables())
        expect = NetworkExpectation.from_environ(environ)
        if join_process_group:
            # Before the process group: NCCL reads these when it starts (NCCL user guide).
            nccl_log = start_nccl_log(environ, config.run_dir, env) if expect else None
            backend = hdist.init_distributed(env, timeout_s=timeout_s)
            if expect is not None:
                check_network(env, config.run_dir, expect, nccl_log)
        else:
            backend = hdist.default_backend()
        emit(env, TAG_START, {
            "world_size": env.world_size, "launcher": env.launcher, "backend": backend,
            "job_id": env.job_id, "restart_count": env.restart_count,
        })
        startup.mark("joined")
        return cls(env, config, monitor, backend, async_save=async_save,
                   overlap=async_save and overlap, rng=rng, heartbeat=heartbeat, startup=startup)

    # ---- the loop's three calls

    def restore(self, state: Mapping[str, Any],
                before_load: Callable[[int], None] | None = None) -> int:
        """Remove partial checkpoints and load the latest committed one into ``state``.

        Collective. The RNG streams are restored when the world size is the one that saved them.

        Args:
            state: name -> model, optimizer, scheduler, sampler, ... (see
                :mod:`hpcflow.runtime.appstate`). Load happens in place.
            before_load: called on every rank with the step about to be loaded, before the
                load (e.g. to look at the saved layout with a small probe load of ``run.ckpt``).

        Returns:
            The number of steps the checkpoint holds (the step to report next is this + 1), or
            0 when there is nothing to resume from (or no checkpoint directory).

        Raises:
            CheckpointError: a committed checkpoint could not be read into ``state`` (e.g. a key
                is missing from it); raised on every rank.
            TypeError, ValueError: ``state`` holds an object hpcflow cannot save.
        """
        self.startup.mark("restore")
        step = self._restore(state, before_load)
        self.startup.mark("restored")
        return step

    def _restore(self, state: Mapping[str, Any],
                 before_load: Callable[[int], None] | None) -> int:
        self._app(state)  # check the mapping before anything collective
        if self.ckpt is None:
            return 0
        for path in self.ckpt.clean_partial():
            log(self.env, f"removed partial checkpoint {path}")
        from hpcflow.runtime.restore import load_newest_sound

        latest = load_newest_sound(
            self.ckpt, self.env,
            lambda same_world: {"app": self._app(state, restore_rng=same_world)}, before_load)
        if latest is None:
            self._last_boundary = time.monotonic()
            return 0
        self._beat(SECTION_STEP)
        self.report_resume(latest)
        return latest

    def report_resume(self, step: int) -> None:
        """Rank 0 prints ``hpcflow-resume`` (a framework adapter resumed from ``step``)."""
        self.step = self._last_saved = step
        if self.auto is not None:
            self.auto.restarted = True
        emit(self.env, TAG_RESUME, {"step": step})
        self._last_boundary = time.monotonic()

    def report_step(self, step: int, metrics: Mapping[str, Any] | None = None) -> None:
        """Rank 0 prints ``hpcflow-step`` with the time since the previous boundary (local)."""
        now = time.monotonic()
        self.step = step
        if self.heartbeat is not None:
            self.heartbeat.step_time(now - self._last_boundary)
            self._beat(SECTION_STEP)
        emit(self.env, TAG_STEP, {"step": step, "step_time_s": now - self._last_boundary,
                                  **dict(metrics or {})})
        if self.auto is not None:
            self.auto.observe_step(step, now - self._last_boundary)
            if self.first_step_wall is None:
                self.first_step_wall = time.time()
        if (phases := self.startup.first_step()) is not None:
            emit(self.env, TAG_STARTUP, phases)
            if self.env.rank == 0:
                record_loaded_modules()
        self._last_boundary = now

    def step_done(self, step: int, state: Mapping[str, Any],
                  metrics: Mapping[str, Any] | None = None) -> None:
        """The step boundary after ``step`` completed steps (collective, every step).

        Reports the step (rank 0 prints ``hpcflow-step`` with ``step_time_s`` and ``metrics``),
        saves when the interval is due, and, when any rank was asked to stop, saves and commits
        the checkpoint of ``step`` and raises :class:`Preempted`.

        Cost: one all-reduce of one integer and one ``stat`` of the flag file; a save when due;
        while a background save is being written, one more all-reduce of two integers (its
        failure is then known on every rank at the next boundary, reported, and the step saved
        again in line; a second failure raises).

        Raises:
            Preempted: the preemption checkpoint is committed; let it propagate.
            CheckpointError: a save failed (raised on every rank).
            HpcflowError: a stop was requested without a checkpoint directory (every rank).
        """
        self.report_step(step, metrics)
        stop = self.should_stop()
        if self._async_pending is not None and self.ckpt is not None:
            # A failed background save: reported, saved again (in line: nothing pending then).
            pending, self._async_pending = self._async_pending, None
            self._async_pending = check_async(
                self.ckpt, self.env, pending=pending, step=step,
                save_again=lambda: self.save(step, state, reason="retry"))
        if self.ckpt is not None:
            leaving.report_async(self.env, self.ckpt.poll())
        if stop and self.ckpt is None:
            raise HpcflowError("asked to stop for preemption, but no checkpoint directory is "
                               "set (HPCFLOW_CHECKPOINT_DIR or checkpoint_dir=)")
        if stop:
            self.save(step, state, reason="preempt")
            self.leave_preempted(step)
        if self.ckpt is not None and (self.auto.due(step) if self.auto is not None
                                      else self.ckpt.due(step)):
            started = time.monotonic()
            self.save(step, state, reason="interval", blocking=not self.async_save)
            if self.auto is not None:
                interval_saved(self.auto, self.env, step, time.monotonic() - started,
                               run_dir=self.config.run_dir, started_wall=self.started_wall,
                               first_step_wall=self.first_step_wall)
        self._last_boundary = time.monotonic()  # a save's time is reported as checkpointing

    def should_stop(self) -> bool:
        """Whether any rank was asked to stop (collective: one all-reduce). For loops that own
        their save (framework adapters); :meth:`step_done` calls it itself."""
        return self.monitor.should_stop()

    # ---- saving and leaving

    def save(self, step: int, state: Mapping[str, Any], *, reason: str = "manual",
             blocking: bool = True) -> None:
        """Save (and, when ``blocking``, commit) the checkpoint of ``step`` (collective); when
        not ``blocking``, with the run's ``overlap`` (:meth:`from_env`).

        Raises:
            CheckpointError: no checkpoint directory, or the save failed (on every rank).
        """
        if self.ckpt is None:
            raise CheckpointError("no checkpoint directory is set (HPCFLOW_CHECKPOINT_DIR or "
                                  "checkpoint_dir=)")
        if self._last_saved == step and self.ckpt.in_flight != step:
            return  # committed already
        started = time.monotonic()
        self._beat(SECTION_CHECKPOINT)
        self.ckpt.save(step, {"app": self._app(state)}, blocking=blocking, overlap=self.overlap)
        self._last_saved = step
        self._beat(SECTION_STEP)
        self._async_pending = None if blocking else step
        if blocking:
            save_s = time.monotonic() - started
            if self.heartbeat is not None:
                self.heartbeat.save_time(save_s)
            leaving.report_async(self.env, self.ckpt.poll())
            emit(self.env, TAG_CHECKPOINT,
                 {"step": step, "reason": reason, "save_s": save_s, "async": False})

    # ---- leaving

    def finish(self, state: Mapping[str, Any] | None = None) -> None:
        """End of training: wait for a background save and, given ``state``, save the final
        step if it is not saved yet (collective).

        Once the final step is committed, inside an hpcflow job rank 0 writes the done record
        (docs/protocol.md, "Ending kinds") and leaving the ``with`` block then ends every rank
        together with status 0 (a barrier, then exit without tearing the process group down):
        code after the ``with`` block does not run."""
        if self.ckpt is None:
            return
        leaving.report_async(self.env, self.ckpt.wait())
        if state is not None and self._last_saved != self.step:
            self.save(self.step, state, reason="final")
        if self._last_saved == self.step:
            self._done = leaving.write_done_and_meet(self.config.run_dir, self.env, self.step)

    def close(self, *, together: bool = True) -> None:
        """Wait for any background save, then leave the process group (idempotent).

        Args:
            together: meet the other ranks first (collective; :func:`leaving.teardown`).
                ``__exit__`` passes False after an exception, when other ranks may be gone.
        """
        self._beat(SECTION_END)
        leaving.teardown(self.env, self.ckpt, self.heartbeat, together=together)

    def __enter__(self) -> Run:
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        leaving.leave_block(self.config.run_dir, self.env, self.ckpt, step=self.step,
                            done=self._done, exc=exc, terminated=lambda: self.monitor.terminated)
        self.close(together=exc is None)

    def leave_preempted(self, step: int) -> None:
        """After the preemption checkpoint of ``step`` is committed (by :meth:`step_done`, or by
        a framework's own save in an adapter): rank 0 writes the commit file the batch script
        reads, every rank waits for it (collective), then :class:`Preempted` is raised.

        Raises:
            Preempted: always.
        """
        leaving.leave_preempted(self.env, self.config.preempt_committed, step)

    # ---- internals

    def _app(self, state: Mapping[str, Any], *, restore_rng: bool = True) -> Any:
        from hpcflow.runtime.appstate import AppState

        return AppState(state, self.env.rank, rng=self.rng, restore_rng=restore_rng)

    def _beat(self, section: str) -> None:
        if self.heartbeat is not None:
            self.heartbeat.beat(section, self.step)
