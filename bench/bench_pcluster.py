"""Benchmark: render + validate a 50-queue cluster spec (the ParallelCluster maximum).

Goal: under 2 s for a cold process, import time included. Prints medians and the ratio to the
goal; never fails on time.

Usage: python bench/bench_pcluster.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

import yaml
from machine import header

GOAL_S = 2.0
QUEUES = 50


def make_spec(n_queues: int = QUEUES) -> dict:
    """A spec with ``n_queues`` queues, one p5.48xlarge compute resource each, FSx and S3."""
    subnet = "subnet-0a1b2c3d4e5f60718"
    return {
        "name": "bench", "region": "us-east-1",
        "head_node": {"instance_type": "m5.2xlarge", "subnet_id": subnet, "ssh_key": "k"},
        "queues": [{"name": f"q{i}", "subnet_ids": [subnet],
                    "compute": [{"instance_type": "p5.48xlarge", "max_nodes": 4}]}
                   for i in range(n_queues)],
        "storage": [{"name": "fsx", "storage_capacity_gib": 4800,
                     "per_unit_storage_throughput": 250}],
        "s3_access": [{"bucket": "bench-checkpoints"}],
    }


COLD = (
    "import sys, time; t = time.perf_counter()\n"
    "from hpcflow.pcluster.render import render_file, validate_file\n"
    "render_file(sys.argv[1], sys.argv[2]); validate_file(sys.argv[2])\n"
    "print(time.perf_counter() - t)\n"
)


def main() -> None:
    """Run the cold (new process) and warm (same process) measurements and print a report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print("\n".join(header("bench_pcluster: render + validate a 50-queue cluster config")),
          flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "spec.yaml"
        out = Path(tmp) / "cluster.yaml"
        spec.write_text(yaml.safe_dump(make_spec()))
        env = {**os.environ, "HPCFLOW_CACHE_DIR": str(Path(tmp) / "cache")}
        cold_wall, cold_inner = [], []
        for _ in range(args.repeat):
            t = time.perf_counter()
            res = subprocess.run([sys.executable, "-c", COLD, str(spec), str(out)], env=env,
                                 capture_output=True, text=True, check=True)
            cold_wall.append(time.perf_counter() - t)
            cold_inner.append(float(res.stdout.strip().splitlines()[-1]))
        os.environ["HPCFLOW_CACHE_DIR"] = env["HPCFLOW_CACHE_DIR"]
        from hpcflow.pcluster.render import render_file, validate_file

        warm = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            render_file(spec, out)
            validate_file(out)
            warm.append(time.perf_counter() - t)
    cold = statistics.median(cold_wall)
    print(f"python {platform.python_version()}, aws-parallelcluster "
          f"{version('aws-parallelcluster')}, pydantic {version('pydantic')}")
    print(f"spec: {QUEUES} queues, 1 compute resource each, 1 FSx; repeats: {args.repeat}")
    print(f"cold process (interpreter start + imports + render + validate): "
          f"median {cold:.3f} s, ratio to the {GOAL_S:g} s goal {cold / GOAL_S:.2f}")
    print(f"  imports + render + validate inside that process: median "
          f"{statistics.median(cold_inner):.3f} s")
    print(f"warm (same process, imports done): median {statistics.median(warm):.3f} s")


if __name__ == "__main__":
    main()
