"""dist_env_from: Slurm and torchrun variables -> DistEnv, as tables."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import hpcflow.runtime
from hpcflow.protocol import PORT_BASE, PORT_SPAN
from hpcflow.runtime.env import (
    DistEnv,
    dist_env_from,
    parse_tasks_per_node,
    port_for_job,
)

# What srun gives task 5 of `sbatch -N 16 --ntasks-per-node=8` on a ParallelCluster queue.
SLURM_P5 = {
    "SLURM_JOB_ID": "4242",
    "SLURM_JOB_NODELIST": "queue-dy-p548xlarge-[1-16]",
    "SLURM_NTASKS": "128",
    "SLURM_TASKS_PER_NODE": "8(x16)",
    "SLURM_PROCID": "13",
    "SLURM_LOCALID": "5",
    "SLURM_NODEID": "1",
}


def no_port() -> int:
    raise AssertionError("a free port must only be picked for a single process")


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        pytest.param(
            SLURM_P5,
            DistEnv(13, 5, 128, 8, 1, "queue-dy-p548xlarge-1", PORT_BASE + 4242, "4242", 0,
                    "slurm"),
            id="slurm-16-nodes-hostlist-range",
        ),
        pytest.param(
            {**SLURM_P5, "SLURM_RESTART_COUNT": "3"},
            DistEnv(13, 5, 128, 8, 1, "queue-dy-p548xlarge-1", PORT_BASE + 4242, "4242", 3,
                    "slurm"),
            id="slurm-restart-count",
        ),
        pytest.param(
            {
                "SLURM_JOB_ID": "31337", "SLURM_JOB_NODELIST": "gpu[07-08],cpu1",
                "SLURM_NTASKS": "5", "SLURM_TASKS_PER_NODE": "2(x2),1",
                "SLURM_PROCID": "4", "SLURM_LOCALID": "0", "SLURM_NODEID": "2",
            },
            DistEnv(4, 0, 5, 1, 2, "gpu07", PORT_BASE + 1337, "31337", 0, "slurm"),
            id="slurm-uneven-tasks-per-node-zero-padded",
        ),
        pytest.param(
            {**SLURM_P5, "SLURM_STEP_NODELIST": "queue-dy-p548xlarge-[3-4]",
             "SLURM_STEP_TASKS_PER_NODE": "4,4", "SLURM_NTASKS": "8", "SLURM_PROCID": "6",
             "SLURM_LOCALID": "2"},
            DistEnv(6, 2, 8, 4, 1, "queue-dy-p548xlarge-3", PORT_BASE + 4242, "4242", 0,
                    "slurm"),
            id="slurm-step-on-part-of-the-allocation",
        ),
        pytest.param(
            {k: v for k, v in SLURM_P5.items() if k != "SLURM_TASKS_PER_NODE"},
            DistEnv(13, 5, 128, 8, 1, "queue-dy-p548xlarge-1", PORT_BASE + 4242, "4242", 0,
                    "slurm"),
            id="slurm-tasks-per-node-from-ntasks-over-nodes",
        ),
        pytest.param(
            {**SLURM_P5, "MASTER_ADDR": "10.0.0.5", "MASTER_PORT": "29500"},
            DistEnv(13, 5, 128, 8, 1, "10.0.0.5", 29500, "4242", 0, "slurm"),
            id="slurm-exported-master-addr-and-port-win",
        ),
        pytest.param(
            {**SLURM_P5, "RANK": "3", "WORLD_SIZE": "16", "LOCAL_RANK": "3",
             "LOCAL_WORLD_SIZE": "8", "GROUP_RANK": "0", "MASTER_ADDR": "node-a",
             "MASTER_PORT": "29400"},
            DistEnv(3, 3, 16, 8, 0, "node-a", 29400, "4242", 0, "torchrun"),
            id="torchrun-wins-over-slurm",
        ),
        pytest.param(
            {"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "localhost", "MASTER_PORT": "1234"},
            DistEnv(0, 0, 1, 1, 0, "localhost", 1234, None, 0, "torchrun"),
            id="torchrun-standalone-defaults",
        ),
        pytest.param(
            {},
            DistEnv(0, 0, 1, 1, 0, "127.0.0.1", 45678, None, 0, "single"),
            id="single-process-free-port",
        ),
    ],
)
def test_dist_env_from(environ, expected):
    pick = (lambda: 45678) if expected.launcher == "single" else no_port
    assert dist_env_from(environ, pick_port=pick) == expected


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        pytest.param({"SLURM_NTASKS": None}, "SLURM_NTASKS is not set", id="missing-ntasks"),
        pytest.param({"SLURM_LOCALID": ""}, "SLURM_LOCALID is not set", id="empty-localid"),
        pytest.param({"SLURM_NODEID": None}, "SLURM_NODEID is not set", id="missing-nodeid"),
        pytest.param({"SLURM_PROCID": "x1"}, "SLURM_PROCID='x1' is not a non-negative integer",
                     id="garbled-procid"),
        pytest.param({"SLURM_PROCID": "-1"}, "SLURM_PROCID='-1'", id="negative-procid"),
        pytest.param({"SLURM_NTASKS": "0"}, "SLURM_NTASKS='0' must be at least 1",
                     id="zero-ntasks"),
        pytest.param({"SLURM_PROCID": "128"}, "rank 128 is not below the world size 128",
                     id="rank-out-of-world"),
        pytest.param({"SLURM_JOB_NODELIST": "n[3-"}, "SLURM_JOB_NODELIST='n[3-'",
                     id="bad-hostlist"),
        pytest.param({"SLURM_JOB_NODELIST": None}, "SLURM_JOB_NODELIST is not set",
                     id="missing-nodelist"),
        pytest.param({"SLURM_JOB_ID": "12.3"}, "SLURM_JOB_ID='12.3'", id="garbled-job-id"),
        pytest.param({"SLURM_JOB_ID": None}, "SLURM_JOB_ID is not set", id="missing-job-id"),
        pytest.param({"SLURM_RESTART_COUNT": "two"}, "SLURM_RESTART_COUNT='two'",
                     id="garbled-restart-count"),
        pytest.param({"SLURM_TASKS_PER_NODE": "8x16"}, "SLURM_TASKS_PER_NODE='8x16'",
                     id="garbled-tasks-per-node"),
        pytest.param({"SLURM_TASKS_PER_NODE": "8"}, "lists only 1 nodes",
                     id="tasks-per-node-too-short"),
        pytest.param({"SLURM_LOCALID": "8"}, "local rank 8 is not below the local world size 8",
                     id="localid-out-of-node"),
        pytest.param({"MASTER_PORT": "70000"}, "MASTER_PORT='70000' is not a TCP port",
                     id="port-out-of-range"),
        pytest.param({"RANK": "1"}, "WORLD_SIZE is not set", id="torchrun-rank-without-world"),
        pytest.param({"RANK": "1", "WORLD_SIZE": "4", "MASTER_ADDR": "a"},
                     "MASTER_PORT is not set", id="torchrun-without-port"),
    ],
)
def test_bad_environment_names_the_variable(changes, message):
    environ = dict(SLURM_P5)
    for key, value in changes.items():
        if value is None:
            environ.pop(key, None)
        else:
            environ[key] = value
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("(", r"\(")):
        dist_env_from(environ, pick_port=no_port)


def test_job_id_port_is_stable_in_range_and_differs_for_neighbours():
    ports = [port_for_job(str(job)) for job in range(123_456, 123_456 + 50)]
    assert ports == [port_for_job(str(job)) for job in range(123_456, 123_456 + 50)]
    assert all(PORT_BASE <= port < PORT_BASE + PORT_SPAN for port in ports)
    assert len(set(ports)) == len(ports)
    assert port_for_job("0") == PORT_BASE
    assert port_for_job(str(10**12 + 9_999)) == PORT_BASE + 9_999


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("4", [4], id="single"),
        pytest.param("2(x3),1", [2, 2, 2, 1], id="repeat-then-single"),
        pytest.param("8(x2),4(x1)", [8, 8, 4], id="repeat-of-one"),
    ],
)
def test_parse_tasks_per_node(value, expected):
    assert parse_tasks_per_node(value) == expected


def test_importing_env_and_the_package_does_not_import_torch():
    code = (
        "import sys, hpcflow.runtime, hpcflow.runtime.env, hpcflow.examples.train; "
        "hpcflow.runtime.DistEnv; print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("package, allowed", [
    # hpcflow.nccl.netlog: the NCCL log parser, pure and standard-library only, in a package
    # whose __init__ imports nothing (tests/unit/test_imports.py checks both).
    # hpcflow.plan.interval and .goodput: pure formulas over numbers (checkpoint.interval: auto)
    # hpcflow.contract: the contract's records (the warm standby's go record), standard library
    # only like hpcflow.protocol
    pytest.param("runtime", ("hpcflow.errors", "hpcflow.fsutil", "hpcflow.hostlist",
                             "hpcflow.ledger", "hpcflow.protocol", "hpcflow.contract",
                             "hpcflow.nccl.netlog",
                             "hpcflow.plan.interval", "hpcflow.plan.goodput",
                             "hpcflow.runtime"), id="runtime"),
    pytest.param("examples", ("hpcflow.errors", "hpcflow.runtime", "hpcflow.examples"),
                 id="examples-use-the-runtime-only"),
])
def test_runtime_and_examples_import_only_what_they_may(package, allowed):
    runtime_dir = Path(hpcflow.runtime.__file__).parent.parent / package
    offenders = []
    for path in sorted(runtime_dir.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [
                f"{path.name}: {name}" for name in names
                if name.split(".")[0] == "hpcflow" and not name.startswith(allowed)
            ]
    assert offenders == []
