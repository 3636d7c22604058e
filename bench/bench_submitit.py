"""Benchmark: the same DDP training function through plain submitit and through hpcflow.launch,
each preempted twice at the same times, on the real (local) Slurm cluster. Never fails on time.

- plain submitit: a ``submitit.helpers.Checkpointable`` trainer as submitit's docs show it: on
  the warning (USR2, sent to the ranks: ``scancel --signal=USR2 <jobid>``), rank 0's signal
  handler copies the model and optimizer state into the callable, submitit pickles it and rank 0
  runs ``scontrol requeue``; the next attempt starts from that pickle.
- hpcflow: the same loop with ``hpcflow.runtime.Run`` submitted with ``hpcflow.launch.Executor``;
  the warning (USR1 to the batch shell: ``scancel --signal=USR1 --batch <jobid>``, what Slurm's
  ``--signal=B:USR1@lead`` sends) makes every rank save at the next step boundary, commit, and
  the batch script requeues.

Both variants record each step rank 0 finishes (wall time, step, attempt) in a file of their
own, the only instrumentation; the warning is sent ``--after-s`` seconds after each attempt's
first step, for two attempts. Figures:

- lost steps of a preemption: steps run in the preempted attempt after the step the next
  attempt resumes from (work done twice or thrown away);
- per-attempt overhead: from the warning to the next attempt's first step, seconds (it includes
  the cluster's requeue delay, the same for both);
- final state: whether the parameters equal an uninterrupted run's (sha256 of every tensor).

Usage: python bench/bench_submitit.py [--steps 60] [--after-s 3] [--step-time-s 0.2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import submitit

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from machine import command_line, versions  # noqa: E402

from hpcflow.launch import Executor  # noqa: E402


def _record(path: str, step: int, attempt: int) -> None:
    with open(path, "a") as f:
        f.write(json.dumps({"t": time.time(), "step": step, "attempt": attempt}) + "\n")


def _batch(step: int, rank: int):  # noqa: ANN202
    import torch

    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(8, 16, generator=g)
    return x, x.sum(dim=1, keepdim=True)


def _model():  # noqa: ANN202
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))


def _sha(model) -> str:  # noqa: ANN001
    import hashlib

    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def train_hpcflow(cfg: dict) -> dict:
    """The DDP loop with hpcflow.runtime.Run."""
    import torch
    from torch.nn.parallel import DistributedDataParallel

    from hpcflow.runtime import Run

    with Run.from_env() as run:
        model = DistributedDataParallel(_model())
        optim = torch.optim.SGD(model.parameters(), lr=0.01)
        state = {"model": model, "optim": optim}
        step = run.restore(state)
        attempt = int(os.environ.get("SLURM_RESTART_COUNT", "0"))
        while step < cfg["steps"]:
            x, y = _batch(step, run.env.rank)
            torch.nn.functional.mse_loss(model(x), y).backward()
            optim.step()
            optim.zero_grad()
            time.sleep(cfg["step_time_s"])
            step += 1
            if run.env.is_rank0:
                _record(cfg["record"], step, attempt)
            run.step_done(step, state)
        return {"sha": _sha(model.module), "step": step}


class PlainTrainer(submitit.helpers.Checkpointable):
    """The same DDP loop as submitit's docs checkpoint it: state kept on the callable."""

    def __init__(self) -> None:
        self.step = 0
        self.saved: dict | None = None
        self._live: tuple | None = None

    def __getstate__(self) -> dict:
        return {"step": self.step, "saved": self.saved, "_live": None}

    def __call__(self, cfg: dict) -> dict:
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel

        denv = submitit.helpers.TorchDistributedEnvironment().export()
        dist.init_process_group("gloo", rank=denv.rank, world_size=denv.world_size)
        model = DistributedDataParallel(_model())
        optim = torch.optim.SGD(model.parameters(), lr=0.01)
        if self.saved is not None:
            model.module.load_state_dict(self.saved["model"])
            optim.load_state_dict(self.saved["optim"])
        self._live = (model, optim)
        attempt = int(os.environ.get("SLURM_RESTART_COUNT", "0"))
        while self.step < cfg["steps"]:
            x, y = _batch(self.step, denv.rank)
            torch.nn.functional.mse_loss(model(x), y).backward()
            optim.step()
            optim.zero_grad()
            time.sleep(cfg["step_time_s"])
            self.step += 1
            if denv.rank == 0:
                _record(cfg["record"], self.step, attempt)
        sha = _sha(model.module)
        dist.barrier()
        dist.destroy_process_group()
        return {"sha": sha, "step": self.step}

    def checkpoint(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN201
        import copy

        if self._live is not None:  # in rank 0's signal handler, wherever the step is
            model, optim = self._live
            self.saved = {"model": copy.deepcopy(model.module.state_dict()),
                          "optim": copy.deepcopy(optim.state_dict())}
        return super().checkpoint(*args, **kwargs)


def _records(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _wait(pred, timeout_s: float):  # noqa: ANN001, ANN202
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if value := pred():
            return value
        time.sleep(0.2)
    raise TimeoutError("the job did not get there in time")


def drive(job, record: Path, signal_cmd: list[str], after_s: float) -> dict:  # noqa: ANN001
    """Preempt two attempts ``after_s`` after their first step; return the figures."""
    sent = []
    for attempt in range(2):
        _wait(lambda a=attempt: any(r["attempt"] == a for r in _records(record)), 300)
        time.sleep(after_s)
        sent.append(time.time())
        subprocess.run([*signal_cmd, job.job_id], check=True, capture_output=True)
        _wait(lambda a=attempt: any(r["attempt"] == a + 1 for r in _records(record)), 300)
    result = job.results()[0]  # rank 0's (plain submitit's result() refuses a multi-task job)
    recs = _records(record)
    lost, overhead = [], []
    for attempt in range(2):
        ran = [r["step"] for r in recs if r["attempt"] == attempt]
        nxt = [r for r in recs if r["attempt"] == attempt + 1]
        resumed_from = nxt[0]["step"] - 1
        lost.append(max(ran) - resumed_from)
        overhead.append(nxt[0]["t"] - sent[attempt])
    return {"result": result, "lost": lost, "overhead": overhead}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--after-s", type=float, default=3.0)
    parser.add_argument("--step-time-s", type=float, default=0.2)
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])
    work = Path(tempfile.mkdtemp(prefix="bench-submitit-"))
    os.environ.setdefault("HPCFLOW_HOME", str(work / "home"))
    layout = {"nodes": 2, "tasks_per_node": 1}

    def cfg(name: str) -> dict:
        return {"steps": args.steps, "step_time_s": args.step_time_s,
                "record": str(work / f"{name}.jsonl")}

    ours = Executor(work / "hpcflow", time_limit="00:10:00", env={"OMP_NUM_THREADS": "1"},
                    **layout)
    reference = ours.submit(train_hpcflow, cfg("reference")).result()

    job = ours.submit(train_hpcflow, cfg("hpcflow"))
    hpc = drive(job, work / "hpcflow.jsonl", ["scancel", "--signal=USR1", "--batch"], args.after_s)

    plain_ex = submitit.AutoExecutor(folder=work / "plain", cluster="slurm")
    plain_ex.update_parameters(timeout_min=10, nodes=2, tasks_per_node=1,
                               slurm_additional_parameters={"requeue": True})
    pjob = plain_ex.submit(PlainTrainer(), cfg("plain"))
    plain = drive(pjob, work / "plain.jsonl", ["scancel", "--signal=USR2"], args.after_s)

    print(f"# {command_line()}")
    print(f"# {versions(('torch', 'submitit', 'hpcflow'))}; 2 nodes x 1 rank (DDP, gloo); "
          f"{args.steps} steps of {args.step_time_s} s; warned {args.after_s} s after the first "
          "step of attempts 0 and 1")
    print(f"{'variant':<16}{'lost steps':<14}{'overhead s':<18}{'final = uninterrupted'}")
    for name, fig in (("plain submitit", plain), ("hpcflow.launch", hpc)):
        same = fig["result"]["sha"] == reference["sha"]
        over = ", ".join(f"{x:.1f}" for x in fig["overhead"])
        print(f"{name:<16}{str(fig['lost']):<14}{over:<18}{same}")


if __name__ == "__main__":
    main()
