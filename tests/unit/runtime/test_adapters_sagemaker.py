"""The adapters' rules for a checkpoint folder per host and for SIGTERM: which rank keeps a
folder, what makes a framework checkpoint complete on a host, which step every host agrees on,
where SageMaker's checkpoint folder is, and SIGTERM taken back from Lightning and refused to
the Trainer's own checkpointing. The real-process side is in
tests/integration/sagemaker/test_adapters_in_container.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from hpcflow.runtime import adapter_files as files
from hpcflow.runtime.runconfig import RunConfig
from hpcflow.runtime.sagemaker_env import checkpoint_local_path, default_checkpoint_dir

PY = sys.executable
MARKER = "hpcflow-commit.json"


@pytest.mark.parametrize(("rank", "local_rank", "host_local", "keeper"), [
    (0, 0, False, True),   # one shared folder: rank 0 alone
    (2, 0, False, False),
    (2, 0, True, True),    # a folder per host: the first rank of each host
    (3, 1, True, False),
    (0, 0, True, True),
])
def test_keeper(rank, local_rank, host_local, keeper):
    assert files.is_keeper(rank, local_rank, host_local) is keeper


@pytest.mark.parametrize(("reports", "step"), [
    ([[3, 6, 9], None, [3, 6]], 6),   # host 2 lacks 9: the newest complete everywhere is 6
    ([[3, 6], [3, 6]], 6),
    ([[3], [6]], None),
    ([None, None], None),
    ([[], [4]], None),
    ([[8, 2]], 8),
])
def test_agree_takes_the_newest_step_complete_on_every_host(reports, step):
    assert files.agree(reports) == step


@pytest.mark.parametrize(("committed", "keep", "oldest"), [
    ([2, 4, 6], 2, 4), ([2], 3, 2), ([], 2, None), ([6, 2, 4, 4], 1, 6),
])
def test_oldest_kept(committed, keep, oldest):
    assert files.oldest_kept(committed, keep) == oldest


def test_merge_listings_keeps_rank_order_and_every_host():
    merged = files.merge_listings([{"model": 10, "rng_state_0.pth": 3}, None,
                                   {"rng_state_1.pth": 3, "model": 99}])
    assert merged == {"model": 10, "rng_state_0.pth": 3, "rng_state_1.pth": 3}


def folder_with(tmp_path, marker: object | None, present: dict[str, bytes]):  # noqa: ANN201
    folder = tmp_path / "checkpoint-4"
    (folder / "sub").mkdir(parents=True)
    for name, body in present.items():
        (folder / name).write_bytes(body)
    if marker is not None:
        (folder / MARKER).write_text(marker if isinstance(marker, str) else json.dumps(marker))
    return folder


@pytest.mark.parametrize(("marker", "present", "says"), [
    pytest.param({"files": {"a": 3, "sub/b": 1}}, {"a": b"xyz", "sub/b": b"1"}, None,
                 id="complete"),
    pytest.param({"step": 4}, {}, None, id="record-without-a-file-list"),
    pytest.param(None, {"a": b"xyz"}, "no hpcflow-commit.json", id="no-marker"),
    pytest.param("{", {}, "hpcflow-commit.json is not JSON", id="garbled"),
    pytest.param([1], {}, "hpcflow-commit.json is not a JSON object", id="a-list"),
    pytest.param({"files": {"a": 3, "rng_state_1.pth": 5}}, {"a": b"xyz"},
                 "rng_state_1.pth is missing", id="a-host-file-never-synced"),
    pytest.param({"files": {"a": 3}}, {"a": b"x"}, "a has 1 bytes, the record says 3",
                 id="half-written"),
])
def test_a_checkpoint_is_complete_only_with_every_listed_file(tmp_path, marker, present, says):
    folder = folder_with(tmp_path, marker, present)
    assert files.problem(folder, MARKER) == says


def test_listing_names_every_file_but_the_marker(tmp_path):
    folder = folder_with(tmp_path, {"files": {}}, {"a": b"xyz", "sub/b": b"1"})
    assert files.listing(folder, MARKER) == {"a": 3, "sub/b": 1}
    assert files.listing(tmp_path / "absent") == {}


def test_hf_latest_checkpoint_skips_a_record_whose_files_are_not_all_here(tmp_path):
    from hpcflow.runtime import hf  # imports transformers: not at collection

    good = tmp_path / "checkpoint-4"
    good.mkdir()
    (good / "model.safetensors").write_bytes(b"12345")
    (good / MARKER).write_text(json.dumps({"files": {"model.safetensors": 5}}))
    newer = tmp_path / "checkpoint-8"
    newer.mkdir()
    (newer / "model.safetensors").write_bytes(b"12345")
    (newer / MARKER).write_text(json.dumps(
        {"files": {"model.safetensors": 5, "rng_state_1.pth": 14}}))
    assert hf.latest_checkpoint(tmp_path) == str(good)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-4"]


def test_lightning_latest_checkpoint_removes_a_save_cut_short(tmp_path):
    from hpcflow.runtime import lightning  # imports lightning: not at collection

    for name in ("step_4.ckpt", "step_9.ckpt.tmp"):
        (tmp_path / name).write_bytes(b"x")
    assert lightning.latest_checkpoint(tmp_path) == str(tmp_path / "step_4.ckpt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_4.ckpt"]


# ---- where SageMaker's checkpoint folder is

def container(tmp_path, checkpoint_config: str | None) -> dict[str, str]:
    config = tmp_path / "input" / "config"
    config.mkdir(parents=True)
    if checkpoint_config is not None:
        (config / "checkpointconfig.json").write_text(checkpoint_config)
    return {"SM_CURRENT_HOST": "algo-1", "SM_HOSTS": '["algo-1", "algo-2"]',
            "SAGEMAKER_BASE_DIR": str(tmp_path)}


@pytest.mark.parametrize(("text", "where"), [
    pytest.param(None, "{base}/checkpoints", id="no-file-the-default"),
    pytest.param('{"LocalPath": "/opt/ml/synced", "S3Uri": "s3://b/p"}', "{base}/synced",
                 id="under-opt-ml"),
    pytest.param('{"LocalPath": "/opt/ml"}', "{base}", id="the-root-itself"),
    pytest.param('{"LocalPath": "/scratch/ckpt"}', "/scratch/ckpt", id="elsewhere"),
    pytest.param('{"S3Uri": "s3://b/p"}', "{base}/checkpoints", id="no-local-path"),
    pytest.param('{"LocalPath": ""}', "{base}/checkpoints", id="empty-local-path"),
])
def test_checkpoint_folder_comes_from_checkpointconfig(tmp_path, text, where):
    environ = container(tmp_path, text)
    expected = where.format(base=tmp_path)
    assert str(default_checkpoint_dir(environ)) == expected
    assert str(RunConfig.from_environ(environ).checkpoint_dir) == expected
    given = RunConfig.from_environ({**environ, "HPCFLOW_CHECKPOINT_DIR": "/given"})
    assert str(given.checkpoint_dir) == "/given"  # the job's own setting still wins


@pytest.mark.parametrize(("text", "says"), [
    pytest.param("{", "not JSON", id="not-json"),
    pytest.param("[]", "JSON object", id="a-list"),
    pytest.param('{"LocalPath": "ckpt"}', "LocalPath must be an absolute path, got 'ckpt'",
                 id="relative"),
    pytest.param('{"LocalPath": 7}', "LocalPath must be an absolute path, got 7", id="number"),
])
def test_a_garbled_checkpointconfig_is_refused_by_name(tmp_path, text, says):
    with pytest.raises(ValueError, match=says) as info:
        checkpoint_local_path(container(tmp_path, text))
    assert "checkpointconfig.json" in str(info.value)


def test_outside_sagemaker_no_checkpointconfig_is_read(tmp_path):
    (tmp_path / "input" / "config").mkdir(parents=True)
    (tmp_path / "input" / "config" / "checkpointconfig.json").write_text("{")
    assert default_checkpoint_dir({}) is None


# ---- SIGTERM

LIGHTNING_TERM = """
import os, signal, sys
import lightning.pytorch as pl, torch
from hpcflow.runtime import Run
from hpcflow.runtime.lightning import HpcflowCallback
class M(pl.LightningModule):
    def __init__(s): super().__init__(); s.l = torch.nn.Linear(2, 1)
    def training_step(s, b, i): return s.l(b[0]).pow(2).mean()
    def configure_optimizers(s): return torch.optim.SGD(s.parameters(), lr=0.1)
class Term(pl.Callback):  # after hpcflow's callback: TERM lands after its look at the flag
    def on_train_batch_end(self, trainer, *args):
        if trainer.global_step == 3:
            os.kill(os.getpid(), signal.SIGTERM)
with Run.from_env(join_process_group=False, checkpoint_dir="ckpt") as run:
    t = pl.Trainer(accelerator="cpu", devices=1, max_steps=8, logger=False,
                   enable_checkpointing=False, enable_progress_bar=False,
                   enable_model_summary=False, callbacks=[HpcflowCallback(run), Term()])
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.ones(32, 2)))
    t.fit(M(), data)
"""


def clean_env() -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path), "OMP_NUM_THREADS": "1"}


def test_lightning_sigterm_is_a_warning_not_lightnings_exit(tmp_path):
    proc = subprocess.run([PY, "-c", LIGHTNING_TERM], cwd=tmp_path, env=clean_env(),
                          capture_output=True, text=True, timeout=180)
    # Lightning's own handler would end the fit with SIGTERMException at the end of step 3's
    # batch, unsaved; hpcflow's handler, put back, has the step-4 boundary save and commit.
    assert proc.returncode == 75, proc.stdout + proc.stderr
    assert 'hpcflow-preempted {"step": 4}' in proc.stdout
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["step_4.ckpt"]


HF_JIT = """
import torch
from transformers import Trainer, TrainingArguments
from hpcflow.runtime import Run
from hpcflow.runtime.hf import HpcflowCallback
class M(torch.nn.Module):
    def __init__(s): super().__init__(); s.l = torch.nn.Linear(2, 1)
    def forward(s, x, labels=None): return {"loss": s.l(x).pow(2).mean()}
data = [{"x": torch.ones(2), "labels": torch.zeros(1)}] * 4
with Run.from_env(checkpoint_dir="out") as run:
    args = TrainingArguments(output_dir="out", max_steps=2, per_device_train_batch_size=2,
                             report_to=[], use_cpu=True, save_strategy="no",
                             enable_jit_checkpoint=True, disable_tqdm=True)
    Trainer(M(), args, train_dataset=data, callbacks=[HpcflowCallback(run)]).train()
"""


def test_hf_jit_checkpointing_is_refused(tmp_path):
    proc = subprocess.run([PY, "-c", HF_JIT], cwd=tmp_path, env=clean_env(),
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode != 0
    assert "enable_jit_checkpoint=False" in proc.stderr, proc.stderr
    assert not list((tmp_path / "out").glob("checkpoint-*"))
