"""Every pipeline schedule, and DDP, computes the same training run (four gloo ranks, one node).

Without dropout the math of a step does not depend on how it is scheduled: the same layers, the
same micro-batches, gradients accumulated in micro-batch order. So every schedule, and pure data
parallelism with DDP, must give the same losses (to float rounding of other reduction orders).
"""

from __future__ import annotations

import math

import pytest
from runtime_launch import ForkSrun, job_id_with_free_port

pytestmark = [pytest.mark.dist, pytest.mark.timeout(240)]

STEPS = 3
BASE = [
    "--model", "lm", "--model-size", "tiny", "--seq-len", "32", "--global-batch-size", "4",
    "--microbatches", "2", "--steps", str(STEPS), "--seed", "2", "--dropout", "0",
    "--data-max-bytes", "100000",
]
VARIANTS = {
    "gpipe": ["--pp", "2", "--tp", "2", "--schedule", "gpipe"],
    "1f1b": ["--pp", "2", "--tp", "2", "--schedule", "1f1b"],
    "interleaved-1f1b": ["--pp", "2", "--tp", "2", "--schedule", "interleaved-1f1b"],
    "ddp": ["--pp", "1", "--dp", "4", "--tp", "1", "--dp-mode", "ddp", "--microbatches", "1"],
    "gpipe-bf16": ["--pp", "2", "--tp", "2", "--schedule", "gpipe", "--bf16"],
}
EXACT = [name for name in VARIANTS if name not in ("gpipe", "gpipe-bf16")]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    launcher = ForkSrun()
    out = {}
    try:
        for name, extra in VARIANTS.items():
            run_dir = tmp_path_factory.mktemp(name)
            step = launcher.start(run_dir / "logs", [*BASE, *extra], job_id=job_id_with_free_port(),
                                  nodes=1, tasks_per_node=4,
                                  extra_env={"HPCFLOW_RUN_DIR": str(run_dir)})
            assert launcher.wait(step, timeout_s=120) == [0] * 4, step.dump()
            out[name] = {
                "losses": [line["loss"] for line in step.rank0_lines("hpcflow-step")],
                "layout": step.rank0_lines("hpcflow-layout")[0],
                "checkpoints": step.rank0_lines("hpcflow-checkpoint"),
                "done": step.rank0_lines("hpcflow-done")[0],
            }
    finally:
        launcher.close()
    return out


@pytest.mark.parametrize("name", EXACT)
def test_schedule_gives_the_same_losses_as_gpipe(runs, name):
    reference = runs["gpipe"]["losses"]
    assert len(reference) == STEPS and all(math.isfinite(v) for v in reference)
    assert runs[name]["losses"] == pytest.approx(reference, rel=1e-4)


def test_bf16_autocast_follows_the_fp32_curve(runs):
    """bf16 matmuls round differently (8-bit mantissa), so only close, not equal."""
    got, reference = runs["gpipe-bf16"]["losses"], runs["gpipe"]["losses"]
    assert all(math.isfinite(v) for v in got)
    assert got == pytest.approx(reference, abs=0.05) and got != reference


def test_each_variant_ran_its_own_layout(runs):
    assert runs["interleaved-1f1b"]["layout"]["schedule"] == "interleaved-1f1b"
    assert runs["ddp"]["layout"]["layout"] == {"pp": 1, "dp": 4, "tp": 1}
    assert runs["ddp"]["layout"]["schedule"] is None


@pytest.mark.parametrize("name", list(VARIANTS))
def test_each_variant_checkpoints_and_digests_its_whole_state(runs, name):
    """The final save and the digests walk every parameter and optimizer entry by global name
    (two model parts per rank under the interleaved schedule)."""
    assert [c["reason"] for c in runs[name]["checkpoints"]] == ["final"]
    done = runs[name]["done"]
    assert done["step"] == STEPS and len(done["params_sha256"]) == len(done["optim_sha256"]) == 64
