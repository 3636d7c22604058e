"""The start-up floor the benchmarks measure hpcflow against: a bare step of the same layout
inside an allocation of the local cluster.

``salloc`` holds the nodes; inside, ``srun`` starts one process per rank that imports torch,
joins a gloo process group, meets at a barrier and exits: what any job of that layout pays
before its first step, whatever launches it. Timed from srun's start to its end.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

FLOOR_PROGRAM = """
import os
import torch.distributed as dist
from hpcflow.runtime.env import dist_env_from
env = dist_env_from(os.environ)
os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = env.master_addr, str(env.master_port)
dist.init_process_group("gloo", rank=env.rank, world_size=env.world_size)
dist.barrier()
dist.destroy_process_group()
"""


def _environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}


def floor_s(nodes: int, tasks_per_node: int, repeat: int) -> list[float]:
    """Seconds of a bare step of the layout inside an allocation, ``repeat`` times.

    Raises:
        SystemExit: the step failed (its output is in the message).
    """
    times = []
    for _ in range(repeat):
        inner = ("t0=$(date +%s.%N); srun --kill-on-bad-exit=1 " + sys.executable
                 + " -c \"$HPCFLOW_FLOOR\"; rc=$?; t1=$(date +%s.%N); echo \"floor $t0 $t1 $rc\"")
        done = subprocess.run(
            ["salloc", f"--nodes={nodes}", f"--ntasks-per-node={tasks_per_node}", "--quiet",
             "bash", "-c", inner],
            capture_output=True, text=True, env={**_environ(), "HPCFLOW_FLOOR": FLOOR_PROGRAM},
            timeout=600, check=False)
        match = re.search(r"^floor (\S+) (\S+) 0$", done.stdout, re.M)
        if not match:
            raise SystemExit(f"the floor step failed:\n{done.stdout}{done.stderr}")
        times.append(float(match.group(2)) - float(match.group(1)))
    return times
