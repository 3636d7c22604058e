"""The local cluster's slurm.conf: what Slurm needs to emulate several nodes on one host."""

from pathlib import Path

import pytest

from hpcflow.local_cluster.config import MARKER, LocalClusterConfig, render_slurm_conf


def conf(**kw) -> dict[str, str]:
    cfg = LocalClusterConfig(state_dir=Path("/tmp/x"), hostname="box", **kw)
    text = render_slurm_conf(cfg)
    assert text.startswith(MARKER)
    out = {}
    for line in text.splitlines()[1:]:
        if line:
            key, _, value = line.partition("=")
            out[key] = value
    return out


def test_two_nodes_share_the_host_on_consecutive_ports():
    c = conf()
    assert c["NodeName"].startswith("n[1-2] NodeHostname=box NodeAddr=127.0.0.1 Port=[6818-6819]")
    assert "CPUs=4" in c["NodeName"]


def test_single_node_has_no_brackets():
    c = conf(nodes=1)
    assert c["NodeName"].startswith("n1 ") and "Port=6818 " in c["NodeName"]


def test_requeue_is_enabled_and_requeue_delay_is_short():
    c = conf(requeue_delay_s=15)
    assert c["JobRequeue"] == "1"
    assert c["AuthInfo"] == "cred_expire=15"
    # A requeued job starts within seconds of its begin time, not at the next 60 s pass.
    assert c["SchedulerParameters"] == "bf_interval=1,sched_interval=2"
    assert LocalClusterConfig(state_dir=Path("/tmp/x")).requeue_delay_s == 5


def test_per_node_files_use_the_node_name_pattern():
    c = conf()
    for key in ("SlurmdPidFile", "SlurmdSpoolDir", "SlurmdLogFile"):
        assert "%n" in c[key], key


@pytest.mark.parametrize("kw", [pytest.param({"nodes": 0}, id="no-nodes"),
                                pytest.param({"cpus_per_node": 0}, id="no-cpus"),
                                pytest.param({"requeue_delay_s": 1}, id="delay-below-slurm-min")])
def test_bad_shapes_are_refused(kw):
    with pytest.raises(ValueError):
        LocalClusterConfig(**kw)


def partitions(**kw) -> list[str]:
    text = render_slurm_conf(LocalClusterConfig(state_dir=Path("/tmp/x"), hostname="box", **kw))
    return [line for line in text.splitlines() if line.startswith("PartitionName=")]


PREEMPTION_PAIR = [
    "PartitionName=preemptible Nodes=ALL Default=NO MaxTime=INFINITE State=UP PriorityTier=1 "
    "PreemptMode=REQUEUE GraceTime=30",
    "PartitionName=urgent Nodes=ALL Default=NO MaxTime=INFINITE State=UP PriorityTier=10 "
    "PreemptMode=OFF",
]


def test_dev_partition_has_the_same_nodes_and_is_not_the_default():
    assert partitions() == [
        "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
        "PartitionName=dev Nodes=ALL Default=NO MaxTime=INFINITE State=UP",
        *PREEMPTION_PAIR,
    ]


def test_extra_partition_named_like_the_default_is_not_repeated():
    assert partitions(partition="dev") == [
        "PartitionName=dev Nodes=ALL Default=YES MaxTime=INFINITE State=UP", *PREEMPTION_PAIR]


def test_a_preemptible_partition_pair_rehearses_slurms_own_preemption():
    text = render_slurm_conf(LocalClusterConfig(state_dir=Path("/tmp/x"), grace_time_s=45))
    assert "PreemptType=preempt/partition_prio\nPreemptMode=REQUEUE\n" in text
    assert "PartitionName=preemptible " in text and " GraceTime=45\n" in text
