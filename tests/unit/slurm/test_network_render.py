"""The batch script of a job with a ``network`` block: the runtime's network check settings where
the instance type has EFA, and the plugin directories put on LD_LIBRARY_PATH there."""

from __future__ import annotations

import re
from typing import Any

import pytest

from hpcflow.jobs.script import job_script
from hpcflow.slurm.render import render_sbatch
from hpcflow.spec.job import JobSpec

BASE: dict[str, Any] = {
    "name": "lm", "nodes": 2, "tasks_per_node": 8, "time_limit": "01:00:00",
    "run_dir": "/scratch/runs/lm", "program": {"module": "hpcflow.examples.train"},
}


def exports(network: dict[str, Any]) -> tuple[dict[str, str], str]:
    script = job_script(JobSpec.model_validate({**BASE, "network": network}),
                        python="/usr/bin/python3")
    return dict(re.findall(r"^export (HPCFLOW_[A-Z_]+)=(.*)$", script, re.M)), script


@pytest.mark.parametrize("network, want", [
    pytest.param({"instance_type": "p5.48xlarge"},
                 {"HPCFLOW_NETWORK_INSTANCE_TYPE": "p5.48xlarge", "HPCFLOW_EFA_EXPECTED": "32",
                  "HPCFLOW_REQUIRE_EFA": "1"}, id="p5-required-by-default"),
    pytest.param({"instance_type": "p4d.24xlarge", "require_efa": False},
                 {"HPCFLOW_NETWORK_INSTANCE_TYPE": "p4d.24xlarge", "HPCFLOW_EFA_EXPECTED": "4",
                  "HPCFLOW_REQUIRE_EFA": "0"}, id="p4d-not-required"),
    pytest.param({"instance_type": "p5.48xlarge", "preset": False},
                 {"HPCFLOW_NETWORK_INSTANCE_TYPE": "p5.48xlarge", "HPCFLOW_EFA_EXPECTED": "32",
                  "HPCFLOW_REQUIRE_EFA": "1"}, id="check-without-the-preset"),
    pytest.param({"instance_type": "g5.xlarge"}, {}, id="g5-without-efa"),
    pytest.param({"instance_type": "trn1.32xlarge"}, {}, id="efa-without-nvidia-gpus"),
])
def test_the_network_check_is_armed_where_efa_is_expected(network, want):
    got, script = exports(network)
    assert {k: v for k, v in got.items() if k in want or "NETWORK" in k or "EFA" in k} == want
    assert ("-m hpcflow.nccl.plugin_path" in script) is bool(want)


def test_the_core_renderer_refuses_a_network_block_without_its_exports() -> None:
    """The preset is the service's to compute (hpcflow.nccl.exports); a script without it must
    never be rendered silently."""
    spec = JobSpec.model_validate({**BASE, "network": {"instance_type": "p5.48xlarge"}})
    with pytest.raises(ValueError, match="network block: pass network="):
        render_sbatch(spec, python="/usr/bin/python3")
