"""The Slurm settings that differ between the versions users run (22.05 to 25.11), as one pure
table: a version -> the keys hpcflow writes or advises.

Users meet several versions: Debian 12's Slurm 22.05 (the local cluster here), Debian 13's
24.11, ParallelCluster 3.16's 25.11. Each row names the first version it holds for and its
source; :func:`keys_for` takes the last row at or below the version asked for. The version comes
from ``slurmctld -V`` / ``scontrol --version`` (``slurm 25.11.0``; Debian prints ``slurm-wlm
22.05.8``) or ``scontrol show config``'s ``SLURM_VERSION``: :func:`parse_version`.

Sources (Slurm's own repository, each version's tag: ``doc/man/man5/slurm.conf.5``,
``doc/man/man5/cgroup.conf.5``, ``doc/man/man1/sbatch.1``, ``RELEASE_NOTES``, and the source
where a man page and the code differ):

- user signal at preemption: ``SlurmctldParameters=preempt_send_user_signal`` in 22.05
  (slurm.conf(5) 22.05); ``PreemptParameters=send_user_signal`` from 23.02 (RELEASE_NOTES 23.02:
  "Moved the 'preempt_' options ... to PreemptParameters, and dropped the prefix"; the old
  spelling is still parsed but undocumented). 22.05 does not know ``PreemptParameters=
  send_user_signal``: every client then fails with "Parsing error at unrecognized key".
- process tracking: ``proctrack/linuxproc`` and ``task/none`` need no cgroup delegation (the
  local cluster runs in containers and VMs without it); both ship in every version 22.05-25.11
  (``src/plugins/proctrack/linuxproc``; slurm.conf(5) ProctrackType).
- cgroup.conf: ``CgroupAutomount`` is removed in 23.11 (RELEASE_NOTES 23.11: it "could cause a
  cgroup v2 system to be configured in a hybrid v1 and v2 system"); the ``cgroup/v1`` plugin
  is deprecated from 25.05 ("no new features will be added to it", cgroup.conf(5) 25.05);
  ``CgroupPlugin=autodetect`` is the default throughout.
- expedited requeue, 25.11: ``sbatch --requeue=expedite`` (the word the code parses,
  ``src/common/slurm_opt.c``: ``xstrcasecmp(arg, "expedite")``; sbatch(1) 25.11 spells it
  "expedited") makes a requeued batch job eligible at once and the highest priority, only with
  ``SlurmctldParameters=enable_expedited_requeue`` in slurm.conf (slurm.conf(5) 25.11;
  RELEASE_NOTES.md 25.11). ``scontrol requeue`` gains no option for it (scontrol(1) 25.11:
  ``Incomplete`` only).

hpcflow's rendered batch scripts say ``--requeue`` on every version, never ``--requeue=expedite``:
with it a batch script that exits non-zero is requeued, and held unless an Epilog failed
(``src/slurmctld/job_mgr.c`` 25.11, "holding expedited requeue ... as no epilogs failed"), so a
job that hpcflow ends as failed would sit held in the queue instead of ending ``FAILED``; and
the job would take the highest priority over everyone's. ``hpcflow doctor`` says whether a
cluster allows it (:attr:`SlurmKeys.expedite_setting`); hpcflow does not ask for it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["TABLE", "SlurmKeys", "keys_for", "parse_version"]

#: (major, minor, micro); 22.05.8 is ``(22, 5, 8)``.
Version = tuple[int, int, int]


@dataclass(frozen=True)
class SlurmKeys:
    """The version-dependent keys for one Slurm version.

    Attributes:
        since: the first version these keys hold for (a row of :data:`TABLE`).
        user_signal: the slurm.conf line that makes Slurm send a preempted job's batch shell its
            ``--signal`` at the start of GraceTime.
        proctrack: ``ProctrackType`` of the local cluster.
        task_plugin: ``TaskPlugin`` of the local cluster.
        cgroup_automount: whether cgroup.conf may say ``CgroupAutomount``.
        cgroup_v1_deprecated: whether the ``cgroup/v1`` plugin is deprecated.
        expedite_requeue: the sbatch option of an expedited requeue, or None before 25.11.
        expedite_setting: the slurm.conf line that allows it, or None before 25.11.
        sources: where each attribute's value comes from, by attribute name.
    """

    since: Version
    user_signal: str
    proctrack: str
    task_plugin: str
    cgroup_automount: bool
    cgroup_v1_deprecated: bool
    expedite_requeue: str | None
    expedite_setting: str | None
    sources: dict[str, str]


_S_2205 = "slurm.conf(5) 22.05: SlurmctldParameters preempt_send_user_signal"
_S_2302 = "RELEASE_NOTES 23.02 (preempt_ options moved to PreemptParameters); slurm.conf(5) 23.02"
_S_PROC = "slurm.conf(5) ProctrackType/TaskPlugin; src/plugins/proctrack/linuxproc in 22.05-25.11"
_S_AUTO = "cgroup.conf(5) 22.05-23.02 CgroupAutomount; RELEASE_NOTES 23.11: removed"
_S_V1 = "cgroup.conf(5) 25.05: cgroup/v1 plugin deprecated"
_S_EXP = ("sbatch(1) 25.11 --requeue[=expedited]; src/common/slurm_opt.c 25.11 parses "
          "'expedite'; slurm.conf(5) 25.11 SlurmctldParameters enable_expedited_requeue")


def _row(since: Version, *, automount: bool, v1_deprecated: bool, expedite: bool) -> SlurmKeys:
    old = since < (23, 2, 0)
    return SlurmKeys(
        since=since,
        user_signal=("SlurmctldParameters=preempt_send_user_signal" if old
                     else "PreemptParameters=send_user_signal"),
        proctrack="proctrack/linuxproc", task_plugin="task/none",
        cgroup_automount=automount, cgroup_v1_deprecated=v1_deprecated,
        expedite_requeue="--requeue=expedite" if expedite else None,
        expedite_setting="SlurmctldParameters=enable_expedited_requeue" if expedite else None,
        sources={"user_signal": _S_2205 if old else _S_2302, "proctrack": _S_PROC,
                 "task_plugin": _S_PROC, "cgroup_automount": _S_AUTO,
                 "cgroup_v1_deprecated": _S_V1, "expedite_requeue": _S_EXP,
                 "expedite_setting": _S_EXP})


#: One row per version where a key changes, oldest first.
TABLE: tuple[SlurmKeys, ...] = (
    _row((22, 5, 0), automount=True, v1_deprecated=False, expedite=False),
    _row((23, 2, 0), automount=True, v1_deprecated=False, expedite=False),
    _row((23, 11, 0), automount=False, v1_deprecated=False, expedite=False),
    _row((25, 5, 0), automount=False, v1_deprecated=True, expedite=False),
    _row((25, 11, 0), automount=False, v1_deprecated=True, expedite=True),
)


def parse_version(text: str | None) -> Version | None:
    """The version in ``slurmctld -V`` / ``scontrol --version`` output (``slurm 25.11.0``,
    ``slurm-wlm 22.05.8``), in ``SLURM_VERSION`` (``22.05.8``), or in a pre-release
    (``25.11.0-0rc1``); None when there is none. A two-part version (``23.02``) is micro 0."""
    m = re.search(r"(?<![\d.])(\d{2})\.(\d{1,2})(?:\.(\d+))?", text or "")
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def keys_for(version: Version | None) -> SlurmKeys:
    """The keys for ``version``: the last row of :data:`TABLE` at or below it. A version older
    than the table gets its first row; None (a version that could not be read) gets the newest
    row, the spelling current Slurm documents."""
    if version is None:
        return TABLE[-1]
    rows = [row for row in TABLE if row.since <= version]
    return rows[-1] if rows else TABLE[0]
