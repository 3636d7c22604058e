"""Benchmarks of the researcher's path (printed side by side; never fails on time).

1. `hpcflow submit` wall time vs plain `sbatch` of the same rendered script (goal: at most
   +0.3 s), on the local cluster (start it first: `hpcflow local-cluster up`).
2. `hpcflow --help` wall time (goal: at most 0.3 s), beside `python -c pass`.
3. Expanding a 10,000-host nodelist (goal: under 10 ms).

Usage: python bench/bench_submit.py [--repeat N] [--no-slurm]
Medians over N runs; the machine is noisy, so read the ratios and differences, not the digits.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from machine import header

from hpcflow.slurm.hostlist import expand_hostlist


def timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    return time.perf_counter() - t0, proc.stdout


def bench_submit(repeat: int, work: Path) -> None:
    spec = {"name": "bench", "nodes": 1, "tasks_per_node": 1, "time_limit": "5",
            "run_dir": str(work / "run"), "program": {"argv": ["true"]}}
    spec_path = work / "bench.yaml"
    spec_path.write_text(yaml.safe_dump(spec))
    env = {**os.environ, "HPCFLOW_HOME": str(work / "home")}
    hpcflow_cmd = [sys.executable, "-m", "hpcflow", "submit", str(spec_path)]
    script = subprocess.run([*hpcflow_cmd, "--dry-run"], capture_output=True, text=True,
                            env=env, check=True).stdout
    (work / "run").mkdir(exist_ok=True)
    script_path = work / "plain.sbatch"
    script_path.write_text(script)
    sbatch_cmd = ["sbatch", "--parsable", f"--chdir={work / 'run'}", str(script_path)]
    ours, plain, ids = [], [], []
    for i in range(repeat):  # interleaved, so drift in machine load hits both alike
        # A fresh run directory each time: hpcflow refuses one whose job has not finished.
        t, out = timed([*hpcflow_cmd, "--set", f"run_dir={work / f'run{i}'}"], env)
        ours.append(t)
        ids.append(out.split()[2])
        t, out = timed(sbatch_cmd)
        plain.append(t)
        ids.append(out.strip().split(";")[0])
    subprocess.run(["scancel", *ids], capture_output=True, check=False)
    m_ours, m_plain = statistics.median(ours), statistics.median(plain)
    print(f"submit: hpcflow submit median {m_ours:.3f} s, sbatch median {m_plain:.3f} s, "
          f"difference {m_ours - m_plain:+.3f} s (goal <= +0.300 s), ratio {m_ours / m_plain:.2f}")
    hpcflow_shown = shlex.join([*hpcflow_cmd, "--set", f"run_dir={work}/run<i>"])
    print(f"  commands (i = 0..{repeat - 1}): {hpcflow_shown}  |  {shlex.join(sbatch_cmd)}")


def bench_help(repeat: int) -> None:
    cli, base = [], []
    for _ in range(repeat):
        cli.append(timed([sys.executable, "-m", "hpcflow", "--help"])[0])
        base.append(timed([sys.executable, "-c", "pass"])[0])
    m_cli, m_base = statistics.median(cli), statistics.median(base)
    print(f"--help: hpcflow --help median {m_cli:.3f} s (goal <= 0.300 s), bare python "
          f"{m_base:.3f} s, hpcflow's own share {m_cli - m_base:.3f} s")


def bench_hostlist(repeat: int) -> None:
    cases = {"one range": "queue-dy-p548xlarge-[1-10000]",
             "100 x 100 groups": "rack[01-100]-node[001-100]"}
    for label, expr in cases.items():
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            hosts = expand_hostlist(expr)
            times.append(time.perf_counter() - t0)
        assert len(hosts) == 10_000
        med = statistics.median(times) * 1e3
        print(f"hostlist ({label}, 10,000 hosts): median {med:.2f} ms (goal < 10 ms), "
              f"ratio to goal {med / 10:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--no-slurm", action="store_true", help="skip the submit benchmark")
    args = parser.parse_args()
    # The shared header: this process's own command line, the machine and the versions.
    print("\n".join(header("bench_submit: hpcflow submit, CLI start-up and nodelists")))
    bench_help(args.repeat)
    bench_hostlist(max(args.repeat, 20))
    if not args.no_slurm:
        if not shutil.which("sbatch"):
            print("submit: skipped (no sbatch on PATH)")
            return
        with tempfile.TemporaryDirectory(prefix="hpcflow-bench-") as tmp:
            bench_submit(args.repeat, Path(tmp))


if __name__ == "__main__":
    main()
