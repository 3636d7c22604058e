"""PreemptionMonitor in one process, and the HPCFLOW_* variables."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest

from hpcflow.runtime.preemption import PreemptionMonitor
from hpcflow.runtime.runconfig import RunConfig


def test_usr1_sets_the_flag_and_the_old_handler_comes_back(tmp_path):
    seen = []
    previous = signal.signal(signal.SIGUSR1, lambda *_: seen.append("old"))
    try:
        with PreemptionMonitor(tmp_path / "flag") as monitor:
            assert not monitor.local_requested()
            assert not monitor.should_stop()
            os.kill(os.getpid(), signal.SIGUSR1)
            assert monitor.signalled and monitor.local_requested() and monitor.should_stop()
            assert seen == [], "the monitor's handler must replace the old one while open"
        os.kill(os.getpid(), signal.SIGUSR1)
        assert seen == ["old"]
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_flag_file_alone_requests_a_stop(tmp_path):
    flag = tmp_path / ".hpcflow" / "preempt-7-0.flag"
    with PreemptionMonitor(flag) as monitor:
        assert not monitor.should_stop()
        flag.parent.mkdir()
        flag.write_text("")
        assert monitor.local_requested() and monitor.should_stop()
        assert not monitor.signalled


def test_default_handler_is_restored_when_none_was_set_from_python():
    previous = signal.signal(signal.SIGUSR1, signal.SIG_DFL)
    try:
        PreemptionMonitor(None).close()
        assert signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_outside_the_main_thread_only_the_flag_file_counts(tmp_path):
    flag = tmp_path / "flag"
    flag.write_text("")
    result = {}

    def build():
        monitor = PreemptionMonitor(flag)
        result["installed"] = monitor._installed
        result["requested"] = monitor.local_requested()
        monitor.close()

    thread = threading.Thread(target=build)
    thread.start()
    thread.join()
    assert result == {"installed": False, "requested": True}


def test_run_config_reads_the_protocol_variables():
    config = RunConfig.from_environ({
        "HPCFLOW_RUN_DIR": "/runs/a",
        "HPCFLOW_CHECKPOINT_INTERVAL": "50",
        "HPCFLOW_CHECKPOINT_KEEP": "4",
        "HPCFLOW_PREEMPT_FLAG": "/runs/a/.hpcflow/preempt-9-1.flag",
        "HPCFLOW_PREEMPT_COMMITTED": "/runs/a/.hpcflow/committed-9-1.json",
        "HPCFLOW_MAX_REQUEUES": "3",
    })
    assert config == RunConfig(
        run_dir=Path("/runs/a"),
        checkpoint_dir=Path("/runs/a/checkpoints"),
        checkpoint_interval=50,
        checkpoint_keep=4,
        preempt_flag=Path("/runs/a/.hpcflow/preempt-9-1.flag"),
        preempt_committed=Path("/runs/a/.hpcflow/committed-9-1.json"),
        max_requeues=3,
    )


def test_run_config_defaults_mean_no_checkpoints():
    assert RunConfig.from_environ({}) == RunConfig()
    assert RunConfig().checkpoint_dir is None


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        pytest.param({"HPCFLOW_CHECKPOINT_INTERVAL": "ten"}, "HPCFLOW_CHECKPOINT_INTERVAL='ten'",
                     id="garbled-interval"),
        pytest.param({"HPCFLOW_CHECKPOINT_KEEP": "0"}, "HPCFLOW_CHECKPOINT_KEEP='0' must be",
                     id="keep-zero"),
        pytest.param({"HPCFLOW_CHECKPOINT_INTERVAL": "-5"}, "must be at least 0",
                     id="negative-interval"),
    ],
)
def test_run_config_rejects_bad_numbers(environ, message):
    with pytest.raises(ValueError, match=message):
        RunConfig.from_environ(environ)


def test_a_handler_installed_over_ours_is_reported_once(capsys):
    import signal as _signal

    from hpcflow.runtime.preemption import PreemptionMonitor

    monitor = PreemptionMonitor(None, _signal.SIGUSR2)
    try:
        assert monitor.handler_replaced() is False
        _signal.signal(_signal.SIGUSR2, lambda *_: None)  # a library takes the signal
        assert monitor.handler_replaced() is True
        assert monitor.handler_replaced() is True
        err = capsys.readouterr().err
        assert err.count("another handler replaced hpcflow's SIGUSR2 handler") == 1
    finally:
        monitor.close()


def test_the_preemption_signal_comes_from_the_environment():
    import signal as _signal

    from hpcflow.runtime.runconfig import RunConfig

    assert RunConfig.from_environ({}).preempt_signal == _signal.SIGUSR1
    assert RunConfig.from_environ({"HPCFLOW_PREEMPT_SIGNAL": "USR2"}).preempt_signal == _signal.SIGUSR2
    with pytest.raises(ValueError, match="HPCFLOW_PREEMPT_SIGNAL='TERM' must be USR1 or USR2"):
        RunConfig.from_environ({"HPCFLOW_PREEMPT_SIGNAL": "TERM"})
