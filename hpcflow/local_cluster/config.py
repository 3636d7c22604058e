"""The local emulated cluster's configuration: a pure description and the ``slurm.conf`` it
renders to.

Several slurmd daemons run on this one machine, each pretending to be a node (Slurm's
"multiple slurmd" mode: ``NodeName=n[1-2] NodeHostname=<host> Port=[6818-6819]`` and
``slurmd -N <name>``; slurm.conf(5), NodeName/Port). Facts used here:

- ``SlurmdParameters=config_overrides`` makes slurmd report the CPUs and memory of slurm.conf
  rather than the real hardware, so a 2-core machine can host 2 nodes x 4 tasks (slurm.conf(5)).
- ``AuthInfo=cred_expire=<s>`` also sets how long a requeued job waits before it may start again
  (default 120 s; slurm.conf(5), AuthInfo). The local cluster uses a short value so rehearsals of
  the requeue path do not sit idle for two minutes.
- No slurmdbd: ``sacct`` answers "accounting storage is disabled", as on many real clusters.
- The keys that differ between Slurm versions come from :mod:`hpcflow.slurm.versions` for the
  installed Slurm (``slurmctld -V``): process tracking without cgroups on every version, and on
  25.11 on ``SlurmctldParameters=enable_expedited_requeue``, so that ``--requeue=expedite`` can
  be rehearsed where it exists. A version not known (None) renders as 22.05.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from hpcflow.slurm.versions import TABLE, Version, keys_for

MARKER = "# written by hpcflow local-cluster; remove this line to keep hpcflow from changing it"


def default_state_dir() -> Path:
    """Where the cluster keeps its state, logs and pid records.

    ``$HPCFLOW_LOCAL_CLUSTER_DIR`` when set, else ``/var/lib/hpcflow/local-cluster`` (the cluster
    needs root anyway: slurmd runs as root to start tasks as any user).
    """
    env = os.environ.get("HPCFLOW_LOCAL_CLUSTER_DIR")
    return Path(env) if env else Path("/var/lib/hpcflow/local-cluster")


@dataclass(frozen=True)
class LocalClusterConfig:
    """Shape of the emulated cluster.

    Attributes:
        nodes: number of emulated nodes (one slurmd each).
        cpus_per_node: CPUs each node advertises (may exceed the real cores).
        memory_mb: memory each node advertises, in MiB.
        controller_port: TCP port of slurmctld on 127.0.0.1.
        node_base_port: first slurmd port; node i listens on ``node_base_port + i``.
        node_prefix: node names are ``<prefix>1 .. <prefix><nodes>``.
        requeue_delay_s: ``cred_expire``: how long a requeued job waits before it may start.
        state_dir: folder for state, spool, logs and pid records.
        hostname: this machine's short host name (the NodeHostname of every emulated node).
        partition: the default partition, on every node.
        extra_partitions: more partitions on the same nodes, not the default: ``dev`` is the
            one submitit's README example asks for (``slurm_partition="dev"``), so it runs here
            unchanged. A node in two partitions is listed once per partition by ``sinfo -N``.
        grace_time_s: GraceTime of the ``preemptible`` partition: seconds between Slurm's
            TERM and its requeue of a job that a job of ``urgent`` preempts.
        slurm_version: the installed Slurm's (major, minor, micro), which picks the keys that
            differ between versions (:mod:`hpcflow.slurm.versions`); None renders as 22.05.
    """

    nodes: int = 2
    cpus_per_node: int = 4
    memory_mb: int = 4000
    controller_port: int = 6817
    node_base_port: int = 6818
    node_prefix: str = "n"
    requeue_delay_s: int = 5
    state_dir: Path = field(default_factory=default_state_dir)
    hostname: str = "localhost"
    partition: str = "debug"
    extra_partitions: tuple[str, ...] = ("dev",)
    grace_time_s: int = 30
    slurm_version: Version | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.nodes <= 64:
            raise ValueError(f"nodes: {self.nodes} is not allowed; use 1 to 64")
        if self.cpus_per_node < 1:
            raise ValueError(f"cpus_per_node: {self.cpus_per_node} must be >= 1")
        if self.requeue_delay_s < 5:
            raise ValueError(f"requeue_delay_s: {self.requeue_delay_s} must be >= 5 (Slurm minimum)")

    @property
    def node_names(self) -> list[str]:
        """``["n1", "n2", ...]``."""
        return [f"{self.node_prefix}{i}" for i in range(1, self.nodes + 1)]

    @property
    def node_ports(self) -> list[int]:
        """The slurmd port of each node, in node order."""
        return [self.node_base_port + i for i in range(self.nodes)]

    @property
    def slurm_conf_path(self) -> Path:
        """Path of the generated slurm.conf inside the state dir."""
        return self.state_dir / "etc" / "slurm.conf"

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "log"

    @property
    def run_dir(self) -> Path:
        return self.state_dir / "run"


#: The preemptible partition and the one whose jobs preempt it (and every other partition's).
PREEMPTIBLE = "preemptible"
URGENT = "urgent"


def render_slurm_conf(cfg: LocalClusterConfig) -> str:
    """Render the ``slurm.conf`` for ``cfg``. Pure: no file is read or written.

    Returns:
        The file's text, starting with :data:`MARKER`.
    """
    s = cfg.state_dir
    keys = keys_for(cfg.slurm_version) if cfg.slurm_version is not None else TABLE[0]
    last = cfg.node_base_port + cfg.nodes - 1
    ports = f"[{cfg.node_base_port}-{last}]" if cfg.nodes > 1 else str(cfg.node_base_port)
    names = f"{cfg.node_prefix}[1-{cfg.nodes}]" if cfg.nodes > 1 else f"{cfg.node_prefix}1"
    lines = [
        MARKER,
        "ClusterName=hpcflow-local",
        f"SlurmctldHost={cfg.hostname}(127.0.0.1)",
        f"SlurmctldPort={cfg.controller_port}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=cred_expire={cfg.requeue_delay_s}",
        f"StateSaveLocation={s}/state",
        f"SlurmdSpoolDir={s}/spool/slurmd.%n",
        f"SlurmctldPidFile={s}/run/slurmctld.pid",
        f"SlurmdPidFile={s}/run/slurmd.%n.pid",
        f"SlurmctldLogFile={s}/log/slurmctld.log",
        f"SlurmdLogFile={s}/log/slurmd.%n.log",
        f"ProctrackType={keys.proctrack}",
        f"TaskPlugin={keys.task_plugin}",
        "SwitchType=switch/none",
        "MpiDefault=none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "SchedulerType=sched/backfill",
        # A scheduling pass every 2 s and a backfill pass every second (defaults: 60 s and 30 s):
        # on a two-node cluster they cost nothing, and a requeued job starts once its begin time
        # (cred_expire + 1 s) has passed instead of at the next pass (slurm.conf(5),
        # SchedulerParameters sched_interval, bf_interval).
        "SchedulerParameters=bf_interval=1,sched_interval=2",
        "SlurmdParameters=config_overrides",
        "ReturnToService=2",
        "JobRequeue=1",
        "MinJobAge=600",
        "KillWait=10",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=60",
        "InactiveLimit=0",
        "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none",
        "JobCompType=jobcomp/none",
        # Slurm's own preemption, to rehearse it (docs/protocol.md, "Slurm's own preemption"):
        # a job of the `urgent` partition takes the nodes of lower-tier partitions' jobs, which
        # get TERM and GraceTime seconds, then are requeued (slurm.conf(5) PreemptType,
        # PreemptMode, GraceTime; Slurm's preempt.html).
        "PreemptType=preempt/partition_prio",
        "PreemptMode=REQUEUE",
        # Slurm 25.11's expedited requeue (sbatch --requeue=expedite) is allowed only with this.
        *([keys.expedite_setting] if keys.expedite_setting else []),
        (
            f"NodeName={names} NodeHostname={cfg.hostname} NodeAddr=127.0.0.1 Port={ports} "
            f"CPUs={cfg.cpus_per_node} RealMemory={cfg.memory_mb} State=UNKNOWN"
        ),
        f"PartitionName={cfg.partition} Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
        *(f"PartitionName={name} Nodes=ALL Default=NO MaxTime=INFINITE State=UP"
          for name in cfg.extra_partitions if name != cfg.partition),
        (f"PartitionName={PREEMPTIBLE} Nodes=ALL Default=NO MaxTime=INFINITE State=UP "
         f"PriorityTier=1 PreemptMode=REQUEUE GraceTime={cfg.grace_time_s}"),
        f"PartitionName={URGENT} Nodes=ALL Default=NO MaxTime=INFINITE State=UP PriorityTier=10 "
        "PreemptMode=OFF",
        "",
    ]
    return "\n".join(lines)
