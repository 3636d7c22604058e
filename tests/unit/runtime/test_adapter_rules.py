"""The framework adapters' own rules, in one process: Lightning's auto-requeue refused, and only
complete checkpoints offered for a resume."""

from __future__ import annotations

import subprocess
import sys

PY = sys.executable


def test_hf_latest_checkpoint_takes_the_newest_committed_and_removes_partial_ones(tmp_path):
    from hpcflow.runtime import hf  # imports transformers: not at collection

    for step, committed in ((5, True), (10, True), (15, False)):
        folder = tmp_path / f"checkpoint-{step}"
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(b"x")
        if committed:
            (folder / hf.COMMIT_MARKER).write_text("{}")
    (tmp_path / "runs").mkdir()  # not a checkpoint: left alone
    assert hf.latest_checkpoint(tmp_path) == str(tmp_path / "checkpoint-10")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-10", "checkpoint-5", "runs"]
    assert hf.latest_checkpoint(tmp_path / "missing") is None


def test_lightning_latest_checkpoint_never_offers_a_tmp_file(tmp_path):
    from hpcflow.runtime import lightning  # imports lightning: not at collection

    for name in ("step_4.ckpt", "step_12.ckpt", "step_20.ckpt.tmp"):
        (tmp_path / name).write_bytes(b"x")
    assert lightning.latest_checkpoint(tmp_path) == str(tmp_path / "step_12.ckpt")
    assert lightning.latest_checkpoint(None) is None


def test_lightning_auto_requeue_is_refused(tmp_path):
    code = (
        "import lightning.pytorch as pl, torch\n"
        "from lightning.pytorch.plugins.environments import SLURMEnvironment\n"
        "from hpcflow.runtime import Run\n"
        "from hpcflow.runtime.lightning import HpcflowCallback\n"
        "class M(pl.LightningModule):\n"
        "    def __init__(s): super().__init__(); s.l = torch.nn.Linear(2, 1)\n"
        "    def training_step(s, b, i): return s.l(b[0]).sum()\n"
        "    def configure_optimizers(s): return torch.optim.SGD(s.parameters(), lr=0.1)\n"
        "run = Run.from_env(join_process_group=False, checkpoint_dir='ckpt')\n"
        "t = pl.Trainer(accelerator='cpu', devices=1, max_steps=1, logger=False,\n"
        "               plugins=[SLURMEnvironment()], callbacks=[HpcflowCallback(run)])\n"
        "data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.ones(4, 2)))\n"
        "t.fit(M(), data)\n"
    )
    env = {"PATH": "/usr/bin:/bin", "SLURM_NTASKS": "1", "SLURM_JOB_NAME": "pl",
           "SLURM_NODELIST": "n1", "SLURM_JOB_NODELIST": "n1", "SLURM_PROCID": "0", "SLURM_LOCALID": "0",
           "SLURM_NODEID": "0", "SLURM_JOB_ID": "7", "SLURM_NTASKS_PER_NODE": "1"}
    proc = subprocess.run([PY, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode != 0
    assert "auto_requeue=False" in proc.stderr
