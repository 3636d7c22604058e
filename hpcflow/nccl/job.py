"""``hpcflow doctor nccl``: run nccl-tests across nodes through sbatch and judge the result.

The job script comes from ``sbatch_templates/nccl-tests.sbatch.j2`` (one rank per GPU, the
NCCL/EFA preset exported, ``NCCL_DEBUG=INFO`` so the transport can be checked). The measured
peak bus bandwidth is compared with the instance type's EFA line rate.

Line rates (Gbit/s of EFA per instance), from the EC2 product pages in
``hpcflow.pcluster.catalog.FAMILY_PAGES``: p4d/p4de 400; p5, p5e, p5en, p6-b200 3200. nccl-tests'
doc/PERFORMANCE.md: "The bus bandwidth should reflect the speed of the hardware bottleneck:
NVLink, PCI, QPI, or network", and can be compared with the hardware peak; across nodes that is
the network, so the line rate is a ceiling, not a promise. The floor used
to warn (``min_fraction``, default 0.5) is hpcflow's own rule of thumb, not an AWS figure.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

from hpcflow.check_result import CheckResult, fail, ok, warn
from hpcflow.command import evidence, run_command
from hpcflow.errors import SpecError, SubmitError
from hpcflow.nccl.checks import check_nccl_debug_output
from hpcflow.nccl.nccltests import NcclTestsResult, parse_nccl_tests
from hpcflow.nccl.presets import node_facts

LINE_RATE_GBPS: dict[str, int] = {
    "p4d.24xlarge": 400, "p4de.24xlarge": 400, "p5.48xlarge": 3200, "p5e.48xlarge": 3200,
    "p5en.48xlarge": 3200, "p6-b200.48xlarge": 3200,
}
DEFAULT_BINARY = "/opt/hpcflow/nccl-tests/2.17.6/bin/all_reduce_perf"


@dataclass(frozen=True)
class NcclJob:
    """What to run. ``gpus_per_node`` 0 runs ``tasks_per_node`` ranks without asking for GPUs
    (a rehearsal on a cluster without them)."""

    nodes: int
    tasks_per_node: int
    gpus_per_node: int
    binary: str = DEFAULT_BINARY
    partition: str | None = None
    mpi: str | None = "pmix"
    min_bytes: str = "8"
    max_bytes: str = "8G"
    time_limit_min: int = 15
    env: tuple[tuple[str, str], ...] = ()

    def check(self) -> None:
        """Raises SpecError naming the option when a value is not allowed."""
        if self.nodes < 2:
            raise SpecError(f"--nodes: {self.nodes} is not allowed; give 2 or more (one node "
                            "never crosses the network)")
        if self.tasks_per_node < 1:
            raise SpecError(f"--gpus-per-node: {self.tasks_per_node} is not allowed; give 1 or more")
        if self.partition is not None and not re.fullmatch(r"[A-Za-z0-9_.-]+", self.partition):
            raise SpecError(f"--partition: {self.partition!r} is not a partition name; allowed: "
                            "letters, digits, _ . -")
        if any(c in self.binary for c in "\n\r\0") or not self.binary:
            raise SpecError(f"--binary: {self.binary!r} is not a usable path")
        if self.time_limit_min < 1:
            raise SpecError(f"--time-limit: {self.time_limit_min} is not allowed; give minutes >= 1")


def render_nccl_job(job: NcclJob) -> str:
    """The batch script for ``job`` (pure)."""
    import jinja2

    from hpcflow.resources import data_dir

    job.check()
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(data_dir("sbatch_templates"))),
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True,
                             autoescape=False)  # noqa: S701 - shell: values go through shquote
    env.filters["shquote"] = lambda value: shlex.quote(str(value))
    return env.get_template("nccl-tests.sbatch.j2").render(
        nodes=job.nodes, tasks_per_node=job.tasks_per_node, gpus_per_node=job.gpus_per_node,
        partition=job.partition, mpi=job.mpi, binary=job.binary,
        binary_name=Path(job.binary).name, min_bytes=job.min_bytes, max_bytes=job.max_bytes,
        time_limit_min=job.time_limit_min, env=sorted(job.env))


def run_nccl_job(job: NcclJob, workdir: Path, timeout_s: float = 1800) -> tuple[str, str]:
    """Submit with ``sbatch --wait`` and return (job id, output text).

    Raises:
        SubmitError: sbatch refused the job or it did not finish within ``timeout_s`` (then it
            is cancelled); the message carries the command and stderr.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    script = workdir / "nccl-tests.sbatch"
    script.write_text(render_nccl_job(job))
    output = workdir / "nccl-tests-%j.out"
    argv = ["sbatch", "--parsable", "--wait", f"--output={output}", f"--chdir={workdir}",
            str(script)]
    try:
        proc = run_command(argv, timeout_s=timeout_s)
    except subprocess.TimeoutExpired as exc:
        job_id = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        job_id = job_id.strip().split(";")[0]
        if job_id:
            run_command(["scancel", job_id])
        raise SubmitError(f"nccl-tests job {job_id or '?'} did not finish in {timeout_s:g} s; "
                          "cancelled") from None
    except FileNotFoundError:
        raise SubmitError("sbatch not found: run hpcflow doctor nccl on a Slurm login or head "
                          "node") from None
    job_id = proc.stdout.strip().split(";")[0]
    if not job_id.isdigit():
        raise SubmitError(f"sbatch refused the job {evidence(argv, proc)}")
    out = Path(str(output).replace("%j", job_id))
    text = out.read_text(errors="replace") if out.exists() else ""
    return job_id, text


def judge(text: str, instance_type: str | None, min_fraction: float = 0.5,
          ) -> tuple[NcclTestsResult, list[CheckResult]]:
    """Parse the job's output and judge it: the run, the transport, the bandwidth."""
    result = parse_nccl_tests(text)
    checks = []
    if result.ok:
        checks.append(ok("nccl-tests", f"{len(result.rows)} sizes, no wrong values; "
                         f"avg bus bandwidth {result.avg_busbw_gbs:g} GB/s"))
    else:
        checks.append(fail("nccl-tests", "; ".join(result.problems()),
                           "read the job output; run hpcflow doctor on the nodes"))
    facts = node_facts(instance_type) if instance_type else None
    checks.append(check_nccl_debug_output(text, facts.efa_gpu if facts else None))
    peak = result.peak_busbw_gbs
    line_gbps = LINE_RATE_GBPS.get(instance_type or "")
    if peak is None:
        checks.append(warn("busbw", "no bandwidth measured", "see the nccl-tests line above"))
    elif line_gbps is None:
        checks.append(warn("busbw", f"peak bus bandwidth {peak:g} GB/s; no EFA line rate known "
                           f"for {instance_type or 'this instance type'}",
                           "pass --instance-type with an EFA GPU type (p4d, p5, p5e, p5en, p6-b200)"))
    else:
        from hpcflow.pcluster.catalog import FAMILY_PAGES

        line_gbs = line_gbps / 8
        share = peak / line_gbs
        text = (f"peak bus bandwidth {peak:g} GB/s = {share:.0%} of the {line_gbs:g} GB/s EFA "
                f"line rate of {instance_type} ({line_gbps} Gbit/s, "
                f"{FAMILY_PAGES.get(instance_type.split('.')[0], 'EC2 product page')})")
        if share >= min_fraction:
            checks.append(ok("busbw", text))
        else:
            checks.append(warn("busbw", text + f"; below hpcflow's {min_fraction:.0%} floor",
                               "check the transport line, the preset (hpcflow doctor) and that "
                               "every node is in one placement group"))
    return result, checks
