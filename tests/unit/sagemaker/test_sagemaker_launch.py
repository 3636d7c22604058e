"""The container launcher starts one torchrun per host as SageMaker's toolkit does, from the
resource config, and says what is missing."""

from __future__ import annotations

import json

import pytest

from hpcflow.sagemaker.launch import main, torchrun_command


def test_torchrun_per_host_from_the_resource_config(tmp_path):
    config = tmp_path / "input" / "config"
    config.mkdir(parents=True)
    (config / "resourceconfig.json").write_text(json.dumps(
        {"current_host": "algo-2", "hosts": ["algo-1", "algo-2"], "network_interface_name": "eth0"}))
    command, extra = torchrun_command(4, ["python3", "-m", "pkg.train", "--lr", "1"],
                                      {"SAGEMAKER_BASE_DIR": str(tmp_path)}, python="/py")
    assert command == ["/py", "-m", "torch.distributed.run", "--nnodes", "2",
                       "--nproc-per-node", "4", "--node-rank", "1", "--master-addr", "algo-1",
                       "--master-port", "7777", "--no-python", "python3", "-m", "pkg.train",
                       "--lr", "1"]
    assert extra == {"SM_CURRENT_HOST": "algo-2", "SM_HOSTS": '["algo-1", "algo-2"]',
                     "SM_NETWORK_INTERFACE_NAME": "eth0", "TORCH_ELASTIC_SHUTDOWN_TIMEOUT": "110"}
    # what the container sets wins
    _, extra = torchrun_command(4, ["x"], {"SAGEMAKER_BASE_DIR": str(tmp_path),
                                           "TORCH_ELASTIC_SHUTDOWN_TIMEOUT": "60"})
    assert "TORCH_ELASTIC_SHUTDOWN_TIMEOUT" not in extra


def test_without_a_resource_config_it_says_so_and_exits_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path))
    monkeypatch.delenv("SM_CURRENT_HOST", raising=False)
    assert main(["--nproc-per-node", "1", "--", "python3", "x.py"]) == 2
    assert "resourceconfig.json" in capsys.readouterr().err


def test_a_program_is_required():
    with pytest.raises(SystemExit) as info:
        main(["--nproc-per-node", "2"])
    assert info.value.code == 2
