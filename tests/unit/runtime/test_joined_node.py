"""Each rank's joined file names its process and its node (docs/protocol.md, "Run directory"):
the batch script blames a rank that died without an exit record on that node."""

from __future__ import annotations

import os
import signal
import socket
import threading

from hpcflow.runtime.preemption import PreemptionMonitor


def test_the_joined_file_holds_the_pid_and_slurms_node_name(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURMD_NODENAME", "n7")
    monitor = PreemptionMonitor(None, signal.SIGUSR1)
    try:
        assert monitor.announce(tmp_path / "joined", 3) is True
        assert (tmp_path / "joined" / "3").read_text() == f"{os.getpid()} n7\n"
        assert monitor.announce(tmp_path / "given", 0, "gpu-12") is True
        assert (tmp_path / "given" / "0").read_text() == f"{os.getpid()} gpu-12\n"
    finally:
        monitor.close()


def test_outside_slurm_the_host_name_stands_for_the_node(tmp_path, monkeypatch):
    monkeypatch.delenv("SLURMD_NODENAME", raising=False)
    monitor = PreemptionMonitor(None, signal.SIGUSR1)
    try:
        assert monitor.announce(tmp_path, 0)
        assert (tmp_path / "0").read_text().split() == [str(os.getpid()), socket.gethostname()]
    finally:
        monitor.close()


def test_a_monitor_without_its_handler_announces_nothing(tmp_path):
    out = []
    thread = threading.Thread(
        target=lambda: out.append(PreemptionMonitor(None, signal.SIGUSR1).announce(tmp_path, 0)))
    thread.start()
    thread.join()
    assert out == [False] and not (tmp_path / "0").exists()
