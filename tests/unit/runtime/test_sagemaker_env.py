"""Placing a rank inside a SageMaker training container: the resource config, the toolkit's
SM_* variables, torchrun's variables, the checkpoint folder SageMaker syncs; and a process
outside SageMaker is placed as before."""

from __future__ import annotations

import json

import pytest

from hpcflow.runtime.env import dist_env_from
from hpcflow.runtime.runconfig import RunConfig
from hpcflow.runtime.sagemaker_env import (
    MASTER_PORT,
    ResourceConfig,
    default_checkpoint_dir,
    host_local_checkpoints,
    parse_resource_config,
    rendezvous,
    resource_config_from,
    toolkit_variables,
)

CONFIG = {"current_host": "algo-2", "hosts": ["algo-1", "algo-2", "algo-3"],
          "current_instance_group": "homogeneousCluster", "network_interface_name": "eth0"}


@pytest.fixture
def container(tmp_path):
    """A container root laid out as /opt/ml is, with a 3-host resource config."""
    config = tmp_path / "opt" / "ml" / "input" / "config"
    config.mkdir(parents=True)
    (config / "resourceconfig.json").write_text(json.dumps(CONFIG))
    return {"SAGEMAKER_BASE_DIR": str(tmp_path / "opt" / "ml")}


def test_resource_config_file_places_one_rank_per_host(container):
    env = dist_env_from(container)
    assert (env.rank, env.world_size, env.node_rank, env.local_rank) == (1, 3, 1, 0)
    assert (env.master_addr, env.master_port, env.launcher) == ("algo-1", MASTER_PORT, "sagemaker")


def test_toolkit_variables_win_over_the_file_and_master_can_be_pinned(container):
    environ = {**container, "SM_CURRENT_HOST": "algo-1", "SM_HOSTS": '["algo-1", "algo-2"]',
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29511"}
    env = dist_env_from(environ)
    assert (env.rank, env.world_size, env.master_addr, env.master_port) == (0, 2, "127.0.0.1",
                                                                             29511)


def test_torchrun_under_the_toolkit_wins(container):
    environ = {**container, "RANK": "5", "WORLD_SIZE": "6", "LOCAL_RANK": "1",
               "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "2", "MASTER_ADDR": "algo-1",
               "MASTER_PORT": "7777"}
    env = dist_env_from(environ)
    assert (env.rank, env.node_rank, env.launcher) == (5, 2, "torchrun")


def test_outside_sagemaker_nothing_changes(tmp_path):
    environ = {"SAGEMAKER_BASE_DIR": str(tmp_path / "nothing-here")}
    assert resource_config_from(environ) is None
    assert dist_env_from({}, pick_port=lambda: 1234).launcher == "single"
    assert RunConfig.from_environ({}).checkpoint_dir is None


@pytest.mark.parametrize(("text", "says"), [
    pytest.param("{", "not JSON", id="not-json"),
    pytest.param("[]", "JSON object", id="a-list"),
    pytest.param('{"hosts": ["a"]}', "current_host", id="no-current-host"),
    pytest.param('{"current_host": "a", "hosts": []}', "hosts must be", id="no-hosts"),
    pytest.param('{"current_host": "c", "hosts": ["a", "b"]}', "not among hosts",
                 id="current-not-listed"),
    pytest.param('{"current_host": "a", "hosts": ["a", "a"]}', "twice", id="duplicate"),
])
def test_a_garbled_resource_config_is_refused_by_name(text, says):
    with pytest.raises(ValueError, match=says) as info:
        parse_resource_config(text, "/opt/ml/input/config/resourceconfig.json")
    assert "resourceconfig.json" in str(info.value)


def test_garbled_toolkit_hosts_are_named():
    with pytest.raises(ValueError, match="SM_HOSTS="):
        resource_config_from({"SM_CURRENT_HOST": "algo-1", "SM_HOSTS": "algo-1,algo-2"})


def test_checkpoint_folder_defaults_to_the_synced_one_in_a_container(container):
    assert default_checkpoint_dir(container) is not None
    config = RunConfig.from_environ(container)
    assert str(config.checkpoint_dir).endswith("opt/ml/checkpoints")
    assert config.checkpoint_host_local is True  # 3 hosts, each its own folder
    given = RunConfig.from_environ({**container, "HPCFLOW_CHECKPOINT_DIR": "/ckpt"})
    assert str(given.checkpoint_dir) == "/ckpt"


def test_one_host_shares_its_folder_with_itself(tmp_path):
    environ = {"SM_CURRENT_HOST": "algo-1", "SM_HOSTS": '["algo-1"]',
               "SAGEMAKER_BASE_DIR": str(tmp_path)}
    assert host_local_checkpoints(environ) is False
    assert RunConfig.from_environ(environ).checkpoint_host_local is False


def test_rendezvous_refuses_a_bad_port():
    config = ResourceConfig("algo-1", ("algo-1",))
    with pytest.raises(ValueError, match="MASTER_PORT='99999'"):
        rendezvous({"MASTER_PORT": "99999"}, config)


def test_toolkit_variables_round_trip():
    config = ResourceConfig("algo-2", ("algo-1", "algo-2"), "eth0")
    assert resource_config_from(toolkit_variables(config)) == config
