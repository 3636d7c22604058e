"""The hpcflow jobs running on one Slurm node, as a spot watcher sees them.

A watcher runs as a system service, not as the user who submitted the job, so it cannot use the
user's job index. It asks Slurm instead: ``squeue`` lists the running jobs that have this node
in their allocation, and ``scontrol write batch_script <job> -`` prints the script Slurm stored
at submission (scontrol(1), "write batch_script"). A script rendered by hpcflow exports the run
directory (``HPCFLOW_RUN_DIR``) and names the warning signal (``HPCFLOW_PREEMPT_SIGNAL``, the
spec's ``preemption.signal``); a job whose script has neither is not an hpcflow job and is left
alone. The signal goes to the batch shell only, as Slurm's own ``--signal=B:`` warning does
(``scancel --signal=SIG --batch``, scancel(1)).

The job's owner, whose uid and gid the watcher drops to before it touches the run directory,
comes from ``squeue --jobs=ID --format="%U %G"``: two numbers (squeue(1), "%U User ID", "%G
Group ID") that no text the user chose can reach. ``scontrol show job -o`` has no quoting, and
its ``JobName``, ``Comment``, ``WorkDir`` and ``StdOut`` are the user's own text: one that holds
`` UserId=v(1)`` prints a second ``UserId``. A record with ``UserId`` or ``GroupId`` other than
exactly once, or one that disagrees with squeue, leaves the run directory alone (the signal
still goes).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from hpcflow.errors import SlurmQueryError
from hpcflow.protocol import ENV_PREEMPT_SIGNAL, ENV_RUN_DIR
from hpcflow.slurm.client import Runner, SlurmClient, run_command
from hpcflow.slurm.parse import parse_scontrol_fields, pick_job_record

#: Signals hpcflow's batch script can trap as its warning (the spec's ``preemption.signal``).
SIGNALS = ("USR1", "USR2")
#: ``UserId``/``GroupId`` as ``scontrol show job`` prints them: ``name(number)``, or a bare number.
_ID_RE = re.compile(r"[^()\s]*\((\d+)\)|(\d+)")
#: ``squeue --format="%U %G"``: the job's uid and gid, two decimal numbers.
_OWNER_RE = re.compile(r"(\d+) (\d+)")


@dataclass(frozen=True)
class NodeJob:
    """A running hpcflow job.

    Attributes:
        job_id: the Slurm job id (``123``, or ``120_3`` for an array element).
        run_dir: its run directory (the state folder and ledger live under it).
        signal: the warning signal its batch script traps (``USR1`` or ``USR2``).
        restart: ``Restarts`` from ``scontrol show job`` (the attempt's ``SLURM_RESTART_COUNT``).
        uid: the job's owner, squeue's ``%U`` (None when Slurm's answers did not name one
            owner: then nothing in its run directory is touched).
        gid: the job's group, squeue's ``%G``.
        owner_error: why ``uid``/``gid`` are None ("" when they are set).
    """

    job_id: str
    run_dir: Path
    signal: str
    restart: int
    uid: int | None = None
    gid: int | None = None
    owner_error: str = ""


def parse_id(value: str | None) -> int | None:
    """The number of an ``scontrol show job`` id field: ``alice(1000)`` -> 1000 (a bare
    ``1000`` too); None when there is none."""
    match = _ID_RE.fullmatch((value or "").strip())
    return int(match.group(1) or match.group(2)) if match else None


def parse_batch_script(text: str) -> tuple[Path, str] | None:
    """The run directory and warning signal a batch script rendered by hpcflow exports.

    Returns:
        ``(run_dir, signal)``, or None when the script is not hpcflow's (no absolute
        ``HPCFLOW_RUN_DIR`` export, or no ``HPCFLOW_PREEMPT_SIGNAL`` of USR1/USR2). The last
        export of each wins, as in the shell (the template's own come after the spec's env).
    """
    found: dict[str, str] = {}
    for line in text.splitlines():
        if not line.startswith("export HPCFLOW_"):
            continue
        try:
            words = shlex.split(line)
        except ValueError:
            continue
        if len(words) == 2 and "=" in words[1]:
            name, value = words[1].split("=", 1)
            found[name] = value
    run_dir, signal = found.get(ENV_RUN_DIR, ""), found.get(ENV_PREEMPT_SIGNAL, "")
    if not run_dir.startswith("/") or signal not in SIGNALS:
        return None
    return Path(run_dir), signal


class NodeJobs:
    """Slurm's view of the jobs on one node.

    Args:
        runner: runs a command (see :func:`hpcflow.slurm.client.run_command`).
        timeout_s: per-command timeout in seconds.
    """

    def __init__(self, runner: Runner = run_command, *, timeout_s: float = 15.0) -> None:
        self._runner = runner
        self._timeout_s = timeout_s
        self._client = SlurmClient(runner, timeout_s=timeout_s)

    def _run(self, argv: list[str]) -> str:
        try:
            result = self._runner(argv, timeout_s=self._timeout_s)
        except FileNotFoundError:
            raise SlurmQueryError(f"{argv[0]} is not installed or not on PATH") from None
        except OSError as exc:
            raise SlurmQueryError(f"{' '.join(argv)}: {exc}") from None
        except Exception as exc:  # subprocess.TimeoutExpired and kin
            raise SlurmQueryError(f"{' '.join(argv)}: {exc}") from None
        if result.returncode != 0:
            tail = (result.stderr or "").strip().splitlines()[-3:]
            raise SlurmQueryError(f"(exit {result.returncode}): {' '.join(argv)}"
                                  + (f": {' / '.join(tail)}" if tail else ""))
        return result.stdout or ""

    def running(self, node: str) -> list[str]:
        """Ids of the running jobs whose allocation includes ``node`` (squeue(1) ``--nodelist``,
        ``--states=RUNNING``). ``%A`` gives each array element its own job id, the
        ``SLURM_JOB_ID`` its batch script names its notice file and ledger events after
        (``%i`` would print ``<job>_<task>``).

        Raises:
            SlurmQueryError: squeue failed.
        """
        out = self._run(["squeue", "--noheader", "--states=RUNNING", f"--nodelist={node}",
                         "--format=%A"])
        return [w for w in out.split() if w]

    def describe(self, job_id: str) -> NodeJob | None:
        """The job as an hpcflow job, or None when its batch script is not hpcflow's.

        Raises:
            SlurmQueryError: scontrol failed (the job may have just ended).
        """
        parsed = parse_batch_script(self._run(["scontrol", "write", "batch_script", job_id, "-"]))
        if parsed is None:
            return None
        fields = self._show_job(job_id)
        record = dict(fields)
        restarts = record.get("Restarts", "0")
        uid, gid, error = self._owner(job_id, fields)
        return NodeJob(job_id, parsed[0], parsed[1], int(restarts) if restarts.isdigit() else 0,
                       uid, gid, error)

    def _show_job(self, job_id: str) -> list[tuple[str, str]]:
        """Every field of the job's ``scontrol show job -o`` record, repeats kept ([] when
        Slurm has no record of that job)."""
        text = self._run(["scontrol", "show", "job", "-o", job_id])
        lines = [parse_scontrol_fields(line) for line in text.splitlines() if "=" in line]
        records = [dict(fields) for fields in lines]
        picked = pick_job_record(records, job_id)
        return next((f for f, r in zip(lines, records, strict=True) if r is picked), [])

    def _owner(self, job_id: str,
               fields: list[tuple[str, str]]) -> tuple[int | None, int | None, str]:
        """``(uid, gid, "")`` from squeue's numeric ``%U %G``, checked against the one
        ``UserId``/``GroupId`` of scontrol's record; ``(None, None, why)`` otherwise."""
        users = [v for k, v in fields if k == "UserId"]
        groups = [v for k, v in fields if k == "GroupId"]
        if not users or not groups:
            return None, None, "scontrol show job names no UserId/GroupId"
        if len(users) > 1 or len(groups) > 1:
            return None, None, (f"scontrol show job prints UserId {len(users)} times and GroupId "
                                f"{len(groups)} times (a job name, comment or path the user chose "
                                "holds 'UserId='/'GroupId=')")
        try:
            out = self._run(["squeue", "--noheader", f"--jobs={job_id}", "--format=%U %G"])
        except SlurmQueryError as exc:
            return None, None, f"squeue cannot name the job's owner ({exc})"
        match = _OWNER_RE.fullmatch(out.strip())
        if match is None:
            return None, None, f"squeue printed {out.strip()[:80]!r}, not the job's uid and gid"
        uid, gid = int(match.group(1)), int(match.group(2))
        if (parse_id(users[0]), parse_id(groups[0])) != (uid, gid):
            return None, None, (f"squeue names uid {uid} gid {gid}, scontrol show job "
                                f"UserId={users[0]} GroupId={groups[0]}")
        return uid, gid, ""

    def warn(self, job: NodeJob) -> None:
        """Send the job's warning signal to its batch shell (``scancel --signal=SIG --batch``),
        once: never by scancel's own retry (:meth:`SlurmClient.warn_batch`).

        Raises:
            SlurmTransitionState: Slurm could not signal the job now (tried again at the next
                poll, while the job still runs on the node).
            SlurmQueryError: scancel failed.
        """
        self._client.warn_batch(job.job_id, job.signal, patience_s=0)
