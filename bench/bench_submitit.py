"""Benchmark: the same training functions through plain submitit and through hpcflow.launch, each
preempted twice at the same times, on the real (local) Slurm cluster. Never fails on time.

Two models, both on 2 nodes x 1 rank with gloo on CPU:

- DDP (replicated state): plain submitit runs a ``submitit.helpers.Checkpointable`` trainer as
  submitit's docs show it: on the warning (USR2, sent to the ranks: ``scancel --signal=USR2
  <jobid>``), rank 0's signal handler copies the model and optimizer state into the callable,
  submitit pickles it and rank 0 runs ``scontrol requeue``; the next attempt starts from that
  pickle. hpcflow: the same loop with ``hpcflow.runtime.Run`` submitted with
  ``hpcflow.launch.Executor``; the warning (USR1 to the batch shell: ``scancel --signal=USR1
  --batch <jobid>``, what Slurm's ``--signal=B:USR1@lead`` sends) makes every rank save at the
  next step boundary, commit, and the batch script requeues.
- FSDP2 (``torch.distributed.fsdp.fully_shard``: each rank holds a shard of every parameter and
  of the AdamW state): the same two ways. Rank 0's ``checkpoint()`` can only copy what rank 0
  holds, its own shards; on the next attempt every rank loads that one pickle. hpcflow saves
  every rank's shards with torch.distributed.checkpoint (DCP) and every rank restores its own.

Instrumentation only: rank 0 records each step it finishes (wall time, step, attempt); for FSDP
every rank also records a digest of its local parameter shards after each optimizer step and
right after a restore, and plain submitit's ``checkpoint()`` records what it copied (share of the
parameters and of the optimizer state, by element count, and whether the copy pickles). The
warning is sent ``--after-s`` seconds after each attempt's first step, for two attempts. Figures:

- lost steps of a preemption: steps run in the preempted attempt after the step the next
  attempt resumes from (work done twice or thrown away);
- per-attempt overhead: from the warning to the next attempt's first step, seconds (it includes
  the cluster's requeue delay, the same for both);
- final state: whether the parameters (and for FSDP the optimizer state) equal those of an
  uninterrupted run of the same variant (sha256 of every full tensor): each variant has its own
  control, run side by side before the preempted runs, and the two controls are compared with
  each other too (the same loop, data and seed: they must agree);
- FSDP only: what each rank restored: its own shards after some step of the preempted attempt
  (``own@N``), or none of its own states (another rank's shard values).

Usage: python bench/bench_submitit.py [--steps 60] [--after-s 3] [--step-time-s 0.2]
           [--models ddp,fsdp] [--fsdp-out 2]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import submitit

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from machine import header, median, versions  # noqa: E402

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


class _StateOnTheCallable(submitit.helpers.Checkpointable):
    """State kept on the callable, as submitit's docs show: ``saved`` is what ``checkpoint()``
    copied, ``_live`` the running model and optimizer (never pickled)."""

    def __init__(self) -> None:
        self.step = 0
        self.saved: dict | None = None
        self._live: tuple | None = None

    def __getstate__(self) -> dict:
        return {"step": self.step, "saved": self.saved, "_live": None}


class PlainTrainer(_StateOnTheCallable):
    """The same DDP loop as submitit's docs checkpoint it: state kept on the callable."""

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


def _fsdp_model(out: int):  # noqa: ANN202
    """The DDP model with ``out`` outputs, sharded with FSDP2 (each Linear, then the root) on the
    current group. With 2 ranks and an even ``out`` every rank holds half of every tensor; with
    ``out`` 1 the last weight (1 x 64) is all on rank 0 and rank 1's shard of it is empty."""
    import torch
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, out))
    for layer in model:
        if hasattr(layer, "weight"):
            fully_shard(layer)
    fully_shard(model)
    return model


def _local_sha(model) -> str:  # noqa: ANN001
    """sha256 of this rank's own parameter shards (DTensor local parts), in name order."""
    import hashlib

    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        local = t.to_local() if hasattr(t, "to_local") else t
        h.update(name.encode())
        h.update(local.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def _note(cfg: dict, rank: int, **fields) -> None:  # noqa: ANN003
    """Append one line to this rank's shard-digest file."""
    with open(f"{cfg['shards']}.{rank}", "a") as f:
        f.write(json.dumps(fields) + "\n")


def _held(state: dict) -> tuple[int, int]:
    """(elements this rank holds, elements of the full tensors) over the DTensors in a state
    dict, nested dicts included (an optimizer's state)."""
    held = full = 0
    for value in state.values():
        if isinstance(value, dict):
            h, f = _held(value)
            held, full = held + h, full + f
        elif hasattr(value, "to_local"):
            held += value.to_local().numel()
            full += value.numel()
    return held, full


def train_hpcflow_fsdp(cfg: dict) -> dict:
    """The FSDP2 loop with hpcflow.runtime.Run: every rank saves and restores its own shards."""
    import torch

    from hpcflow.runtime import Run, optimizer_sha256, params_sha256

    with Run.from_env() as run:
        model = _fsdp_model(cfg["fsdp_out"])
        optim = torch.optim.AdamW(model.parameters(), lr=0.01)
        state = {"model": model, "optim": optim}
        step = run.restore(state)
        attempt = int(os.environ.get("SLURM_RESTART_COUNT", "0"))
        rank = run.env.rank
        if step:
            _note(cfg, rank, attempt=attempt, restored=_local_sha(model), resume_step=step)
        while step < cfg["steps"]:
            x, y = _batch(step, rank)
            torch.nn.functional.mse_loss(model(x), y.expand(-1, cfg["fsdp_out"])).backward()
            optim.step()
            optim.zero_grad()
            _note(cfg, rank, attempt=attempt, step=step + 1, sha=_local_sha(model))
            time.sleep(cfg["step_time_s"])
            step += 1
            if run.env.is_rank0:
                _record(cfg["record"], step, attempt)
            run.step_done(step, state)
        return {"sha": params_sha256(model), "optim": optimizer_sha256(model, optim), "step": step}


class PlainFSDPTrainer(_StateOnTheCallable):
    """The FSDP2 loop checkpointed as submitit's docs show (state kept on the callable, copied
    by rank 0's signal handler, pickled by submitit)."""

    def __call__(self, cfg: dict) -> dict:
        import torch
        import torch.distributed as dist

        from hpcflow.runtime import optimizer_sha256, params_sha256

        denv = submitit.helpers.TorchDistributedEnvironment().export()
        dist.init_process_group("gloo", rank=denv.rank, world_size=denv.world_size)
        model = _fsdp_model(cfg["fsdp_out"])
        optim = torch.optim.AdamW(model.parameters(), lr=0.01)
        attempt = int(os.environ.get("SLURM_RESTART_COUNT", "0"))
        if self.saved is not None:
            model.load_state_dict(self.saved["model"])
            optim.load_state_dict(self.saved["optim"])
            _note(cfg, denv.rank, attempt=attempt, restored=_local_sha(model),
                  resume_step=self.step)
        self._live = (model, optim, cfg, attempt)
        while self.step < cfg["steps"]:
            x, y = _batch(self.step, denv.rank)
            torch.nn.functional.mse_loss(model(x), y.expand(-1, cfg["fsdp_out"])).backward()
            optim.step()
            optim.zero_grad()
            _note(cfg, denv.rank, attempt=attempt, step=self.step + 1, sha=_local_sha(model))
            time.sleep(cfg["step_time_s"])
            self.step += 1
            if denv.rank == 0:
                _record(cfg["record"], self.step, attempt)
        result = {"sha": params_sha256(model), "optim": optimizer_sha256(model, optim),
                  "step": self.step}
        dist.barrier()
        dist.destroy_process_group()
        return result

    def checkpoint(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN201
        import copy

        import cloudpickle

        if self._live is not None:  # in rank 0's signal handler, wherever the step is
            model, optim, cfg, attempt = self._live
            self.saved = {"model": copy.deepcopy(model.state_dict()),
                          "optim": copy.deepcopy(optim.state_dict())}
            probe = {"rank": int(os.environ.get("SLURM_PROCID", "-1")), "attempt": attempt,
                     "step": self.step, "model": _held(self.saved["model"]),
                     "optim": _held(self.saved["optim"].get("state", {}))}
            try:
                probe["pickle_bytes"] = len(cloudpickle.dumps(self.saved))
            except Exception as exc:  # noqa: BLE001 - the measurement is the error
                probe["pickle_error"] = f"{type(exc).__name__}: {exc}"
            with open(cfg["probe"], "a") as f:
                f.write(json.dumps(probe) + "\n")
        return super().checkpoint(*args, **kwargs)


def _records(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _wait(job, pred, timeout_s: float) -> bool:  # noqa: ANN001
    """Poll ``pred`` until it holds (True) or the job is over or ``timeout_s`` passed (False)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if pred():
            return True
        if job.done():
            return bool(pred())
        time.sleep(0.2)
    return False


def drive(job, record: Path, signal_cmd: list[str], after_s: float) -> dict:  # noqa: ANN001
    """Preempt two attempts ``after_s`` after their first step; return the figures. A job that
    does not come back from a preemption is reported with its error, not raised."""
    sent = []
    for attempt in range(2):
        if not _wait(job, lambda a=attempt: any(r["attempt"] == a for r in _records(record)),
                     300):
            break
        time.sleep(after_s)
        at = time.time()
        if subprocess.run([*signal_cmd, job.job_id], capture_output=True).returncode != 0:
            break  # the job ended before its warning (it failed in this attempt)
        sent.append(at)
        if not _wait(job, lambda a=attempt: any(r["attempt"] == a + 1
                                                for r in _records(record)), 180):
            break
    try:
        result, error = job.results()[0], None  # rank 0's (plain submitit's result() refuses
    except Exception as exc:  # noqa: BLE001          a multi-task job)
        result, error = None, _failure(job, exc)
    recs = _records(record)
    lost, overhead = [], []
    for attempt, at in enumerate(sent):
        ran = [r["step"] for r in recs if r["attempt"] == attempt]
        nxt = [r for r in recs if r["attempt"] == attempt + 1]
        if not nxt:
            break
        lost.append(max(ran) - (nxt[0]["step"] - 1))
        overhead.append(nxt[0]["t"] - at)
    return {"result": result, "error": error, "lost": lost, "overhead": overhead}


def _raised(exc: BaseException) -> str:
    """The exception a task raised on its node: the last ``...Error: ...`` line of the remote
    traceback submitit puts in its message, at most 100 characters."""
    lines = [x.strip() for x in str(exc).strip().splitlines() if x.strip()]
    raised = [x for x in lines if re.match(r"[A-Za-z_.]*(Error|Exception)\b", x)]
    text = raised[-1] if raised else (lines[0] if lines else type(exc).__name__)
    return text if len(text) <= 100 else text[:97] + "..."


def _failure(job, exc: BaseException) -> str:  # noqa: ANN001
    """What each failed task of ``job`` raised ("task 1: RuntimeError: ..."), rank by rank."""
    parts = []
    for task in range(job.num_tasks):
        try:
            err = job.task(task).exception()
        except Exception as other:  # noqa: BLE001 - its result cannot be read: that is the news
            err = other
        if err is not None:
            parts.append(f"task {task}: {_raised(err)}")
    return "; ".join(parts) or _raised(exc)


def restored(shards: str, ranks: int) -> list[list[str]]:
    """Per preemption, per rank: what it restored: ``own@N`` (its own shards after step N of
    the preempted attempt; ``resumed at M`` when it resumes at another step) or ``not its own``."""
    out: dict[int, list[str]] = {}
    for rank in range(ranks):
        lines = _records(Path(f"{shards}.{rank}"))
        for back in (x for x in lines if "restored" in x):
            mine = [x["step"] for x in lines
                    if x.get("attempt") == back["attempt"] - 1 and x.get("sha") == back["restored"]]
            what = f"own@{mine[-1]}" if mine else "not its own"
            if mine and mine[-1] != back["resume_step"]:
                what += f" (resumed at {back['resume_step']})"
            out.setdefault(back["attempt"], []).append(f"rank {rank}: {what}")
    return [out[a] for a in sorted(out)]


def _same(fig: dict, reference: dict) -> str:
    if fig["result"] is None:
        return f"no result ({fig['error']})"
    keys = [k for k in ("sha", "optim") if k in reference and k in fig["result"]]
    return str(bool(keys) and all(fig["result"][k] == reference[k] for k in keys))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--after-s", type=float, default=3.0)
    parser.add_argument("--step-time-s", type=float, default=0.2)
    parser.add_argument("--models", default="ddp,fsdp", help="comma-separated: ddp, fsdp")
    parser.add_argument("--fsdp-out", type=int, default=2,
                        help="outputs of the FSDP model's last layer; 1 shards it unevenly")
    args = parser.parse_args()
    models = [m for m in ("ddp", "fsdp") if m in args.models.split(",")]
    started = time.monotonic()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])
    work = Path(tempfile.mkdtemp(prefix="bench-submitit-"))
    os.environ.setdefault("HPCFLOW_HOME", str(work / "home"))
    layout = {"nodes": 2, "tasks_per_node": 1}

    def cfg(name: str) -> dict:
        return {"steps": args.steps, "step_time_s": args.step_time_s,
                "record": str(work / f"{name}.jsonl"), "shards": str(work / f"{name}.shards"),
                "probe": str(work / f"{name}.probe.jsonl"), "fsdp_out": args.fsdp_out}

    ours = Executor(work / "hpcflow", time_limit="00:10:00", env={"OMP_NUM_THREADS": "1"},
                    **layout)
    plain_ex = submitit.AutoExecutor(folder=work / "plain", cluster="slurm")
    plain_ex.update_parameters(timeout_min=10, nodes=2, tasks_per_node=1,
                               slurm_additional_parameters={"requeue": True})
    trainers = {"ddp": (train_hpcflow, PlainTrainer), "fsdp": (train_hpcflow_fsdp, PlainFSDPTrainer)}
    # The uninterrupted controls first, side by side (their timing is not measured): one per
    # variant, so each preempted run is compared with its own kind.
    refs = {m: ours.submit(trainers[m][0], cfg(f"{m}-reference")) for m in models}
    plain_refs = {m: plain_ex.submit(trainers[m][1](), cfg(f"{m}-plain-reference"))
                  for m in models}
    reference = {(m, "hpcflow.launch"): job.result() for m, job in refs.items()}
    reference.update({(m, "plain submitit"): job.results()[0] for m, job in plain_refs.items()})
    figures = {}
    for m in models:
        job = ours.submit(trainers[m][0], cfg(f"{m}-hpcflow"))
        figures[(m, "hpcflow.launch")] = drive(job, work / f"{m}-hpcflow.jsonl",
                                               ["scancel", "--signal=USR1", "--batch"],
                                               args.after_s)
        pjob = plain_ex.submit(trainers[m][1](), cfg(f"{m}-plain"))
        figures[(m, "plain submitit")] = drive(pjob, work / f"{m}-plain.jsonl",
                                               ["scancel", "--signal=USR2"], args.after_s)

    for line in header("bench_submitit: plain submitit against hpcflow.launch"):
        print(line)
    print(f"# {versions(('torch', 'submitit', 'hpcflow'))}; 2 nodes x 1 rank, gloo; "
          f"{args.steps} steps of {args.step_time_s} s; warned {args.after_s} s after the first "
          f"step of attempts 0 and 1; FSDP model 16-64-{args.fsdp_out}; whole run "
          f"{time.monotonic() - started:.0f} s")
    print(f"{'model':<6}{'variant':<16}{'lost steps':<14}{'overhead s':<18}"
          "final = its own uninterrupted control")
    for (m, name), fig in sorted(figures.items(), key=lambda kv: (models.index(kv[0][0]),
                                                                    kv[0][1] != "plain submitit")):
        over = ", ".join(f"{x:.1f}" for x in fig["overhead"])
        print(f"{m:<6}{name:<16}{str(fig['lost']):<14}{over:<18}"
              f"{_same(fig, reference[(m, name)])}")
    for m in models:
        controls = {"result": reference[(m, "plain submitit")], "error": ""}
        print(f"{m}: the two uninterrupted controls agree: "
              f"{_same(controls, reference[(m, 'hpcflow.launch')])}")
    for m in models:
        plain = median(figures[(m, "plain submitit")]["overhead"])
        ours_s = median(figures[(m, "hpcflow.launch")]["overhead"])
        ratio = ours_s / plain if plain else float("nan")
        print(f"{m}: median overhead per preemption: plain submitit {plain:.1f} s, "
              f"hpcflow.launch {ours_s:.1f} s (ratio hpcflow/plain {ratio:.2f})")
    if "fsdp" in models:
        for name, tag in (("plain submitit", "plain"), ("hpcflow.launch", "hpcflow")):
            for i, ranks in enumerate(restored(str(work / f"fsdp-{tag}.shards"), 2)):
                print(f"fsdp {name}, preemption {i + 1}: restored {'; '.join(ranks)}")
        probes = _records(work / "fsdp-plain.probe.jsonl")
        print("fsdp plain submitit: checkpoint() ran on rank(s) "
              f"{sorted({p['rank'] for p in probes})} of 0-1")
        for probe in probes:
            (mh, mf), (oh, of) = probe["model"], probe["optim"]
            pickled = (f"pickles to {probe['pickle_bytes']} bytes" if "pickle_bytes" in probe
                       else f"does not pickle: {probe['pickle_error']}")
            print(f"fsdp plain submitit, attempt {probe['attempt']}: rank {probe['rank']}'s "
                  f"checkpoint() copy holds {mh}/{mf} parameter elements "
                  f"({mh / mf:.0%}) and {oh}/{of or 1} optimizer-state elements "
                  f"({oh / (of or 1):.0%}), rank {probe['rank']}'s shards; it {pickled}")


if __name__ == "__main__":
    main()
