"""The warm standby beside the step (``resilience.warm_standby``; docs/protocol.md, "Warm
standby"): a second step of the same layout whose ranks have started and imported what the
program loaded, waiting (:mod:`hpcflow.runtime.standby`); an in-job restart is handed to it
instead of starting a new step cold.

- When: once rank 0 of the running step listed the modules it loaded by its first step
  (``warm-modules-<job>-<restart>``), or :data:`START_AFTER_S` after the step's start for a
  program that never lists them (one that does not use hpcflow's runtime). Not before: on a
  small node its imports would slow the step's own start-up.
- Hand-over: the new try's environment goes into the standby's go file, and the standby step
  gets :data:`~hpcflow.runtime.standby.WAKE_SIGNAL` (``scancel --signal=URG <job>.<step>``,
  the step id its rank 0 wrote once ready). The standby's srun becomes the step.
- Not used: after a node was excluded (its layout no longer matches), when it has ended (a
  lost node, an interpreter that cannot import hpcflow), or when the job ends: then it is told
  to quit (``{"quit": true}`` and the wake-up), so it leaves with status 0 and nothing in the
  job log.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hpcflow import fsutil
from hpcflow import protocol as P
from hpcflow.contract import GoRecord, SupervisorSettings
from hpcflow.pycommand import split_python_options
from hpcflow.supervisor import facts

__all__ = ["START_AFTER_S", "Standby", "standby_argv", "standby_due"]

#: Seconds after a step's start at which a standby starts when the program lists no modules.
START_AFTER_S = 30.0
#: Seconds a standby told to quit has to leave before its srun is ended.
QUIT_WAIT_S = 5.0


def standby_argv(cfg: Mapping[str, Any] | SupervisorSettings, *, exclude: Sequence[str], go_file: Path,
                 modules_file: Path) -> list[str]:
    """The standby step's command: the step's own srun options with ``--overlap`` (it shares the
    running step's CPUs, memory and GPUs; srun(1), Slurm >= 21.08) and ``exclude``, then the
    program's interpreter running :mod:`hpcflow.runtime.standby` with the program's words.

    Args:
        cfg: the supervisor's settings; ``cfg.step.program`` is ``[python, -m, MODULE,
            ...]`` or ``[python, SCRIPT, ...]``, maybe with interpreter options such as ``-u``
            after ``python`` (:data:`hpcflow.pycommand.STANDBY_PYTHON_OPTIONS`; the spec
            validates it, ``resilience.warm_standby``), which the standby's interpreter gets.
        exclude: hosts the step avoids.
        go_file: the file the standby waits for.
        modules_file: the module list of the running step's rank 0.
    """
    step = SupervisorSettings.decode(cfg).step
    if step is None:
        raise ValueError("the supervisor's settings have no step")
    words = list(step.program)
    argv = ["srun", *step.srun, "--overlap"]
    if exclude:
        argv.append(f"--exclude={','.join(exclude)}")
    options, program = split_python_options(words[1:])
    # -P: the working folder (maybe shared) is not put first on sys.path, where a planted
    # hpcflow/ or torch.py would be imported ahead of the program (hpcflow.runtime.standby).
    return argv + [words[0], *options, "-P", "-m", "hpcflow.runtime.standby", "--go", str(go_file),
                   "--modules", str(modules_file), "--", *program]


def standby_due(elapsed_s: float, modules_listed: bool) -> bool:
    """Start the standby now? Once the running step's rank 0 listed its modules, or
    :data:`START_AFTER_S` seconds after the step's start."""
    return modules_listed or elapsed_s >= START_AFTER_S


class Standby:
    """One attempt's standby steps, one at a time.

    Args:
        cfg: the supervisor's settings.
        state: the attempt's protocol folder (``<run_dir>/.hpcflow/state``).
        job_id, restart: the attempt, naming the files.
        log: writes one line to the job log.
        popen: starts the standby's srun and ``scancel`` (``subprocess.Popen``; the wake-up's
            scancel is not waited for).
    """

    def __init__(self, cfg: Mapping[str, Any] | SupervisorSettings, state: Path, *,
                 job_id: str, restart: int, log: Any, popen: Any = subprocess.Popen) -> None:
        self.cfg = SupervisorSettings.decode(cfg)
        self.state = state
        self.job_id = job_id
        self.restart = restart
        self.log = log
        self.popen = popen
        self.number = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.exclude: tuple[str, ...] = ()
        self.modules_file = state / P.warm_modules_name(job_id, restart)
        self.failed = False

    @property
    def go_file(self) -> Path:
        return self.state / P.standby_go_name(self.job_id, self.restart, self.number)

    @property
    def _step_file(self) -> Path:
        return self.go_file.with_name(self.go_file.name + P.STANDBY_STEP_SUFFIX)

    def maybe_start(self, *, elapsed_s: float, exclude: Sequence[str]) -> None:
        """Start a standby when none runs and one is due (:func:`standby_due`). A standby
        that ended before it was needed is said in the log at once, and not started again in
        this attempt: whatever ended it (an interpreter that cannot run it, a lost node) would
        end the next one too."""
        if self.proc is not None and self.proc.poll() is not None:
            self.log(f"the warm standby ended (status {self.proc.returncode}) before it was "
                     "needed; the next restart starts cold")
            self.proc, self.failed = None, True
        if self.proc is not None or self.failed:
            return
        if not standby_due(elapsed_s, self.modules_file.exists()):
            return
        self.number += 1
        for stale in (self.go_file, self._step_file):
            stale.unlink(missing_ok=True)
        argv = standby_argv(self.cfg, exclude=exclude, go_file=self.go_file,
                            modules_file=self.modules_file)
        try:
            self.proc = self.popen(argv, stdin=subprocess.DEVNULL)
        except OSError as exc:
            self.log(f"could not start the warm standby ({argv[0]}): {exc}; restarts start cold")
            self.failed = True
            return
        self.exclude = tuple(exclude)
        self.log(f"warm standby {self.number} started")

    def take(self, env: Mapping[str, str], exclude: Sequence[str]) -> subprocess.Popen[bytes] | None:
        """Hand the next try to the standby: returns its srun (the new step), or None (start
        cold) when there is none, it has ended, or its layout differs (``exclude``)."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is not None:
            self.log(f"the warm standby had ended (status {proc.returncode}): the restart "
                     "starts cold")
            self.proc = None
            self.failed = True  # it cannot start here: do not pay for it again
            return None
        if tuple(exclude) != self.exclude:
            self.log("the step now avoids other nodes than the warm standby: the restart starts "
                     "cold")
            self.quit()
            return None
        self._send(GoRecord(env=dict(env)).as_dict())
        self.proc = None
        self.log(f"the restart is handed to warm standby {self.number}")
        return proc

    def quit(self) -> None:
        """Tell a standby that is not needed to leave: the quit record and the wake-up, on which
        its ranks leave with status 0 and nothing in the job log, even while they import. Its
        srun is ended after :data:`QUIT_WAIT_S` if it is still there (srun then ends the step:
        srun(1), SIGNALS)."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            self._stop(proc)
        for number in range(1, self.number + 1):  # the files of this attempt's standbys
            go = self.state / P.standby_go_name(self.job_id, self.restart, number)
            for path in (go, go.with_name(go.name + P.STANDBY_STEP_SUFFIX)):
                path.unlink(missing_ok=True)

    def _stop(self, proc: subprocess.Popen[bytes]) -> None:
        self._send(GoRecord(quit=True).as_dict())
        try:
            proc.wait(timeout=QUIT_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.wait(timeout=QUIT_WAIT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def _send(self, record: Mapping[str, Any]) -> None:
        """Write the go file, then wake the standby step (once its rank 0 has written the step's
        id; scancel is not waited for)."""
        try:
            go = GoRecord.from_dict(record)
            if go is None:
                raise ValueError(f"not a go record: {record!r:.80}")
            fsutil.write_atomic(self.go_file, go.encode(), mode=0o600, durable=False)
        except OSError as exc:
            self.log(f"could not write {self.go_file}: {exc}")
            return
        step = (facts.read_small(self._step_file) or "").strip()
        if not step.isdigit():
            return  # not started yet: it finds the record at its first look
        try:
            self.popen(["scancel", "--signal=URG", f"{self.job_id}.{step}"],
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        except OSError:
            pass  # the standby looks at its go file again within its poll
