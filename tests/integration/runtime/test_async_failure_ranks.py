"""A background interval save that fails on four real gloo ranks (a 2-node x 2-task step): the
ranks agree at the next step boundary, rank 0 reports it at once, the step is saved again in
line, and since the disk is still full every rank stops with the runtime's status 5, long before
the next interval save would have noticed. Each rank records its own exit."""

from __future__ import annotations

import pytest
from runtime_launch import WORLD_SIZE, ForkSrun, job_id_with_free_port

from hpcflow import protocol as P

pytestmark = [pytest.mark.dist, pytest.mark.timeout(240)]

INTERVAL = 10


def test_a_failed_background_save_stops_every_rank_at_once(tmp_path, full_disk):
    srun = ForkSrun()
    run_dir = tmp_path / "run"
    job_id = job_id_with_free_port()
    try:
        step = srun.start(tmp_path / "logs", ["--steps", "60", "--step-time-s", "0.05",
                                              "--async-checkpoint"], job_id=job_id,
                          extra_env={"HPCFLOW_RUN_DIR": str(run_dir),
                                     "HPCFLOW_CHECKPOINT_DIR": str(full_disk),
                                     "HPCFLOW_CHECKPOINT_INTERVAL": str(INTERVAL)})
        codes = srun.wait(step, timeout_s=180)
    finally:
        srun.close()
    assert codes == [5] * WORLD_SIZE, step.dump()
    failed = [c for c in step.rank0_lines("hpcflow-checkpoint") if c.get("failed")]
    assert [c["step"] for c in failed] == [INTERVAL], step.dump()
    assert "No space left on device" in failed[0]["error"]
    trained = [s["step"] for s in step.rank0_lines("hpcflow-step")]
    # Known within a few steps of the failed save, not at the next interval (step 20).
    assert max(trained) < 2 * INTERVAL, trained
    exits = P.state_dir(run_dir) / P.exits_name(job_id, 0)
    for rank in range(WORLD_SIZE):
        status, _, reason = P.parse_rank_exit((exits / str(rank)).read_text())
        assert status == 5 and reason.startswith("CheckpointError"), reason
