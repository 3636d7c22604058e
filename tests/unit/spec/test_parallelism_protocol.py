"""parallelism, program.protocol and preemption.requeue_margin_s: checked before the job waits
in the queue, and passed to the batch script."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
import yaml
from batch_script import ranks_env

from hpcflow.errors import SpecError
from hpcflow.jobs.script import job_script
from hpcflow.spec.job import JobSpec
from hpcflow.spec.loading import validate_model

BASE: dict[str, Any] = {
    "name": "lm", "nodes": 2, "tasks_per_node": 4, "time_limit": "01:00:00",
    "run_dir": "/scratch/runs/lm", "program": {"module": "hpcflow.examples.train"},
}


def problems(**changes: Any) -> list[str]:
    with pytest.raises(SpecError) as info:
        validate_model(JobSpec, {**BASE, **changes}, "job.yaml")
    return info.value.problems


@pytest.mark.parametrize("layout, words", [
    pytest.param({"dp": 3, "pp": 2, "tp": 2}, "dp * pp * tp = 3 * 2 * 2 = 12", id="product"),
    pytest.param({"pp": 3}, "pp * tp = 3 * 1 = 3 to divide", id="remaining-dp"),
    pytest.param({"dp": 1, "pp": 1, "tp": 8}, "tp=8 does not divide the 4 ranks per node",
                 id="tp-spans-nodes"),
    pytest.param({"dp": 0}, "dp=0 must be at least 1", id="dp-zero"),
])
def test_a_layout_that_does_not_fit_names_the_field_and_the_rule(layout, words):
    [problem] = problems(parallelism=layout)
    assert problem.startswith("job.yaml: parallelism: ") and words in problem
    assert "nodes x tasks_per_node = 2 x 4" in problem


def test_a_fitting_layout_reaches_the_ranks():
    spec = JobSpec.model_validate({**BASE, "parallelism": {"pp": 2, "tp": 2}})
    assert ranks_env(job_script(spec, python="/usr/bin/python3"))["HPCFLOW_PARALLELISM"] == "-1,2,2"
    plain = JobSpec.model_validate(BASE)
    assert "HPCFLOW_PARALLELISM" not in job_script(plain, python="/usr/bin/python3")


def test_requeue_margin_must_be_inside_the_signal_lead():
    [problem] = problems(preemption={"signal_lead_s": 120, "requeue_margin_s": 120})
    assert problem.startswith("job.yaml: preemption.requeue_margin_s: 120: must be less than")


def test_protocol_values_are_listed():
    [problem] = problems(program={"module": "m", "protocol": "never"})
    assert "program.protocol" in problem and "'auto'" in problem and "'requeue'" in problem


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "submit"])
def test_cli_refuses_a_bad_layout_with_exit_2_before_sbatch(tmp_path, dry_run):
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({**BASE, "run_dir": str(tmp_path / "run"),
                                    "parallelism": {"dp": 3, "pp": 2, "tp": 2}}))
    cmd = [sys.executable, "-m", "hpcflow", "submit", str(path)] + (["--dry-run"] if dry_run else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                          env={"PATH": "/nonexistent", "HPCFLOW_HOME": str(tmp_path / "home")})
    assert proc.returncode == 2, proc.stderr
    assert "parallelism" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "run").exists()


def test_workdir_is_relative_to_the_spec_file_and_becomes_srun_chdir(tmp_path):
    from hpcflow.slurm.render import srun_options
    from hpcflow.spec.job import load_job_spec

    folder = tmp_path / "my project"
    folder.mkdir()
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump({**BASE, "run_dir": "runs/one",
                                    "program": {"module": "my_loop", "workdir": "."}}))
    spec = load_job_spec(path)
    assert spec.program.workdir == folder
    assert f"--chdir={folder}" in srun_options(spec)
    assert not any(w.startswith("--chdir") for w in srun_options(JobSpec.model_validate(BASE)))


@pytest.mark.parametrize("network, env, exported", [
    pytest.param({"instance_type": "p4d.24xlarge", "ofi_nccl_version": "1.5.0"}, {},
                 {"FI_PROVIDER": "efa", "NCCL_PROTO": "simple", "FI_EFA_USE_DEVICE_RDMA": "1",
                  "FI_EFA_USE_HUGE_PAGE": "0"}, id="legacy-plugin"),
    pytest.param({"instance_type": "p5.48xlarge", "ofi_nccl_version": "1.9.1"}, {},
                 {"FI_EFA_USE_HUGE_PAGE": "0"}, id="current-plugin"),
    pytest.param({"instance_type": "p5.48xlarge", "ofi_nccl_version": "1.5.0"},
                 {"NCCL_PROTO": "LL128"},
                 {"NCCL_PROTO": "LL128", "FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1",
                  "FI_EFA_USE_HUGE_PAGE": "0"}, id="env-wins"),
    pytest.param({"instance_type": "p5.48xlarge", "preset": False}, {}, {}, id="off"),
    pytest.param({"instance_type": "m5.large"}, {}, {}, id="no-efa-gpus"),
])
def test_the_network_preset_reaches_the_batch_script(network, env, exported):
    import re

    spec = JobSpec.model_validate({**BASE, "network": network, "env": env})
    script = job_script(spec, python="/usr/bin/python3")
    exports = dict(re.findall(r"^export ([A-Z_]+)=(.*)$", script, re.M))
    for name, value in exported.items():
        assert exports[name] == value
    nccl = {k for k in exports if k.startswith(("FI_", "NCCL_"))}
    assert nccl == set(exported)
    assert not any(k.startswith("NCCL_IB_") for k in exports)
    assert script.count("export NCCL_PROTO=") <= 1


@pytest.mark.parametrize("value, refused", [
    pytest.param("lo", True, id="loopback"),
    pytest.param("docker0", True, id="bridge"),
    pytest.param("^lo,docker", False, id="excluded"),
    pytest.param("ens", False, id="host-prefix"),
])
def test_an_interface_setting_that_picks_the_loopback_is_refused_at_submit(value, refused):
    data = {**BASE, "env": {"NCCL_SOCKET_IFNAME": value}}
    if refused:
        [problem] = problems(env={"NCCL_SOCKET_IFNAME": value})
        assert "env.NCCL_SOCKET_IFNAME" in problem and "cannot reach it" in problem
    else:
        assert JobSpec.model_validate(data).env["NCCL_SOCKET_IFNAME"] == value


def test_a_network_block_names_a_bad_instance_type():
    [problem] = problems(network={"instance_type": "p5 48xlarge"})
    assert "network.instance_type" in problem and "EC2 instance type" in problem


def test_workdir_given_with_set_is_relative_to_the_current_folder(tmp_path, monkeypatch):
    from hpcflow.spec.job import load_job_spec

    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({**BASE, "run_dir": "runs/one"}))
    here = tmp_path / "elsewhere"
    here.mkdir()
    monkeypatch.chdir(here)
    spec = load_job_spec(path, ["program.workdir=.", "run_dir=r"])
    assert spec.program.workdir == here and spec.run_dir == here / "r"
