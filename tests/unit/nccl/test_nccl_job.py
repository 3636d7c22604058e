"""The nccl-tests batch script and the verdict on its output (pure parts of doctor nccl)."""

from __future__ import annotations

import pytest

from hpcflow.errors import SpecError
from hpcflow.nccl.job import NcclJob, judge, render_nccl_job

GOOD = (
    "ip-1:1:1 [0] NCCL INFO Using network Libfabric\n"
    "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n"
    "  8589934592  2147483648  float  sum  -1  45123  190.37  {bus}  0  45123  190.37  {bus}  0\n"
    "# Out of bounds values : 0 OK\n"
    "# Avg bus bandwidth    : 120.5\n"
)


def test_script_quotes_the_binary_and_exports_the_preset():
    text = render_nccl_job(NcclJob(2, 8, 8, binary="/opt/x y/all_reduce_perf", partition="train",
                                   env=(("FI_EFA_USE_HUGE_PAGE", "0"),)))
    assert "srun --mpi=pmix '/opt/x y/all_reduce_perf' -b 8 -e 8G -f 2 -g 1" in text
    assert "#SBATCH --gpus-per-node=8\n#SBATCH --exclusive\n#SBATCH --partition=train\n" in text
    assert "export FI_EFA_USE_HUGE_PAGE=0\nexport NCCL_DEBUG=INFO\n" in text


@pytest.mark.parametrize(("job", "message"), [
    (NcclJob(1, 8, 8), "--nodes: 1 is not allowed"),
    (NcclJob(2, 8, 8, partition="a;rm"), "--partition: 'a;rm' is not a partition name"),
    (NcclJob(2, 8, 8, binary="/x\nrm -rf /"), "--binary:"),
])
def test_bad_jobs_are_refused(job, message):
    with pytest.raises(SpecError, match=message.replace("(", r"\(")):
        render_nccl_job(job)


@pytest.mark.parametrize(("bus", "itype", "level", "text"), [
    ("356.94", "p5.48xlarge", "pass", "= 89% of the 400 GB/s EFA line rate"),
    ("120.00", "p5.48xlarge", "warn", "below hpcflow's 50% floor"),
    ("40.00", "p4d.24xlarge", "pass", "= 80% of the 50 GB/s EFA line rate"),
    ("40.00", None, "warn", "no EFA line rate known"),
])
def test_bandwidth_against_the_line_rate(bus, itype, level, text):
    _, checks = judge(GOOD.format(bus=bus), itype)
    busbw = {c.name: c for c in checks}["busbw"]
    assert busbw.level == level and text in busbw.message


def test_a_failed_run_is_judged_failed():
    result, checks = judge("host: Test NCCL failure common.cu:1005 'unhandled system error'\n",
                           "p5.48xlarge")
    levels = {c.name: c.level for c in checks}
    assert not result.ok and levels["nccl-tests"] == "fail" and levels["busbw"] == "warn"
