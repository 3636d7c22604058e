"""One rank of an hpcflow job without Slurm: the environment srun and the supervisor give a
task (job, rank, run and checkpoint folders), for tests that run a short program on the runtime
API in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hpcflow import protocol as P


def run_one_rank(program: str, tmp_path: Path, job_id: str, extra: dict[str, str],
                 args: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """``python -c program *args`` as rank 0 of 1 (``extra`` overrides and adds variables)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "HPCFLOW_"))}
    env.update({
        "SLURM_JOB_ID": job_id, "SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_LOCALID": "0",
        "SLURM_NNODES": "1", "SLURM_NODEID": "0", "SLURM_JOB_NODELIST": "localhost",
        "SLURM_RESTART_COUNT": "0",
        P.ENV_RUN_DIR: str(tmp_path), P.ENV_CHECKPOINT_DIR: str(tmp_path / "checkpoints"),
        "OMP_NUM_THREADS": "1", **extra,
    })
    return subprocess.run([sys.executable, "-c", program, *args], env=env, capture_output=True,
                          text=True, timeout=120)
